"""Transformer Engine's FP8 dot-product attention (--fp8-attention): the kernel at the part's
measured MXFP8 rate, the casts before it, and the options it needs."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from astra_core.errors import ConfigError
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS, load_gpu
from astra_core.workload.generators.kernels import kernel_ns
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.models import ModelConfig

GB200 = GPUS["gb200"]
# Llama 3.1's attention geometry (64 query, 8 key/value heads of 128) at 4,096 tokens
MODEL = ModelConfig(
    "gqa-test", layers=2, hidden=8192, heads=64, kv_heads=8, ffn_hidden=1024, vocab=0, seq_len=4096
)
PLAN = LLMConfig(
    MODEL, GB200, micro_batch=2, microbatches=1, precision="fp8", fp8_recipe="mxfp8", fp8_attention=True
)


def _combined(fwd: float, bwd: float) -> float:
    """cudnn-frontend's forward and backward TFLOP/s as one rate over FlashAttention's count
    (backward 2.5x the forward's FLOPs)."""
    return 3.5 / (1 / fwd + 2.5 / bwd)


def test_the_kernel_runs_at_cudnns_measured_mxfp8_rate():
    """cudnn-frontend's GB200 MXFP8 rows at 4,096 tokens (1,685 forward, 1,054 backward
    TFLOP/s, causal): forward and backward together take the FLOPs at their combined rate."""
    core = O.fp8_attention(O.attention_core_ops(MODEL, 2, 4096, 1), MODEL, 2, 4096, 1)
    cast, kernel = core
    assert kernel.name == O.FP8_ATTENTION and O.kernel_precision(kernel, "fp8") == "fp8"
    (back,) = [o for o in O.backward([kernel])]
    assert O.kernel_precision(back, "fp8") == "fp8"
    work = 4.0 * 2 * 64 * 4096 * 4096 * 128 * 0.5 * 3.5  # forward + backward, causal
    total = kernel_ns(GB200, kernel, "fp8") + kernel_ns(GB200, back, "fp8")
    assert total == pytest.approx(work / (_combined(1685, 1054) * 1e3), rel=1e-9)
    # in BF16 it takes GB200's BF16 rows (cuDNN 9.17: 1,386 / 1,054)
    bf16 = kernel_ns(GB200, kernel, "bf16") + kernel_ns(GB200, back, "bf16")
    assert bf16 == pytest.approx(work / (_combined(1386, 1054) * 1e3), rel=1e-9)


def test_the_casts_move_the_queries_keys_values_and_the_output_gradient():
    """Forward one MXFP8 cast of Q, K and V (read 2 B, write the row-wise and column-wise
    copies with their scales); backward one of the output gradient."""
    cast, _ = O.fp8_attention(O.attention_core_ops(MODEL, 2, 4096, 2), MODEL, 2, 4096, 2)
    tokens, hd = 2 * 4096, 128
    qkv = tokens * hd * (32 + 4 + 4)  # per tensor-parallel rank of 2: 32 query, 4 + 4 kv heads
    assert cast.bytes == pytest.approx(qkv * (2 + 2 * (1 + 1 / 32)))
    (back,) = O.backward([cast])
    assert back.bytes == pytest.approx(tokens * hd * 32 * (2 + 2 * (1 + 1 / 32)))
    assert cast.flops == 0.0


def test_a_step_keeps_its_flops_and_spends_its_attention_time_at_the_fp8_rate():
    """Each layer's forward attention block differs by the cast plus the FP8 kernel less the
    BF16 one; the model's FLOPs do not change."""
    with_fp8, plain = generate_llm(PLAN), generate_llm(replace(PLAN, fp8_attention=False))
    assert with_fp8.flops[0] == pytest.approx(plain.flops[0], rel=1e-12)
    (kernel,) = O.attention_core_ops(MODEL, 2, 4096, 1)
    cast, fp8 = O.fp8_attention([kernel], MODEL, 2, 4096, 1)
    expected = (
        kernel_ns(GB200, cast, "bf16") + kernel_ns(GB200, fp8, "fp8") - kernel_ns(GB200, kernel, "bf16")
    )

    def forward_ns(wl):
        return {n.name: n.duration_ns for n in wl.stages[0] if n.name.endswith("_fwd_attn")}

    fp8_blocks, bf16_blocks = forward_ns(with_fp8), forward_ns(plain)
    assert len(fp8_blocks) == MODEL.layers and fp8_blocks.keys() == bf16_blocks.keys()
    for name, ns in fp8_blocks.items():
        assert ns - bf16_blocks[name] == pytest.approx(expected, rel=1e-9)
    assert expected != 0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"precision": "bf16", "fp8_recipe": "delayed"}, "--fp8-attention needs --precision fp8"),
        ({"fp8_recipe": "tensorwise"}, "the measured FP8 attention rates are MXFP8's"),
        ({"cp": 2}, "without --cp"),
        ({"gpu": GPUS["b200"]}, "the B200 has no measured FP8 attention rate"),
    ],
)
def test_what_fp8_attention_needs(change, message):
    with pytest.raises(ConfigError, match=message):
        generate_llm(replace(PLAN, **change))


def test_a_gpu_file_may_give_fp8_attention_rows(tmp_path):
    spec = tmp_path / "gpu.json"
    base = {"name": "x", "peak_tflops": 100, "memory_gbps": 1000}
    spec.write_text(json.dumps({**base, "fp8_attention_tflops": [[True, 128, 4096, 1200]]}))
    assert load_gpu(spec).fp8_attention_tflops == ((True, 128, 4096, 1200),)
    spec.write_text(json.dumps({**base, "fp8_attention_tflops": [[True, 128, 4096]]}))
    with pytest.raises(ConfigError, match="fp8_attention_tflops: expected rows"):
        load_gpu(spec)
