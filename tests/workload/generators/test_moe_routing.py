"""Unbalanced mixture-of-experts routing in ``astra gen llm`` (``--moe-routing``).

Expected figures come from the loads the test gives: an expert-parallel rank's share is
the sum of its contiguous experts', it receives that share of every rank's A = b s k / t
assignment rows (H wide, 2 bytes each), and its experts' work is linear in the rows."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

import astra
from astra_core.cli import main
from astra_core.errors import ConfigError
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.llm_traces import llm_traces
from astra_core.workload.generators.models import ModelConfig
from astra_core.workload.generators.routing import expert_shares
from tests.conftest import one_error_line
from tests.system.test_nccl_model import h100_configs

MOE = ModelConfig(
    "e", layers=2, hidden=512, heads=8, kv_heads=2, ffn_hidden=1024, vocab=1000, mlp="swiglu",
    experts=8, top_k=2, expert_ffn_hidden=256, seq_len=256,
)  # fmt: skip
LOADS = [6, 2, 1, 1, 1, 1, 1, 3]  # experts 0-1 on EP index 0, 2-3 on 1, 4-5 on 2, 6-7 on 3
RANK_SHARES = [8 / 16, 2 / 16, 2 / 16, 4 / 16]
ROWS = 1 * 256 * 2  # A = b s top_k / t


def plan(routing: str = "balanced", **kw) -> LLMConfig:
    return LLMConfig(MOE, GPUS["h100"], dp=8, ep=4, microbatches=1, moe_routing=routing, **kw)


def loads_file(tmp_path, layers) -> str:
    path = tmp_path / "loads.json"
    path.write_text(json.dumps({"layers": layers}))
    return str(path)


def simulate(cfg: LLMConfig):
    network, system = h100_configs(8)
    traces, groups = llm_traces(generate_llm(cfg))
    return astra.simulate(traces, system, network, comm_groups=groups or None)


def nodes_named(cfg: LLMConfig, suffix: str) -> dict[int, list]:
    traces, _ = llm_traces(generate_llm(cfg))
    return {t.rank: [n for n in t.nodes if n.name.endswith(suffix)] for t in traces}


def test_zipf_0_is_balanced_routing():
    assert simulate(plan("zipf:0")).step_ns == simulate(plan()).step_ns


def test_recorded_loads_set_each_ranks_bytes_and_expert_work(tmp_path):
    cfg = plan(loads_file(tmp_path, [LOADS]))
    dispatch = nodes_named(cfg, "L0_mb0_fwd_dispatch_A2A")
    to_each = [round(ROWS * share * MOE.hidden * 2) for share in RANK_SHARES]
    for rank, (node,) in dispatch.items():
        q = rank % 4  # ep groups are ranks 0-3 and 4-7
        assert node.attrs["send_bytes"] == to_each
        assert node.attrs["recv_bytes"] == [to_each[q]] * 4
        assert node.comm_size == sum(to_each)
    # every rank's experts process 4 A x its share: work in proportion to the shares
    experts = {r: nodes[0].num_ops for r, nodes in nodes_named(cfg, "L0_mb0_fwd_experts").items()}
    for rank in range(8):
        assert experts[rank] / experts[1] == pytest.approx(RANK_SHARES[rank % 4] / RANK_SHARES[1], rel=1e-9)
    # what one rank sends, another receives (the all-to-alls agree across ranks)
    combine = nodes_named(cfg, "L1_mb0_bwd_combine_A2A")
    for r in range(4):
        for q in range(4):
            assert combine[r][0].attrs["send_bytes"][q] == combine[q][0].attrs["recv_bytes"][r]


def test_the_most_loaded_rank_slows_the_step(tmp_path):
    big = dataclasses.replace(MOE, hidden=4096, heads=32, kv_heads=8, expert_ffn_hidden=4096, seq_len=4096)
    cfg = dataclasses.replace(plan(loads_file(tmp_path, [LOADS])), model=big)
    experts = nodes_named(cfg, "L0_mb0_fwd_experts")
    hot, cold = experts[0][0], experts[1][0]
    even = nodes_named(dataclasses.replace(plan(), model=big), "L0_mb0_fwd_experts")[0][0]
    # index 0 processes twice a balanced rank's rows (1/2 against 1/4), index 1 half
    assert hot.duration_micros > even.duration_micros > cold.duration_micros
    assert simulate(cfg).step_ns > simulate(dataclasses.replace(plan(), model=big)).step_ns


def test_zipf_shares_follow_the_law_in_a_drawn_order():
    shares = expert_shares("zipf:1", 8, [1, 3], seed=4)
    assert shares is not None and set(shares) == {1, 3}
    harmonic = sum(1 / j for j in range(1, 9))
    for layer in (1, 3):
        assert sorted(shares[layer], reverse=True) == pytest.approx([1 / j / harmonic for j in range(1, 9)])
    assert list(shares[1]) != list(shares[3])  # each layer its own order
    again = expert_shares("zipf:1", 8, [1, 3], seed=4)
    assert again is not None and list(again[1]) == list(shares[1])  # the seed fixes them


@pytest.mark.parametrize(
    ("routing", "message"),
    [
        ("zipf:x", "--moe-routing 'zipf:x': zipf:S needs an exponent S in [0, 10]"),
        ("zipf:11", "--moe-routing 'zipf:11': zipf:S needs an exponent S in [0, 10]"),
        ("uniform", "--moe-routing 'uniform': expected balanced, zipf:S or a JSON file of expert loads"),
    ],
)
def test_a_bad_routing_is_refused(routing, message):
    with pytest.raises(ConfigError) as err:
        generate_llm(plan(routing))
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        ([[1] * 8, [1] * 8, [1] * 8], "layers: expected one list of expert loads, or one per MoE layer (2)"),
        ([[1] * 7], "layers[0]: expected 8 loads >= 0, not all 0"),
        ([[0] * 8], "layers[0]: expected 8 loads >= 0, not all 0"),
        ([[1] * 8, [-1] + [1] * 7], "layers[1]: expected 8 loads >= 0, not all 0"),
    ],
)
def test_a_bad_loads_file_is_refused_naming_it(tmp_path, layers, message):
    path = loads_file(tmp_path, layers)
    with pytest.raises(ConfigError) as err:
        generate_llm(plan(path))
    assert str(err.value) == f"{path}: {message}"


def test_unbalanced_routing_needs_experts_on_several_ranks(tmp_path):
    out = tmp_path / "t"
    args = ["gen", "llm", "--model", "llama3-8b", "--dp", "2", "--moe-routing", "zipf:1", "--output", out]
    line = one_error_line(CliRunner().invoke(main, [str(a) for a in args]))
    assert line == (
        "error: --moe-routing zipf:1: needs a mixture-of-experts model with --ep > 1 (one rank "
        "holding every expert: the imbalance between its experts is not modelled)"
    )


def test_a_capacity_drops_what_an_expert_is_over_and_padding_fills_it(tmp_path):
    # capacity ceil(A / 8 x 1.0) = 64 rows per expert; loads 6:2:1:1:1:1:1:3 of 16 ask for
    # 192, 64, 32, 32, 32, 32, 32, 96: kept 64, 64, 32, 32, 32, 32, 32, 64
    path = loads_file(tmp_path, [LOADS])
    dropped = nodes_named(plan(path, moe_capacity_factor=1.0), "L0_mb0_fwd_dispatch_A2A")
    kept = [64 + 64, 32 + 32, 32 + 32, 32 + 64]
    assert dropped[0][0].attrs["send_bytes"] == [rows * MOE.hidden * 2 for rows in kept]
    padded = nodes_named(
        plan(path, moe_capacity_factor=1.0, moe_pad_to_capacity=True), "L0_mb0_fwd_dispatch_A2A"
    )
    assert padded[0][0].attrs["send_bytes"] == [128 * MOE.hidden * 2] * 4
    # balanced routing under a factor >= 1 drops nothing: the balanced step
    assert simulate(plan(moe_capacity_factor=1.0)).step_ns == pytest.approx(simulate(plan()).step_ns, abs=2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"moe_capacity_factor": 0.0},
            "--moe-capacity-factor 0.0: needs a mixture-of-experts model and a factor in (0, 1000]",
        ),
        (
            {"moe_pad_to_capacity": True},
            "--moe-pad-to-capacity needs --moe-capacity-factor (Megatron-core's rule)",
        ),
    ],
)
def test_a_bad_capacity_is_refused(options, message):
    with pytest.raises(ConfigError) as err:
        generate_llm(plan(**options))
    assert str(err.value) == message


def test_expert_groups_beside_tensor_parallelism_agree_on_their_bytes(tmp_path):
    # dp 4 x tp 2, ep 2: two expert-parallel groups per tensor-parallel rank; every rank's
    # all-to-alls must match its members' (the run checks them) and take the busier time
    cfg = plan(loads_file(tmp_path, [LOADS]), tp=2, sequence_parallel=True)
    cfg = dataclasses.replace(cfg, dp=4, ep=2)
    balanced = dataclasses.replace(plan(tp=2, sequence_parallel=True), dp=4, ep=2)
    assert simulate(cfg).step_ns > simulate(balanced).step_ns


def test_the_all_gather_dispatcher_gathers_over_the_expert_ranks_and_scatters_back():
    # MoEAllGatherTokenDispatcher over T x E = 4 ranks: each rank's 256 tokens' routing map
    # (1 byte per expert), FP32 probabilities and BF16 rows all-gathered; the unpermuted
    # outputs of all 1,024 tokens reduce-scattered in FP32; backward the other way
    cfg = plan(moe_token_dispatcher="allgather")
    rows, every, h, experts = 256, 1024, MOE.hidden, MOE.experts
    expected = {
        "fwd_map_AG": rows * experts,
        "fwd_probs_AG": 4 * rows * experts,
        "fwd_dispatch_AG": rows * h * 2,
        "fwd_combine_RS": 4 * every * h,
        "bwd_combine_AG": 4 * rows * h,
        "bwd_probs_RS": 4 * every * experts,
        "bwd_dispatch_RS": every * h * 2,
    }
    traces, groups = llm_traces(generate_llm(cfg))
    sizes = {n.name.split("_", 2)[2]: n.comm_size for n in traces[5].nodes if n.name.startswith("L0_mb0_")}
    assert {k: sizes[k] for k in expected} == expected
    assert not any(name.endswith("A2A") for name in sizes)
    group = next(n.pg_name for n in traces[5].nodes if n.name == "L0_mb0_fwd_dispatch_AG")
    assert groups[group] == [4, 5, 6, 7]  # rank 5's expert-parallel block
    assert simulate(cfg).step_ns != simulate(plan()).step_ns


def test_the_all_gather_dispatcher_group_spans_tensor_and_expert_ranks():
    cfg = dataclasses.replace(
        plan(moe_token_dispatcher="allgather", tp=2, sequence_parallel=True), dp=4, ep=2
    )
    traces, groups = llm_traces(generate_llm(cfg))
    for rank, members in ((1, [0, 1, 2, 3]), (6, [4, 5, 6, 7])):
        group = next(n.pg_name for n in traces[rank].nodes if n.name == "L0_mb0_fwd_dispatch_AG")
        assert groups[group] == members
    # the dispatcher gathers over tensor-parallel ranks itself: no separate TP collectives
    assert not any(n.name.startswith("L0_mb0_fwd_moe_in") for n in traces[1].nodes)
    assert simulate(cfg).step_ns > 0


def test_gen_llm_says_what_routing_and_capacity_do(tmp_path):
    model = tmp_path / "moe.json"
    fields = dataclasses.asdict(MOE)
    model.write_text(json.dumps({k: v for k, v in fields.items() if k != "source"}))
    args = ["gen", "llm", "--model", model, "--dp", "8", "--ep", "4", "--microbatches", "1"]
    args += [
        "--moe-routing",
        loads_file(tmp_path, [LOADS]),
        "--moe-capacity-factor",
        "1",
        "--output",
        tmp_path / "t",
    ]
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    # kept rows per index 128, 64, 64, 96 of 512 assigned (mean 88): 1.45x; 160 of 512 dropped
    assert (
        f"MoE routing {tmp_path / 'loads.json'}: the busiest expert-parallel rank gets 1.45x the mean "
        "rows (layer 0); capacity factor 1 drops 31.2 % of assignments"
    ) in result.output
