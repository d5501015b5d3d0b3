"""A serving step's time and a replica's memory: closed forms, published figures, and the
collectives simulated by the system layer."""

from __future__ import annotations

import pytest

from astra_core.config.system import nccl_system
from astra_core.errors import ConfigError
from astra_core.serve.collectives import SMALLEST_BYTES, STEPS_PER_OCTAVE, CollectiveClock
from astra_core.serve.deployment import Deployment, kv_blocks, kv_bytes_per_token, weight_bytes
from astra_core.serve.step_time import StepClock, StepWork
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators.gpus import load_gpu
from astra_core.workload.generators.kernels import attention_tflops, memory_rate
from astra_core.workload.generators.models import load_model

GiB = 2**30
H100 = load_gpu("H100")
NVLINK8 = {"topology": ["Switch"], "npus_count": [8], "bandwidth": [419.09], "latency": [300]}


def test_llama3_8b_weights_are_what_vllm_loads():
    """vLLM PR #10511's memory-profiling log on an H100: "model weights take 14.96GiB" at
    TP 1 and 7.48 GiB at TP 2 for Meta-Llama-3-8B in BF16."""
    model = load_model("llama3-8b")
    assert weight_bytes(Deployment(model, H100)) / GiB == pytest.approx(14.96, abs=0.01)
    assert weight_bytes(Deployment(model, H100, tp=2)) / GiB == pytest.approx(7.48, abs=0.02)


def test_kv_cache_bytes_per_token():
    # 2 (K, V) x 80 layers x 8 KV heads x 128 x 2 bytes, the heads split over TP, at least one
    model = load_model("llama3-70b")
    assert kv_bytes_per_token(Deployment(model, H100)) == 2 * 80 * 8 * 128 * 2
    assert kv_bytes_per_token(Deployment(model, H100, tp=8)) == 2 * 80 * 1 * 128 * 2
    assert kv_bytes_per_token(Deployment(model, H100, tp=16)) == 2 * 80 * 1 * 128 * 2  # replicated
    assert kv_bytes_per_token(Deployment(model, H100, kv_bytes=1)) == 2 * 80 * 8 * 128


def test_a_model_that_does_not_fit_is_a_one_line_error():
    with pytest.raises(
        ConfigError, match=r"llama3-70b at TP 1 does not fit a H100: weights 131\.\d GiB"
    ) as err:
        kv_blocks(Deployment(load_model("llama3-70b"), H100))
    assert "\n" not in str(err.value)


def test_a_decode_step_reads_every_weight_and_its_kv_cache():
    d = Deployment(load_model("llama3-8b"), H100)
    clock = StepClock(d)
    one = clock.step_ns(StepWork(decodes=1, decode_context=1000, samples=1))
    assert one >= weight_bytes(d) / H100.memory_gbps  # no step beats reading the weights at peak
    # more context costs its KV reads at the streaming rate, layer by layer: nothing else changes
    more = clock.step_ns(StepWork(decodes=1, decode_context=101_000, samples=1))
    assert more - one == pytest.approx(100_000 * kv_bytes_per_token(d) / memory_rate(H100, "stream"))


def test_a_prompt_chunk_after_cached_tokens_costs_its_attention_flops():
    model = load_model("llama3-8b")
    clock = StepClock(Deployment(model, H100))
    fresh = clock.step_ns(StepWork(chunks=[(2048, 0)], samples=1))
    later = clock.step_ns(StepWork(chunks=[(2048, 6144)], samples=1))
    per_layer = []
    for cached in (0, 6144):
        flops = 4.0 * 2048 * (cached + 2049 / 2) * model.heads * model.hd
        rate = attention_tflops(H100, True, model.hd, (2048 * (cached + 2048)) ** 0.5, forward=True) * 1e3
        per_layer.append(flops / rate)
    assert later - fresh == pytest.approx(model.layers * (per_layer[1] - per_layer[0]))


def test_tensor_parallel_steps_add_two_all_reduces_per_layer_and_the_logits_all_gather():
    model = load_model("llama3-70b")
    d = Deployment(model, H100, tp=8)
    collectives = CollectiveClock(8, NVLINK8, nccl_system("H100"))
    work = StepWork(chunks=[(300, 0)], decodes=20, decode_context=20_000, samples=21)
    with_comm = StepClock(d, collectives).step_ns(work)
    alone = StepClock(d).step_ns(work)
    ar = collectives.time_ns(pb.ALL_REDUCE, 320 * model.hidden * 2)
    ag = collectives.time_ns(pb.ALL_GATHER, 21 * model.vocab * 2)
    assert with_comm - alone == pytest.approx(2 * model.layers * ar + ag)
    assert ar > 0 and ag > 0


def test_the_collective_clock_is_exact_on_its_grid_and_between_its_points():
    clock = CollectiveClock(8, NVLINK8, nccl_system("H100"))
    for point in (40, 41, 80):
        size = SMALLEST_BYTES * 2 ** (point / STEPS_PER_OCTAVE)
        assert clock.time_ns(pb.ALL_REDUCE, size) == clock._simulate(pb.ALL_REDUCE, round(size))
    # between two grid points: linear in size, within the two points' times
    low, high = (clock.time_ns(pb.ALL_REDUCE, SMALLEST_BYTES * 2 ** (p / STEPS_PER_OCTAVE)) for p in (80, 81))
    middle = SMALLEST_BYTES * (2 ** (80 / STEPS_PER_OCTAVE) + 2 ** (81 / STEPS_PER_OCTAVE)) / 2
    assert clock.time_ns(pb.ALL_REDUCE, middle) == pytest.approx((low + high) / 2)
    assert clock.time_ns(pb.ALL_REDUCE, 0) == 0.0
    assert CollectiveClock(1, NVLINK8, nccl_system("H100")).time_ns(pb.ALL_REDUCE, 1e6) == 0.0


@pytest.mark.parametrize("tokens", [1, 64, 4096])
def test_expert_parallelism_moves_the_same_flops_and_expert_weights(tokens):
    """Whole experts on 1/tp of the GPUs or every expert's 1/tp slice: per GPU the same
    2 T k (up + down) h f / tp expert FLOPs, and (every expert touched) the same weights."""
    model = load_model("qwen3-30b-a3b")
    per_gpu = {}
    for ep in (False, True):
        ops = StepClock(Deployment(model, H100, tp=4, expert_parallel=ep)).moe_ops(tokens)
        experts = [op for op in ops if op.name in ("experts_up", "experts_down")]
        batch_weights = sum(op.shape[0] * op.shape[2] * op.shape[3] for op in experts)
        per_gpu[ep] = (sum(op.flops for op in experts), batch_weights)
    flops = 2 * tokens * model.top_k * model.mlp_matrices * model.hidden * model.expert_ffn_hidden / 4
    assert per_gpu[False][0] == pytest.approx(flops) and per_gpu[True][0] == pytest.approx(flops)
    if tokens == 4096:  # every expert receives tokens
        expert_weights = model.experts * model.expert_params() / 4
        assert per_gpu[False][1] == pytest.approx(expert_weights, rel=1e-6)
        assert per_gpu[True][1] == pytest.approx(expert_weights, rel=1e-6)


def test_vllms_fused_moe_kernel_ignores_transformer_engines_grouped_rate():
    # an FP8 MoE step on GB200: vLLM's fused MoE kernel, not TE's multi-stream grouped GEMM,
    # so the GPU's measured grouped rate (here made absurdly slow) changes nothing
    from dataclasses import replace

    model, gb200 = load_model("qwen3-30b-a3b"), load_gpu("gb200")
    work = StepWork(chunks=[(2048, 0)], samples=1)
    step = lambda gpu: StepClock(Deployment(model, gpu, precision="fp8")).step_ns(work)  # noqa: E731
    assert step(replace(gb200, grouped_fp8_tflops=1.0)) == step(replace(gb200, grouped_fp8_tflops=0.0))
