"""The step around the backward pass as Megatron-LM and PyTorch DDP run it: the
mixed-precision optimizer kernel by kernel, gradient accumulation and DDP's bucket
copies, and the FP32 cross-entropy, each against the byte count derived here from the
source's sequence of kernels."""

from __future__ import annotations

import pytest

from astra_core.errors import ConfigError
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.models import ModelConfig

A100 = GPUS["a100"]
GPT = ModelConfig("gpt-test", layers=4, hidden=1024, heads=16, ffn_hidden=4096, vocab=51200, seq_len=1024)

# Megatron's MixedPrecisionOptimizer.step, bytes per parameter of each kernel
MAIN_GRAD_COPY = lambda grad: grad + 4  # noqa: E731  .float() of a 16-bit gradient
UNSCALE = 4 + 4  # FP16 only: read, check and write the FP32 main gradient
NORM = 4  # multi_tensor_l2norm reads it
ADAM = 4 * 4 + 3 * 4  # read weight, gradient, two moments; write weight, two moments
PARAM_COPY = 4 + 2  # FP32 master weight to the 16-bit model weight


def optimizer_bytes(nodes) -> float:
    return next(n.nbytes for n in nodes if n.name == "optimizer")


def per_rank_params(cfg: LLMConfig) -> float:
    """Parameters of a one-stage rank: its layers' and the embedding's and head's shares."""
    wl = generate_llm(cfg)
    return wl.dp_grad_bytes[0] / cfg.grad_bytes


@pytest.mark.parametrize(
    "precision, ddp, shard, buffer",
    [
        # BF16, Megatron's DDP: FP32 gradient buffer, no copy, no loss scaler; buffer zeroed (4)
        ("bf16", "megatron", NORM + ADAM + PARAM_COPY, 4),
        # FP16 (the 2021 local DDP): FP16 buffer copied to FP32, unscaled, checked; buffer zeroed (2)
        ("fp16", "megatron", MAIN_GRAD_COPY(2) + UNSCALE + NORM + ADAM + PARAM_COPY, 2),
        # FP16 under PyTorch DDP: buckets copied back into .grad (2 + 2); .grad set to None
        ("fp16", "torch", MAIN_GRAD_COPY(2) + UNSCALE + NORM + ADAM + PARAM_COPY, 2 + 2),
        # BF16 under PyTorch DDP: 16-bit gradients, so the copy to FP32 runs, the scaler does not
        ("bf16", "torch", MAIN_GRAD_COPY(2) + NORM + ADAM + PARAM_COPY, 2 + 2),
    ],
)
def test_the_optimizer_step_moves_what_megatron_s_kernels_move(precision, ddp, shard, buffer):
    cfg = LLMConfig(GPT, A100, dp=2, microbatches=2, precision=precision, ddp=ddp)
    params = per_rank_params(cfg)
    assert optimizer_bytes(generate_llm(cfg).stages[0]) == pytest.approx(params * (shard + buffer))


def test_the_distributed_optimizer_updates_a_shard_but_zeroes_the_whole_buffer():
    d = 4
    full = LLMConfig(GPT, A100, dp=d, microbatches=2)
    sharded = LLMConfig(GPT, A100, dp=d, microbatches=2, zero=1)
    params = per_rank_params(full)
    expected = params / d * (NORM + ADAM + PARAM_COPY) + params * 4
    assert optimizer_bytes(generate_llm(sharded).stages[0]) == pytest.approx(expected)


def _backward_bytes(cfg: LLMConfig, layer: int = 0) -> list[float]:
    """Bytes of layer ``layer``'s attention backward node, micro-batch by micro-batch."""
    nodes = generate_llm(cfg).stages[0]
    return [n.nbytes for n in nodes if n.name.startswith(f"L{layer}_mb") and n.name.endswith("_bwd_attn")]


def test_pytorch_ddp_accumulates_from_the_second_micro_batch_and_copies_into_buckets_on_the_last():
    m = 3
    torch = _backward_bytes(LLMConfig(GPT, A100, dp=2, microbatches=m, precision="fp16", ddp="torch"))
    fused = _backward_bytes(LLMConfig(GPT, A100, dp=2, microbatches=m, precision="fp16"))
    layer = GPT.layer_params(0)
    assert len(torch) == m
    # micro-batch 0 writes .grad fresh: what Megatron's fused accumulation moves
    assert torch[0] == pytest.approx(fused[0])
    # then AccumulateGrad adds in place: read both 16-bit gradients, write one (6 B)
    assert torch[1] - torch[0] == pytest.approx(layer * 3 * 2)
    # the last also copies the gradient into its bucket, divided on the way (2 + 2 B)
    assert torch[2] - torch[1] == pytest.approx(layer * 2 * 2)


def test_local_ddp_adds_every_micro_batch_into_its_buffer():
    local = _backward_bytes(LLMConfig(GPT, A100, dp=2, microbatches=3, overlap_grad_reduce=False))
    fused = _backward_bytes(LLMConfig(GPT, A100, dp=2, microbatches=3))
    # main_grad.add_(grad): read the BF16 gradient and the FP32 buffer, write the buffer
    for a, b in zip(local, fused):
        assert a - b == pytest.approx(GPT.layer_params(0) * (2 + 4 + 4))


def test_pytorch_ddp_buckets_are_its_25_mib_default():
    assert LLMConfig(GPT, A100, dp=2, ddp="torch").bucket_bytes == 25 * 2**20
    assert LLMConfig(GPT, A100, dp=2, ddp="torch", precision="bf16").grad_bytes == 2


def test_the_cross_entropy_runs_on_fp32_logits():
    tokens, t = 2 * 1024, 2
    ce = O.head_ops(GPT, 2, 1024, t, False)[-1]
    logits = tokens * GPT.vocab / t
    # .float() 2+4, max 4, subtract 4+4, exp 4+4, sum 4, divide 4+4
    assert ce.bytes == pytest.approx(logits * (6 + 4 + 8 + 8 + 4 + 8))
    # backward: multiply by the loss gradient 4+4, cast back 4+2
    assert O.backward([ce])[0].bytes == pytest.approx(logits * (8 + 6))


@pytest.mark.parametrize(
    "kwargs",
    [{"overlap_grad_reduce": False}, {"zero": 1}, {"grad_reduce_in_bf16": True}],
)
def test_pytorch_ddp_refuses_what_it_cannot_do(kwargs):
    with pytest.raises(ConfigError, match="^--ddp torch: PyTorch DDP always overlaps"):
        generate_llm(LLMConfig(GPT, A100, dp=2, ddp="torch", **kwargs))


def test_an_unknown_ddp_is_named():
    with pytest.raises(ConfigError, match="^--ddp: expected one of megatron, torch, got 'apex'"):
        generate_llm(LLMConfig(GPT, A100, dp=2, ddp="apex"))
