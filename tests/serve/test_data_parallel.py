"""Data-parallel attention with expert parallelism: engines stepping together, the MoE
layers' experts spread over all their GPUs, dispatch and combine over the group."""

from __future__ import annotations

import pytest

from astra_core.config.system import nccl_system
from astra_core.errors import ConfigError
from astra_core.serve.collectives import CollectiveClock
from astra_core.serve.deployment import Deployment, weight_bytes
from astra_core.serve.engine import serve_requests
from astra_core.serve.requests import Request
from astra_core.serve.step_time import StepClock, StepWork
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators.gpus import load_gpu
from astra_core.workload.generators.models import load_model

H100 = load_gpu("H100")
QWEN = load_model("qwen3-30b-a3b")
NVLINK8 = {"topology": ["Switch"], "npus_count": [8], "bandwidth": [419.09], "latency": [936.25]}


def _dp8(**kw) -> Deployment:
    return Deployment(QWEN, H100, dp=8, expert_parallel=True, **kw)


def test_each_gpu_holds_an_eighth_of_the_routed_experts():
    whole = weight_bytes(Deployment(QWEN, H100))
    routed = QWEN.layers * QWEN.experts * QWEN.expert_params() * 2
    assert weight_bytes(_dp8()) == pytest.approx(whole - routed * 7 / 8)


def test_a_group_step_is_its_slowest_engine_and_the_moe_layers_over_all_tokens():
    d = _dp8()
    group = CollectiveClock(8, NVLINK8, nccl_system("H100"))
    clock = StepClock(d, None, group)
    works = [StepWork(decodes=n, decode_context=n * 500, samples=n) for n in (3, 40, 0, 0, 0, 0, 0, 7)]
    total = 50
    slowest = max(clock.step_ns(w) for w in works if w.tokens)
    moe = clock._moe_ns(total)
    moe += group.time_ns(pb.ALL_GATHER, total * (QWEN.hidden + QWEN.experts) * 2)
    moe += group.time_ns(pb.REDUCE_SCATTER, total * QWEN.hidden * 2)
    assert clock.group_step_ns(works) == pytest.approx(slowest + QWEN.layers * moe)
    # each GPU's experts take an eighth of every engine's assignments
    experts = [op for op in clock.moe_ops(total) if op.name in ("experts_up", "experts_down")]
    flops = 2 * total * QWEN.top_k * QWEN.mlp_matrices * QWEN.hidden * QWEN.expert_ffn_hidden / 8
    assert sum(op.flops for op in experts) == pytest.approx(flops)


def test_the_engines_of_a_replica_step_together():
    requests = [Request(0, 0, 100, 5), Request(1, 0, 100, 9)]
    result = serve_requests(_dp8(), requests, network=NVLINK8)
    assert result.requests.replica.tolist() == [0, 1]  # two engines
    assert len(result.steps) == 9  # one group step per token of the longer request
    assert result.requests.ttft_ns.nunique() == 1


@pytest.mark.parametrize(
    ("deployment", "message"),
    [
        (
            Deployment(load_model("llama3-8b"), H100, dp=2),
            "dp 2: data-parallel attention is modelled for a mixture",
        ),
        (Deployment(QWEN, H100, dp=2, tp=2, expert_parallel=True), "at TP 1"),
        (Deployment(QWEN, H100, dp=2), "with expert parallelism"),
    ],
)
def test_what_data_parallel_attention_is_not_is_a_one_line_error(deployment, message):
    with pytest.raises(ConfigError, match=message):
        serve_requests(deployment, [Request(0, 0, 10, 2)], network=NVLINK8)
