"""Sliding-window attention (GPT-OSS's alternating layers): each query meets ``window``
keys instead of the whole sequence, on every layer but each ``full_attention_every``-th;
FLOPs against the closed form derived here."""

from __future__ import annotations

import pytest

from astra_core.errors import ConfigError
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.models import MODELS, ModelConfig

B200 = GPUS["b200"]
BASE = ModelConfig(
    "window-test",
    layers=4,
    hidden=512,
    heads=8,
    kv_heads=2,
    head_dim=64,
    ffn_hidden=1024,
    vocab=0,
    mlp="swiglu",
)
WINDOWED = ModelConfig(**{**BASE.__dict__, "sliding_window": 128, "full_attention_every": 2})


def test_gpt_oss_alternates_sliding_and_full_layers():
    model = MODELS["gpt-oss-120b"]
    assert [model.window(i) for i in range(4)] == [128, 0, 128, 0]
    assert sum(1 for i in range(model.layers) if model.window(i)) == model.layers // 2
    assert MODELS["llama3-8b"].window(0) == 0


def test_a_window_is_a_band_of_the_score_matrix():
    b, s, w = 2, 1024, 128
    (full,) = O.attention_core_ops(WINDOWED, b, s, 1)
    (band,) = O.attention_core_ops(WINDOWED, b, s, 1, window=w)
    heads, hd = WINDOWED.heads, WINDOWED.hd
    assert full.flops == 4 * b * s * s * heads * hd
    assert band.flops == 4 * b * s * w * heads * hd
    assert band.shape == (b * heads, s, w, hd, False, False)  # every block of the band runs
    assert band.bytes == full.bytes  # Q, K, V read and O written either way
    # a window as long as the sequence is full causal attention
    assert O.attention_core_ops(WINDOWED, b, w, 1, window=w) == O.attention_core_ops(WINDOWED, b, w, 1)


def test_a_step_saves_the_masked_attention_of_its_sliding_layers():
    b, s, mb = 1, 1024, 2

    def flops(model):
        cfg = LLMConfig(model, B200, dp=1, microbatches=mb, micro_batch=b, seq_len=s)
        return generate_llm(cfg).model_flops[0]

    sliding = sum(1 for i in range(WINDOWED.layers) if WINDOWED.window(i))
    per_layer = 4 * b * WINDOWED.heads * WINDOWED.hd * s * (s - 128)  # forward
    assert flops(BASE) - flops(WINDOWED) == pytest.approx(sliding * mb * 3 * per_layer)


def test_windows_with_context_parallelism_are_refused():
    cfg = LLMConfig(WINDOWED, B200, dp=1, cp=2, microbatches=2, seq_len=1024)
    with pytest.raises(ConfigError, match="sliding-window attention is modelled for FlashAttention"):
        generate_llm(cfg)


def test_a_window_runs_at_its_measured_rate_where_the_part_has_one():
    # cudnn-frontend's GPT-OSS window of 128 at head dim 64 on GB200 (cuDNN 9.22): 161
    # TFLOP/s forward and 182 backward at 4,096 tokens, counted over the band
    from astra_core.workload.generators.kernels import kernel_ns, window_tflops

    gb200, b, s, w = GPUS["gb200"], 2, 4096, 128
    (band,) = O.attention_core_ops(WINDOWED, b, s, 1, window=w)
    (backward,) = O.backward([band])
    assert (band.name, backward.name) == ("attention_window", "attention_window_bwd")
    assert kernel_ns(gb200, band) == pytest.approx(band.flops / 161e3)
    assert kernel_ns(gb200, backward) == pytest.approx(2.5 * band.flops / 182e3)
    # between measured lengths: linear in log(length); another window takes the square rule
    assert window_tflops(gb200, 128, 64, 2**12.5, False) == pytest.approx((161 + 165) / 2)
    assert window_tflops(gb200, 256, 64, s, False) is None
    assert window_tflops(B200, 128, 64, s, False) is None  # no measurement on B200
