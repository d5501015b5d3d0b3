"""Expert-tensor parallelism 1 (Megatron-core's MoE parallel folding) in ``astra gen llm``.

Expected groups follow Megatron-core's expert rank generator (order tp-ep-dp with tp = 1
inside a pipeline stage): expert-parallel groups are blocks of E consecutive ranks of the
stage, expert-data-parallel groups the ranks at the same place of every block."""

from __future__ import annotations

import dataclasses

import pytest

import astra
from astra_core.errors import ConfigError
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.layout import Layout
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.llm_traces import llm_traces
from astra_core.workload.generators.models import ModelConfig
from tests.system.test_nccl_model import h100_configs

MOE = ModelConfig(
    "e", layers=2, hidden=512, heads=8, kv_heads=2, ffn_hidden=1024, vocab=1000, mlp="swiglu",
    experts=8, top_k=2, expert_ffn_hidden=256, seq_len=256,
)  # fmt: skip


def plan(**kw) -> LLMConfig:
    options = {"dp": 4, "tp": 2, "ep": 4, "etp": 1, "microbatches": 1, "sequence_parallel": True, **kw}
    return LLMConfig(MOE, GPUS["h100"], **options)


def test_folded_expert_groups_are_blocks_of_the_stage():
    layout = Layout(dp=4, tp=2, pp=2, ep=4, etp=1)
    assert layout.members("ep", 5) == (4, 5, 6, 7)
    assert layout.members("ep", 9) == (8, 9, 10, 11)  # the second stage's first block
    assert layout.members("edp", 5) == (1, 5)  # T D / E = 2 ranks hold the same experts
    assert layout.members("tp_ep", 5) == (4, 5, 6, 7)
    unfolded = Layout(dp=4, tp=2, pp=2, ep=4)
    assert unfolded.members("ep", 5) == (1, 3, 5, 7)  # same t, the data-parallel ranks


def test_folding_lets_expert_parallelism_exceed_data_parallelism():
    traces, groups = llm_traces(generate_llm(plan(ep=8)))  # ep 8 over dp 4 x tp 2
    dispatch = next(n for n in traces[3].nodes if n.name == "L0_mb0_fwd_dispatch_A2A")
    assert dispatch.pg_name in (None, "", "0") or groups[dispatch.pg_name] == list(range(8))
    # the MoE block keeps its sequence-parallel tokens: no tensor-parallel gather around it
    assert not any(n.name.startswith("L0_mb0_fwd_moe_in") for n in traces[3].nodes)
    network, system = h100_configs(8)
    assert astra.simulate(traces, system, network, comm_groups=groups or None).step_ns > 0


def test_whole_experts_hold_tp_times_the_expert_parameters():
    folded = generate_llm(plan(dp=4, ep=4))
    split = generate_llm(plan(dp=4, ep=2, etp=None))  # the same 4 experts a rank, split over TP 2
    # dense parameters are the same; a folded rank holds 2 whole experts, a split rank
    # 4 half experts: the same expert bytes, reduced over T D / E = 2 and D / E = 2 ranks
    assert folded.dp_grad_bytes[0] == split.dp_grad_bytes[0]
    more = generate_llm(plan(dp=4, ep=2))  # folded, 4 whole experts a rank
    expert = MOE.expert_params() * 4  # bytes per element: FP32 gradients
    assert more.dp_grad_bytes[0] - folded.dp_grad_bytes[0] == 2 * expert * MOE.layers  # 2 more a layer


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"etp": 3}, "--expert-tensor-parallel-size 3: 1 (MoE parallel folding) or --tp 2 are modelled"),
        (
            {"sequence_parallel": False},
            "--expert-tensor-parallel-size 1: needs an MoE model and --sequence-parallel "
            "(Megatron-core's MoE layers with tensor parallelism)",
        ),
        (
            {"ep": 16},
            "--ep 16: needs an MoE model whose expert count it divides, and must divide "
            "--tp x --cp x --dp = 8 (folded: expert-parallel ranks come from all three)",
        ),
    ],
)
def test_a_plan_folding_cannot_run_is_refused(options, message):
    with pytest.raises(ConfigError) as err:
        generate_llm(dataclasses.replace(plan(), **options))
    assert str(err.value) == message


def test_astra_scale_refuses_folded_experts(tmp_path):
    from click.testing import CliRunner

    from astra_core.cli import main
    from astra_core.workload.generators.llm import write_llm
    from tests.conftest import one_error_line

    write_llm(generate_llm(plan()), tmp_path / "t")
    args = ["scale", "--workload", tmp_path / "t", "--dp-to", "8", "--output", tmp_path / "s"]
    line = one_error_line(CliRunner().invoke(main, [str(a) for a in args]))
    assert "experts are folded over tensor- or context-parallel ranks (expert-tensor parallelism 1)" in line


def test_skewed_routing_over_folded_experts_is_consistent_across_ranks():
    # every rank's uneven all-to-all must match its members' (the run checks them)
    cfg = plan(moe_routing="zipf:1.5")
    traces, groups = llm_traces(generate_llm(cfg))
    network, system = h100_configs(8)
    skewed = astra.simulate(traces, system, network, comm_groups=groups or None)
    even, even_groups = llm_traces(generate_llm(plan()))
    assert skewed.step_ns > astra.simulate(even, system, network, comm_groups=even_groups or None).step_ns


def test_context_parallelism_with_folded_experts():
    # 8 ranks a stage (t + 2 (c + 2 d)): expert groups of 4 consecutive ranks mix context-
    # parallel ranks, which hold other tokens of the same sequences
    cfg = plan(dp=2, cp=2, ep=4)
    layout = Layout(dp=2, tp=2, pp=1, ep=4, cp=2, etp=1)
    assert layout.members("ep", 6) == (4, 5, 6, 7)
    assert layout.members("edp", 6) == (2, 6)
    traces, groups = llm_traces(generate_llm(cfg))
    names = {n.name for n in traces[6].nodes}
    assert "L0_mb0_fwd_attn_cp1_send" in names and "L0_mb0_fwd_dispatch_A2A" in names
    network, system = h100_configs(8)
    assert astra.simulate(traces, system, network, comm_groups=groups or None).step_ns > 0


def test_context_parallelism_with_experts_split_over_tp_is_refused():
    with pytest.raises(ConfigError) as err:
        generate_llm(plan(dp=2, cp=2, ep=2, etp=None))
    assert str(err.value) == (
        "--cp 2: mixture-of-experts layers with context parallelism need "
        "--expert-tensor-parallel-size 1 (experts folded over the context-parallel ranks)"
    )
