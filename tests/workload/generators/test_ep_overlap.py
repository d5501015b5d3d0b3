"""``--moe-a2a-overlap``: Megatron-core's expert-parallel overlap (combined 1F1B).

Expected orders come from Megatron-core's source: ``combined_1f1b`` pairs micro-batch m's
forward with m - 1's backward on one stage and every steady-state forward with its backward
under interleaving; ``TransformerLayerSchedulePlan.run`` issues a layer pair's sub-modules
as combine (backward), attention (forward), experts (backward), dispatch (forward), expert
weight gradients, dispatch (backward), experts (forward), combine (forward), attention
(backward), each micro-batch's nodes in order behind its own CUDA event."""

from __future__ import annotations

import dataclasses

import pytest

import astra
from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.llm_traces import llm_traces
from astra_core.workload.generators.models import ModelConfig
from astra_core.workload.generators.pipeline import combined_passes, interleaved, schedule
from tests.system.test_nccl_model import h100_configs

MOE = ModelConfig(
    "e", layers=2, hidden=512, heads=8, kv_heads=2, ffn_hidden=1024, vocab=1000, mlp="swiglu",
    experts=8, top_k=2, expert_ffn_hidden=256, seq_len=256,
)  # fmt: skip


def plan(**kw) -> LLMConfig:
    options = {"dp": 4, "ep": 4, "microbatches": 3, "moe_a2a_overlap": True, **kw}
    return LLMConfig(MOE, GPUS["h100"], **options)


def test_one_stage_pairs_each_forward_with_the_previous_backward():
    order = [(kind, m, 0) for kind, m in schedule("1f1b", 1, 0, 3)]
    named = [
        (order[f][:2] if f is not None else None, order[b][:2] if b is not None else None)
        for f, b in combined_passes(order, 1)
    ]
    assert named == [(("F", 0), None), (("F", 1), ("B", 0)), (("F", 2), ("B", 1)), (None, ("B", 2))]


def test_interleaved_stages_pair_the_steady_state():
    order = interleaved(2, 0, 4, 2)
    pairs = combined_passes(order, 2)
    warmup = (2 - 0 - 1) * 2 + (2 - 1) * 2  # Megatron-core's warm-up forwards of stage 0
    assert pairs[:warmup] == [(i, None) for i in range(warmup)]
    steady = len(order) - 2 * warmup
    assert pairs[warmup : warmup + steady // 2] == [
        (warmup + 2 * k, warmup + 2 * k + 1) for k in range(steady // 2)
    ]
    assert all(f is None for f, _ in pairs[warmup + steady // 2 :])
    # every pass runs exactly once
    steps = sorted(i for pair in pairs for i in pair if i is not None)
    assert steps == list(range(len(order)))


def _deps(nodes, name: str) -> set[str]:
    node = next(n for n in nodes if n.name == name)
    return {nodes[d].name for d in node.deps}


def test_a_layer_pair_follows_megatron_cores_issue_order():
    # layer 0's forward over micro-batch 1 beside layer 1's backward over micro-batch 0
    nodes = generate_llm(plan()).stages[0]
    # the forward's dispatch waits for its own router and for the communication
    # stream (the backward's combine), not for the backward's experts
    dispatch = _deps(nodes, "L0_mb1_fwd_counts_AG")
    assert "L0_mb1_fwd_router" in dispatch and "L1_mb0_bwd_experts" not in dispatch
    # the backward's experts (data gradients) wait for its combine and, on the compute
    # stream, for the forward's attention block
    experts = _deps(nodes, "L1_mb0_bwd_experts")
    assert {"L1_mb0_bwd_combine_A2A", "L0_mb1_fwd_router"} <= experts
    # delayed weight gradients: their own node, after the data gradients
    assert _deps(nodes, "L1_mb0_bwd_experts_wgrad") >= {"L1_mb0_bwd_experts"}
    # the forward's experts wait for its dispatch (the probabilities go last) and, on the
    # compute stream, for the backward's weight gradients
    assert {"L0_mb1_fwd_probs_A2A", "L1_mb0_bwd_experts_wgrad"} <= _deps(nodes, "L0_mb1_fwd_experts")
    # the backward's attention waits for its dispatch, which followed its weight gradients
    assert "L1_mb0_bwd_router" in {n.name for n in nodes}
    assert "L1_mb0_bwd_dispatch_A2A" in _deps(nodes, "L1_mb0_bwd_router")


def test_the_same_kernels_run_and_the_all_to_alls_hide():
    on = generate_llm(plan()).stages[0]
    off = generate_llm(plan(moe_a2a_overlap=False)).stages[0]
    # the split of the experts' backward moves kernels between nodes, never adds any;
    # the collectives are the same
    for kind in (pb.COMP_NODE, pb.COMM_COLL_NODE):
        assert sum(n.duration_ns for n in on if n.type == kind) == pytest.approx(
            sum(n.duration_ns for n in off if n.type == kind)
        )
    collectives = [
        sorted((n.name, n.size) for n in nodes if n.type == pb.COMM_COLL_NODE) for nodes in (on, off)
    ]
    assert collectives[0] == collectives[1]
    network, system = h100_configs(4)

    def run(cfg):
        traces, groups = llm_traces(generate_llm(cfg))
        return astra.simulate(traces, system, network, comm_groups=groups or None)

    serial, overlapped = run(plan(moe_a2a_overlap=False)), run(plan())
    assert overlapped.step_ns < serial.step_ns
    # bounds: the compute stream runs every kernel, the communication stream every
    # all-to-all of the step one after another
    rank = overlapped.ranks[0]
    assert overlapped.step_ns >= rank.compute_ns
    ep = [c for c in overlapped.collectives if c.rank == 0 and c.node.name.endswith("_A2A")]
    assert overlapped.step_ns >= sum(c.finish_ns - c.start_ns for c in ep)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ep": 1}, "--moe-a2a-overlap: needs a mixture-of-experts model with --ep > 1"),
        ({"moe_token_dispatcher": "allgather"}, "needs --moe-token-dispatcher alltoall or flex"),
        ({"dp": 2, "pp": 2, "ep": 2, "microbatches": 2}, "with --pp > 1 needs --virtual-stages > 1"),
        ({"recompute": "full"}, "cannot be combined with --recompute full"),
        ({"zero": 3}, "cannot be combined with --zero 3"),
    ],
)
def test_megatron_cores_conditions(change, message):
    with pytest.raises(ConfigError, match=message):
        generate_llm(plan(**change))


def test_interleaved_pipeline_runs():
    cfg = dataclasses.replace(
        plan(dp=2, pp=2, ep=2, virtual_stages=2, microbatches=4), model=dataclasses.replace(MOE, layers=4)
    )
    traces, groups = llm_traces(generate_llm(cfg))
    network, system = h100_configs(4)
    overlapped = astra.simulate(traces, system, network, comm_groups=groups or None).step_ns
    serial_traces, serial_groups = llm_traces(generate_llm(dataclasses.replace(cfg, moe_a2a_overlap=False)))
    serial = astra.simulate(serial_traces, system, network, comm_groups=serial_groups or None).step_ns
    assert 0 < overlapped < serial
