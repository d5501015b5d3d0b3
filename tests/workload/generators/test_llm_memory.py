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


def _megatron_report(model: ModelConfig, cfg: LLMConfig, microbatches: int) -> tuple[float, float]:
    """Megatron-LM's theoretical memory of the most loaded rank (the first stage) [bytes]:
    (weights and optimizer, activations), written from its formula
    (megatron/training/theoretical_memory_usage.py): parameters per layer
    2h(f + 2) + 4h^2 for a GELU layer with LayerNorm, the block's over P stages plus the
    embedding, all over T, at 18 bytes each or 6 + 12/D with the distributed optimizer;
    with sequence parallelism and selective recomputation activations of
    s b h (18 + 4 f / h) per layer, L layers, plus 8 s b P (token ids) and s b h P (the
    embedding's dropout mask), times 1 + (P - 1)/(P V) interleaved or min(1, M / P) not,
    plus 4 s b h (1 + v / h) for the output layer when P = 1, all over T; without
    sequence parallelism s b h (10 + 24 / T) per layer, the output layer's 2 (s b v / T +
    s b h) when P = 1, and 5 % more at the end."""
    h, f, L, v = model.hidden, model.ffn_hidden, model.layers, model.vocab
    s, b, t, p, d = cfg.sequence_length, cfg.micro_batch, cfg.tp, cfg.pp, cfg.dp
    vp = cfg.virtual_stages if cfg.virtual_stages > 1 else None
    block = L * (2 * h * (f + 2) + 4 * h * h) + 2 * h
    weights = (block / p + h * v) / t * (6 + 12 / d if cfg.zero else 18)
    per_layer = (18 + 4 * f / h) if cfg.sequence_parallel else (10 + 24 / t)
    act = s * b * h * per_layer * L + 8 * s * b * p + s * b * h * p
    act *= 1 + (p - 1) / (p * vp) if vp else (min(1, microbatches / p) if p > 1 else 1)
    if cfg.sequence_parallel:
        return weights, (act + (4 * s * b * h * (1 + v / h) if p == 1 else 0)) / t
    return weights, 1.05 * (act + (2 * (s * b * v / t + s * b * h) if p == 1 else 0))


# The models of Korthikanti et al. (Table 3) and Narayanan et al. SC'21 (Table 1), with
# plans across T, P, V, D, micro-batch and the distributed optimizer.
_FORMULA_CASES = [
    (_gpt(6144, 64, 48), {"tp": 8, "dp": 1, "micro_batch": 4, "microbatches": 8}),
    (_gpt(6144, 64, 48), {"tp": 8, "dp": 4, "micro_batch": 2, "microbatches": 16, "zero": 1}),
    (_gpt(12288, 96, 96), {"tp": 8, "pp": 8, "dp": 8, "microbatches": 64, "zero": 1}),
    (_gpt(12288, 96, 96), {"tp": 8, "pp": 8, "dp": 8, "microbatches": 64}),
    (_gpt(12288, 96, 96), {"tp": 8, "pp": 8, "dp": 8, "microbatches": 64, "virtual_stages": 4, "zero": 1}),
    (_gpt(12288, 96, 96), {"tp": 8, "pp": 16, "dp": 4, "microbatches": 64, "virtual_stages": 2, "zero": 1}),
    (_gpt(12288, 96, 96), {"tp": 4, "pp": 16, "dp": 16, "microbatches": 32, "zero": 1}),
    (_gpt(20480, 128, 105), {"tp": 8, "pp": 35, "dp": 8, "microbatches": 70, "zero": 1}),
    (_gpt(20480, 128, 105), {"tp": 8, "pp": 35, "dp": 9, "microbatches": 280, "virtual_stages": 3}),
    (_gpt(25600, 160, 128), {"tp": 8, "pp": 64, "dp": 8, "microbatches": 128, "zero": 1}),
    (_gpt(25600, 160, 128), {"tp": 8, "pp": 64, "dp": 6, "microbatches": 512}),
    (_gpt(2304, 24, 24), {"tp": 1, "dp": 32, "micro_batch": 16, "microbatches": 1}),
    (_gpt(3072, 32, 30), {"tp": 2, "dp": 32, "micro_batch": 8, "microbatches": 2, "zero": 1}),
    (_gpt(4096, 32, 36), {"tp": 4, "dp": 32, "micro_batch": 4, "microbatches": 4}),
    (_gpt(6144, 48, 40), {"tp": 8, "dp": 32, "micro_batch": 4, "microbatches": 8, "zero": 1}),
    (_gpt(8192, 64, 48), {"tp": 8, "pp": 2, "dp": 32, "micro_batch": 2, "microbatches": 24}),
    (
        _gpt(10240, 80, 60),
        {"tp": 8, "pp": 4, "dp": 32, "micro_batch": 2, "microbatches": 28, "virtual_stages": 3},
    ),
    (_gpt(12288, 96, 80), {"tp": 8, "pp": 8, "dp": 24, "microbatches": 96, "virtual_stages": 2}),
    (
        _gpt(16384, 128, 96),
        {"tp": 8, "pp": 16, "dp": 15, "microbatches": 144, "virtual_stages": 2, "zero": 1},
    ),
    (_gpt(20480, 128, 105), {"tp": 8, "pp": 35, "dp": 9, "microbatches": 280, "zero": 1}),
    (_gpt(25600, 160, 128), {"tp": 8, "pp": 64, "dp": 6, "microbatches": 512, "zero": 1}),
    (_gpt(8192, 64, 32, seq=4096), {"tp": 4, "pp": 4, "dp": 2, "micro_batch": 1, "microbatches": 16}),
]


@pytest.mark.parametrize(("model", "plan"), _FORMULA_CASES, ids=lambda x: getattr(x, "name", None))
def test_first_stage_matches_megatron_theoretical_memory_within_2_percent(model, plan):
    cfg = _plan(model, **plan)
    first = stage_memory(cfg, plan["microbatches"])[0]
    weights, activations = _megatron_report(model, cfg, plan["microbatches"])
    assert first.state_bytes == pytest.approx(weights, rel=2e-3)
    assert first.activations_bytes == pytest.approx(activations, rel=0.02)
    assert first.state_bytes + first.activations_bytes == pytest.approx(weights + activations, rel=0.02)


def test_without_sequence_parallelism_the_layer_is_10_plus_24_over_t():
    """Korthikanti Table 2, tensor parallelism with selective recomputation; Megatron's
    report adds 5 % on top of the same count."""
    model = _gpt(12288, 96, 96)
    for t in (1, 2, 4, 8):
        cfg = _plan(model, tp=t, sequence_parallel=False)
        sbh = 2048 * 12288
        assert layer_activation_bytes(cfg, 0) == pytest.approx(sbh * (10 + 24 / t))
        cfg_sp = _plan(model, tp=t)
        assert layer_activation_bytes(cfg_sp, 0) == pytest.approx(34 * sbh / t)
    cfg = _plan(model, tp=8, pp=8, dp=8, microbatches=64, sequence_parallel=False)
    ours = stage_memory(cfg, 64)[0].activations_bytes
    assert ours * 1.05 == pytest.approx(_megatron_report(model, cfg, 64)[1], rel=2e-3)


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
