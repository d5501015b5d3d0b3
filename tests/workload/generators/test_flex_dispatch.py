"""The flex token dispatcher (DeepEP, HybridEP) in ``astra gen llm``.

Expected figures: the probability that k distinct experts drawn uniformly from E hit a
given set of ``held``, ``1 - C(E - held, k) / C(E, k)``, checked against counting the
draws; the rows follow from it (each token once per rank, and once per other NVLink
group, that needs it)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

import astra
from astra_core.config.network import NetworkConfig
from astra_core.errors import ConfigError
from astra_core.workload.generators.llm import generate_llm
from astra_core.workload.generators.llm_traces import llm_traces
from astra_core.workload.generators.token_dispatch import FlexDispatch, hit_probability
from tests.system.test_nccl_model import h100_configs
from tests.workload.generators.test_moe_routing import MOE, plan, simulate

from ...validation.conftest import validation_script


@pytest.mark.parametrize(("experts", "top_k", "held"), [(8, 3, 2), (10, 4, 5), (6, 2, 1), (7, 7, 1)])
def test_hit_probability_counts_the_draws(experts, top_k, held):
    draws = list(itertools.combinations(range(experts), top_k))
    hits = sum(1 for d in draws if any(e < held for e in d))
    assert hit_probability(experts, top_k, held) == pytest.approx(hits / len(draws))
    assert hit_probability(experts, top_k, experts) == 1.0


@pytest.mark.parametrize(
    ("ep", "stride", "domain", "backend", "group"),
    [
        (32, 1, 8, "deepep", 8),  # DGX nodes: 4 groups of 8
        (32, 1, 64, "hybridep", 32),  # one NVL72 segment holds the whole group
        (64, 1, 72 * 8, "deepep", 8),  # DeepEP's NVLink peers stop at 8, even on NVL72
        (16, 2, 8, "hybridep", 4),  # expert ranks 2 apart: 4 to a node of 8
        (4, 8, 8, "deepep", 1),  # every member on its own node
        (8, 1, 0, "hybridep", 8),  # one domain (no network dimensions given)
    ],
)
def test_nvlink_groups_follow_the_domain_and_backend(ep, stride, domain, backend, group):
    flex = FlexDispatch.of(64, 4, ep, stride, domain, backend)
    assert (flex.group, flex.groups) == (group, ep // group)


def test_token_rows_are_conserved_and_symmetric():
    flex = FlexDispatch.of(256, 8, 32, 1, 8, "deepep")
    rows = 4096.0
    sent = [flex.rows_to(q, rows) for q in range(32)]
    assert all(sent[q][j] == pytest.approx(sent[j][q]) for q in range(32) for j in range(32))
    g, n, p = flex.group, flex.groups, flex.rank_share
    # across groups: each token once to each other group that needs it
    across = sum(sent[0][j] for j in range(32) if j // g != 0)
    assert across == pytest.approx((n - 1) * rows * flex.group_share)
    # inside groups: every (token, rank) delivery to a rank other than its sender's is one
    # NVLink hop, direct or forwarded, except the forwards that land at the RDMA target
    inside = sum(sent[q][j] for q in range(32) for j in range(32) if j // g == q // g and j != q)
    direct = 32 * (g - 1) * rows * p
    forwarded = 32 * (n - 1) * (g - 1) * rows * p
    assert inside == pytest.approx(direct + forwarded)
    assert flex.received(rows) == pytest.approx(32 * rows * p)


def test_flex_hybridep_in_one_domain_is_an_even_all_to_all_of_distinct_rows():
    # dp 8, ep 4 on one node of 8: each rank's 256 tokens (b 1 x s 256) go once to each
    # rank holding any of their top-2 of 8 experts (2 per rank), with 12 bytes of top-k
    # indices and probabilities each (forward dispatch)
    cfg = plan(moe_token_dispatcher="flex", moe_flex_dispatcher_backend="hybridep")
    traces, _ = llm_traces(generate_llm(cfg))
    sizes = {n.name.split("_", 2)[2]: n.comm_size for n in traces[5].nodes if n.name.startswith("L0_mb0_")}
    share = 1 - math.comb(6, 2) / math.comb(8, 2)
    rows = 4 * 256 * share
    assert sizes["fwd_dispatch_A2A"] == int(math.ceil(rows * (MOE.hidden * 2 + 12 * 2)))
    assert sizes["fwd_combine_A2A"] == sizes["bwd_dispatch_A2A"] == int(math.ceil(rows * MOE.hidden * 2))
    assert "fwd_probs_A2A" not in sizes
    faster = simulate(cfg).step_ns
    assert faster < simulate(plan()).step_ns  # fewer rows than the 4 x 256 x 2 permuted ones


def test_flex_deepep_across_nodes_sends_each_token_once_per_node():
    # dp 8, ep 8 over two nodes of 4 (dims 4 x 2): DeepEP's RDMA peer is the rank at the
    # same local index on the other node
    cfg = dataclasses.replace(plan(moe_token_dispatcher="flex"), ep=8, dims=[4, 2])
    traces, _ = llm_traces(generate_llm(cfg))
    node = next(n for n in traces[3].nodes if n.name == "L0_mb0_fwd_combine_A2A")
    send = node.attrs["send_bytes"]
    row = MOE.hidden * 2
    p_rank = 1 - math.comb(7, 2) / math.comb(8, 2)  # one expert per rank
    p_node = 1 - math.comb(4, 2) / math.comb(8, 2)  # four per node
    assert send[7] == round(256 * p_node * row)  # rank 3's peer on node 1
    assert [send[j] for j in range(4, 7)] == [0] * 3
    assert send[0] == round(2 * 256 * p_rank * row)  # its own tokens and node 1's, forwarded
    assert node.attrs["recv_bytes"] == send
    network = NetworkConfig.from_dict(
        {
            "topology": ["Switch", "Switch"],
            "npus_count": [4, 2],
            "bandwidth": [419.0, 46.6],
            "latency": [300, 1350],
        }
    )
    traces, groups = llm_traces(generate_llm(cfg))
    flex_ns = astra.simulate(traces, h100_configs(8)[1], network, comm_groups=groups).step_ns
    traces, groups = llm_traces(generate_llm(dataclasses.replace(cfg, moe_token_dispatcher="alltoall")))
    assert flex_ns < astra.simulate(traces, h100_configs(8)[1], network, comm_groups=groups).step_ns


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"moe_routing": "zipf:1.2"}, "balanced dropless routing only"),
        ({"moe_capacity_factor": 1.0}, "balanced dropless routing only"),
        ({"moe_flex_dispatcher_backend": "nccl"}, "--moe-flex-dispatcher-backend: expected one of"),
        ({"tp": 2, "sequence_parallel": True}, "needs --expert-tensor-parallel-size 1"),
    ],
)
def test_flex_refuses_what_it_does_not_model(change, message):
    cfg = dataclasses.replace(plan(moe_token_dispatcher="flex"), **change)
    if "tp" in change:
        cfg = dataclasses.replace(cfg, dp=4)
    with pytest.raises(ConfigError, match=message):
        generate_llm(cfg)


def test_hybridep_dispatch_against_the_megatron_core_moe_report():
    # arXiv 2603.07685 v2, Table 7: HybridEP dispatch on GB200 (NVL72) at EP 8 to 64 and on
    # H100 (DGX) at EP 32, hidden 7,168, 4,096 tokens, 256 experts (top 8 assumed)
    with validation_script("moe_dispatch") as table:
        for gpu, i, bound in (("GB200", 0, 0.15), ("GB200", 1, 0.15), ("GB200", 3, 0.15), ("H100", 2, 0.10)):
            published = table.PUBLISHED[gpu]["dispatch"][i][0]
            predicted = table.predict_us(gpu, table.EP_SIZES[i], hybrid=True)
            assert abs(predicted / published - 1) < bound, (gpu, table.EP_SIZES[i], predicted, published)
