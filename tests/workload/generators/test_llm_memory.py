"""Peak memory per GPU of a generated step (astra_core.workload.generators.llm_memory).

Checked against closed forms: Korthikanti et al. 2022 (Table 2) per layer, Megatron-core's
bytes per parameter (its distributed-optimizer guide), the pipeline schedules' micro-batches
in flight, and Megatron-LM's theoretical-memory report (``report_theoretical_memory``),
which the test writes out from its published formula.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.workload.generators.gpus import load_gpu
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.llm_memory import GiB, layer_activation_bytes, stage_memory
from astra_core.workload.generators.models import MODELS, ModelConfig


def _gpt(hidden: int, heads: int, layers: int, vocab: int = 51200, seq: int = 2048) -> ModelConfig:
    return ModelConfig(
        f"gpt-{hidden}", layers=layers, hidden=hidden, heads=heads, ffn_hidden=4 * hidden, vocab=vocab,
        seq_len=seq, mlp="gelu", tie_embeddings=True,
    )  # fmt: skip


def _plan(model: ModelConfig, **kw) -> LLMConfig:
    """A Megatron GPT plan as Korthikanti et al. ran it: dropout, selective recomputation of
    the attention core."""
    base = {"recompute": "selective", "attention": "unfused", "dropout": True, "sequence_parallel": True}
    return LLMConfig(model, load_gpu("A100"), **(base | kw))


def test_without_sequence_parallelism_the_layer_is_10_plus_24_over_t():
    """Korthikanti Table 2: 34 s b h / t with sequence parallelism, s b h (10 + 24 / t)
    with tensor parallelism alone (selective recomputation)."""
    model = _gpt(12288, 96, 96)
    sbh = 2048 * 12288
    for t in (1, 2, 4, 8):
        assert layer_activation_bytes(_plan(model, tp=t, sequence_parallel=False), 0) == pytest.approx(
            sbh * (10 + 24 / t)
        )
        assert layer_activation_bytes(_plan(model, tp=t), 0) == pytest.approx(34 * sbh / t)


def test_unfused_attention_without_recomputation_adds_the_score_tensors():
    """Korthikanti's 5 a s^2 b (softmax output, dropout mask and output) per layer."""
    model = _gpt(6144, 64, 48)
    base = layer_activation_bytes(_plan(model, tp=8), 0)
    full = layer_activation_bytes(_plan(model, tp=8, recompute="none"), 0)
    assert full - base == pytest.approx(5 * 64 * 2048**2 / 8)


def test_full_recomputation_keeps_each_layers_input():
    model = _gpt(12288, 96, 96)
    cfg = _plan(model, tp=8, pp=8, dp=8, microbatches=64, recompute="full")
    assert layer_activation_bytes(cfg, 0) == pytest.approx(2 * 2048 * 12288 / 8)


@pytest.mark.parametrize(
    ("precision", "zero", "per_param"),
    [("bf16", 0, 18), ("bf16", 1, 6 + 12 / 8), ("fp16", 0, 20), ("fp16", 1, 4 + 16 / 8), ("bf16", 3, 18 / 8)],
)
def test_model_state_bytes_per_parameter(precision, zero, per_param):
    """Megatron-core's distributed-optimizer guide: 18 / 6 + 12/d (BF16, FP32 gradients),
    20 / 4 + 16/d (FP16); ZeRO 3 shards all of it (Rajbhandari et al. 2020)."""
    model = ModelConfig("bare", layers=8, hidden=1024, heads=16, ffn_hidden=4096, vocab=0)
    cfg = LLMConfig(model, load_gpu("A100"), dp=8, zero=zero, precision=precision)
    mem = stage_memory(cfg, 1)[0]
    assert mem.state_bytes == pytest.approx(per_param * model.params())


def test_pipeline_holds_its_schedules_micro_batches():
    """1F1B: stage p holds min(P - p, M) micro-batches; interleaved 1F1B
    2 (P - p - 1) + (V - 1) P + 1 chunks (Narayanan et al. SC'21, Megatron-LM's warm-up)."""
    model = ModelConfig("bare", layers=32, hidden=1024, heads=16, ffn_hidden=4096, vocab=0)
    P, M, V = 4, 16, 2
    flat = stage_memory(LLMConfig(model, load_gpu("A100"), pp=P, microbatches=M), M)
    assert [m.in_flight for m in flat] == [P - p for p in range(P)]
    mixed = stage_memory(LLMConfig(model, load_gpu("A100"), pp=P, microbatches=M, virtual_stages=V), M)
    assert [m.in_flight for m in mixed] == [2 * (P - p - 1) + (V - 1) * P + 1 for p in range(P)]
    layer = layer_activation_bytes(LLMConfig(model, load_gpu("A100")), 0)
    assert mixed[0].activations_bytes == pytest.approx(mixed[0].in_flight * 32 / (P * V) * layer)
    few = stage_memory(LLMConfig(model, load_gpu("A100"), pp=P, microbatches=2), 2)
    assert [m.in_flight for m in few] == [2, 2, 2, 1]


def test_fp8_saves_gemm_inputs_in_one_byte_and_caches_weights():
    model = MODELS["llama3-8b"]
    bf16 = LLMConfig(model, load_gpu("H100"), tp=1, dp=8, zero=1)
    fp8 = LLMConfig(model, load_gpu("H100"), tp=1, dp=8, zero=1, precision="fp8")
    a16, a8 = layer_activation_bytes(bf16, 0), layer_activation_bytes(fp8, 0)
    tok, h, f = 8192, 4096, 14336
    # one byte less per element of the QKV, output-projection, fc1 and fc2 inputs (h, h, h,
    # f), two more for the attention's 16-bit output kept beside the projection's FP8 copy
    assert a16 - a8 == pytest.approx(tok * (3 * h + f) - 2 * tok * h)
    w16, w8 = stage_memory(bf16, 1)[0].weights_bytes, stage_memory(fp8, 1)[0].weights_bytes
    linear = model.layers * (model.attention_params() + model.dense_mlp_params())
    assert w8 - w16 == pytest.approx(2 * linear)
    # --fp8-param-gather: the linear weights are FP8 tensors alone, their 16-bit copy gone
    fp8_only = LLMConfig(model, load_gpu("H100"), tp=1, dp=8, zero=1, precision="fp8", fp8_param_gather=True)
    assert w8 - stage_memory(fp8_only, 1)[0].weights_bytes == pytest.approx(2 * linear)


def test_gen_llm_refuses_a_plan_past_hbm_in_one_line(tmp_path):
    runner = CliRunner()
    args = [
        "gen",
        "llm",
        "--model",
        "llama3-70b",
        "--dp",
        "8",
        "--gpu",
        "H100",
        "--output",
        str(tmp_path / "t"),
    ]
    result = runner.invoke(main, args)
    assert result.exit_code != 0
    line = result.output.strip()
    assert "\n" not in line and "pipeline stage 0" in line and "80 GiB" in line and "--ignore-memory" in line
    assert not list(tmp_path.iterdir())
    ok = runner.invoke(main, [*args[:-2], "--pp", "1", "--output", str(tmp_path / "t"), "--ignore-memory"])
    assert ok.exit_code == 0, ok.output
    assert "peak memory per GPU" in ok.output


def test_generated_workload_carries_its_memory():
    cfg = LLMConfig(MODELS["llama3-8b"], load_gpu("H100"), dp=2, tp=2, pp=2, sequence_parallel=True)
    wl = generate_llm(cfg)
    assert [m.stage for m in wl.memory] == [0, 1]
    assert all(0 < m.peak_bytes < 80 * GiB for m in wl.memory)
