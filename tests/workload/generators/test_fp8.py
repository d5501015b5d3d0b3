"""FP8 training as Megatron-core runs it with Transformer Engine's delayed scaling: which
GEMMs are FP8, the casts in front of them, the weight cast once a step and the amax
all-reduces, each against a count derived here."""

from __future__ import annotations

import pytest

from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.kernels import kernel_ns
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.models import ModelConfig

H100 = GPUS["h100"]
GPT = ModelConfig("gpt-test", layers=4, hidden=1024, heads=16, ffn_hidden=4096, vocab=51200, seq_len=1024)
TOKENS = 2 * 1024


def test_only_the_transformer_layers_linear_gemms_run_in_fp8():
    attn = O.attention_ops(GPT, 2, 1024, 1, False, "unfused")
    head = O.head_ops(GPT, 2, 1024, 1, False)
    by_name = {o.name: o for o in attn + head + O.mlp_ops(GPT, 2, 1024, 1, False)}
    for name in ("qkv", "attn_out", "mlp_up", "mlp_down"):
        assert O.kernel_precision(by_name[name], "fp8") == "fp8"
    # the output layer, attention's products and every memory-bound kernel stay BF16
    for name in ("lm_head", "attention_scores", "attention_values", "ln_attn"):
        assert O.kernel_precision(by_name[name], "fp8") == "bf16"
    lm_head = by_name["lm_head"]
    assert kernel_ns(H100, lm_head, O.kernel_precision(lm_head, "fp8")) == kernel_ns(H100, lm_head, "bf16")
    # gradients follow their forward GEMM
    dgrad, wgrad = O.backward([by_name["attn_out"]])
    assert O.kernel_precision(dgrad, "fp8") == O.kernel_precision(wgrad, "fp8") == "fp8"


def test_each_fp8_gemm_casts_its_activation_operand_with_its_transpose():
    h, f = GPT.hidden, GPT.ffn_hidden
    attn = {o.name: o for o in O.attention_ops(GPT, 2, 1024, 1, False, "unfused")}
    mlp = {o.name: o for o in O.mlp_ops(GPT, 2, 1024, 1, False)}
    cast = lambda op: sum(k.bytes for k in O.fp8_cast_op(op))  # noqa: E731
    # the fused layer norm writes qkv's input in FP8: only its transpose (read 1, write 1)
    assert cast(attn["qkv"]) == TOKENS * h * 2
    # the attention output is BF16: cast and transpose (read 2, write 1 + 1)
    assert cast(attn["attn_out"]) == TOKENS * h * 4
    # fc2's input comes FP8 from the fused activation
    assert cast(mlp["mlp_down"]) == TOKENS * f * 2
    # backward: the output gradient of each data-gradient GEMM, from BF16 (4) or, for fc1,
    # from the fused dGELU + cast-transpose (2); the weight gradient casts nothing
    out_dgrad, out_wgrad = O.backward([attn["attn_out"]])
    assert cast(out_dgrad) == TOKENS * h * 4 and O.fp8_cast_op(out_wgrad) == []
    up_dgrad, _ = O.backward([mlp["mlp_up"]])
    assert cast(up_dgrad) == TOKENS * f * 2
    assert O.fp8_cast_op(attn["attention_scores"]) == []


def _node_bytes(precision: str, name: str) -> float:
    nodes = generate_llm(
        LLMConfig(GPT, H100, dp=2, microbatches=2, micro_batch=2, precision=precision)
    ).stages[0]
    return next(n.nbytes for n in nodes if n.name == name)


def test_a_generated_attention_block_carries_its_casts():
    h = GPT.hidden
    extra = _node_bytes("fp8", "L0_mb0_fwd_attn") - _node_bytes("bf16", "L0_mb0_fwd_attn")
    assert extra == pytest.approx(TOKENS * h * 2 + TOKENS * h * 4)


def test_the_weights_are_cast_once_a_step_in_the_optimizer_node():
    cfg = LLMConfig(GPT, H100, dp=2, microbatches=2, precision="fp8")
    wl = generate_llm(cfg)
    params = wl.dp_grad_bytes[0] / cfg.grad_bytes
    extra = _optimizer(wl) - _optimizer(generate_llm(LLMConfig(GPT, H100, dp=2, microbatches=2)))
    assert extra == pytest.approx(params * 4)


def _optimizer(wl) -> float:
    return next(n.nbytes for n in wl.stages[0] if n.name == "optimizer")


def test_amaxes_are_all_reduced_over_the_stage_after_every_forward_and_backward():
    m, pp, layers = 3, 2, GPT.layers // 2
    cfg = LLMConfig(GPT, H100, dp=2, tp=2, pp=pp, microbatches=m, precision="fp8")
    wl = generate_llm(cfg)
    amax = [n for n in wl.stages[0] if "amax" in n.name]
    assert [n.comm_type for n in amax] == [pb.ALL_REDUCE] * (2 * m)
    # FP32 amaxes: 3 per FP8 GEMM forward, 2 backward; 4 FP8 GEMMs per layer
    fwd = [n.size for n in amax if "_fwd_" in n.name]
    bwd = [n.size for n in amax if "_bwd_" in n.name]
    assert set(fwd) == {4 * 3 * 4 * layers} and set(bwd) == {4 * 2 * 4 * layers}
    # over the tensor- and data-parallel ranks of the stage: ranks 0..3 of 8
    assert wl.layout.members("amax", 0) == (0, 1, 2, 3)
    assert wl.layout.members("amax", 5) == (4, 5, 6, 7)
    assert not [
        n
        for n in generate_llm(LLMConfig(GPT, H100, dp=2, tp=2, pp=pp, microbatches=m)).stages[0]
        if "amax" in n.name
    ]


# -- current scaling (Transformer Engine's Float8CurrentScaling, --fp8-recipe tensorwise) ------


def test_current_scaling_computes_each_amax_before_its_cast():
    h = GPT.hidden
    attn = {o.name: o for o in O.attention_ops(GPT, 2, 1024, 1, False, "unfused")}

    def kernels(op):
        return [(k.name.rsplit("_", 1)[-1], k.bytes) for k in O.fp8_cast_op(op, "tensorwise")]

    # the attention output is BF16: an amax pass (read 2 B), the scale, then the cast (2 + 1 + 1)
    assert kernels(attn["attn_out"]) == [("amax", TOKENS * h * 2), ("scale", 8), ("cast", TOKENS * h * 4)]
    # the fused layer norm finds the amax as it writes, but in BF16 (1 B more than FP8)
    assert kernels(attn["qkv"]) == [("scale", 8), ("cast", TOKENS * h * 5)]


def test_current_scaling_all_reduces_the_amaxes_of_what_tensor_parallelism_gathers():
    m, tp = 2, 2
    cfg = LLMConfig(
        GPT,
        H100,
        dp=2,
        tp=tp,
        microbatches=m,
        sequence_parallel=True,
        precision="fp8",
        fp8_recipe="tensorwise",
    )
    nodes = generate_llm(cfg).stages[0]
    amax = [n for n in nodes if "amax" in n.name]
    # per layer and micro-batch: the inputs of qkv and fc1 forward, the output gradients
    # of the projection and fc2 backward; 4 FP32 bytes over the tensor-parallel pair
    assert len(amax) == m * GPT.layers * 4
    assert {(n.comm_type, n.size, n.role) for n in amax} == {(pb.ALL_REDUCE, 4, "tp")}
    # and none of delayed scaling's per-chunk reductions over the stage
    assert not [n for n in amax if n.role == "amax"]


B200 = GPUS["b200"]


def test_mxfp8_casts_once_with_both_copies_and_their_block_scales():
    """MXFP8: read BF16 (2 B), write row-wise and column-wise FP8 with an E8M0 scale per
    32 elements (2 x 33/32 B); a layer norm is not fused with the cast (1 B more for its
    BF16 output), the gated activation writes MXFP8 itself; no amax or scale kernel."""
    h = GPT.hidden
    attn = {o.name: o for o in O.attention_ops(GPT, 2, 1024, 1, False)}
    mlp = {o.name: o for o in O.mlp_ops(GPT, 2, 1024, 1, False)}
    cast = lambda op: O.fp8_cast_op(op, "mxfp8")  # noqa: E731
    per_element = 2 + 2 * (1 + 1 / 32)
    assert [k.bytes for k in cast(attn["attn_out"])] == [pytest.approx(TOKENS * h * per_element)]
    assert [k.bytes for k in cast(attn["qkv"])] == [pytest.approx(TOKENS * h * (1 + per_element))]
    assert [k.bytes for k in cast(mlp["mlp_up"])] == [pytest.approx(TOKENS * h * (1 + per_element))]
    assert cast(mlp["mlp_down"]) == []
    up_dgrad, up_wgrad = O.backward([mlp["mlp_up"]])
    assert cast(up_dgrad) == [] and cast(up_wgrad) == []
    down_dgrad, _ = O.backward([mlp["mlp_down"]])
    assert [k.bytes for k in cast(down_dgrad)] == [pytest.approx(TOKENS * h * per_element)]


def test_mxfp8_reduces_no_amax_and_needs_block_scaling_tensor_cores():
    from astra_core.errors import ConfigError

    def step(recipe: str, gpu=B200):
        cfg = LLMConfig(
            GPT, gpu, dp=1, tp=2, microbatches=2, sequence_parallel=True, precision="fp8", fp8_recipe=recipe
        )
        return [n.name for n in generate_llm(cfg).stages[0] if n.comm_type is not None]

    assert any("amax" in name for name in step("tensorwise"))
    assert not any("amax" in name for name in step("mxfp8"))
    with pytest.raises(ConfigError, match="--fp8-recipe mxfp8: the H100's tensor cores"):
        step("mxfp8", H100)
