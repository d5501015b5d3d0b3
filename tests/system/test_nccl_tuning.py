"""NCCL's cost model (astra_core.system.collectives.nccl.tuning) against the
formulas of NCCL's tuning.cc, each derived here from its constants."""

from __future__ import annotations

import math

import pytest

from astra_core.errors import ConfigError
from astra_core.system.collectives.nccl.tuning import (
    ALGO_NAMES,
    FUNC_NAMES,
    Algo,
    Communicator,
    Func,
    Graph,
    Proto,
    parse_env_list,
    tune,
)

CH, BW = 16, 40.0  # channels and GB/s per channel: inputs, as NCCL's topology search gives them


def one_node(**kw) -> Communicator:
    graphs = {Algo.RING: Graph(CH, BW, BW), Algo.TREE: Graph(CH, BW, BW), Algo.NVLS: Graph(CH, BW, BW)}
    return Communicator(n_ranks=8, n_nodes=1, compcap=90, graphs=graphs, **kw)


def test_ring_all_reduce_on_one_nvlink_node():
    t = tune(one_node())
    steps = 2 * (8 - 1)
    # LL: base 6.6 + 14 NVLink steps of 0.6 us; bus bw min(llMaxBw Hopper 141, 0.5 x 16 x 40)
    assert t.latency_us[Func.ALL_REDUCE][Algo.RING][Proto.LL] == pytest.approx(6.6 + steps * 0.6)
    assert t.bandwidth_gbps[Func.ALL_REDUCE][Algo.RING][Proto.LL] == pytest.approx(141.0 * 8 / steps)
    # Simple: base 8.4 + 14 x 3.4; the full 640 GB/s bus
    assert t.latency_us[Func.ALL_REDUCE][Algo.RING][Proto.SIMPLE] == pytest.approx(8.4 + steps * 3.4)
    n = 1 << 30
    expected = 8.4 + steps * 3.4 + n / (1000 * CH * BW * 8 / steps)
    assert t.time_us(Func.ALL_REDUCE, Algo.RING, Proto.SIMPLE, n) == pytest.approx(expected)
    # LL128: 120/128 of the wire, at most 36.7 GB/s per channel on Hopper
    assert t.bandwidth_gbps[Func.ALL_REDUCE][Algo.RING][Proto.LL128] == pytest.approx(
        min(CH * BW * 0.92, CH * 36.7) * 8 / steps
    )


def test_all_gather_steps_and_broadcast_latency():
    t = tune(one_node())
    assert t.bandwidth_gbps[Func.ALL_GATHER][Algo.RING][Proto.SIMPLE] == pytest.approx(CH * BW * 8 / 7)
    assert t.latency_us[Func.ALL_GATHER][Algo.RING][Proto.SIMPLE] == pytest.approx(8.4 + 7 * 3.4)
    # broadcast on shared channels: one hop of latency; only Ring implements it
    assert t.latency_us[Func.BROADCAST][Algo.RING][Proto.SIMPLE] == pytest.approx(8.4 + 3.4)
    assert t.bandwidth_gbps[Func.BROADCAST][Algo.TREE][Proto.SIMPLE] == 0


def test_tree_all_reduce_across_nodes_with_size_correction():
    graphs = {
        Algo.RING: Graph(8, 20.0, 20.0, latency_inter_us=1.0),
        Algo.TREE: Graph(8, 20.0, 20.0, latency_inter_us=1.0),
    }
    comm = Communicator(n_ranks=32, n_nodes=4, compcap=90, graphs=graphs)
    t = tune(comm)
    intra, inter = 4.0, 14 + 1.0 + 1.0  # NVLink tree Simple; NET tree Simple + latencyInter + flush
    assert t.latency_us[Func.ALL_REDUCE][Algo.TREE][Proto.SIMPLE] == pytest.approx(
        8.4 + 2 * ((8 - 1) * intra + 2 * inter)
    )
    bus = min(8 * 20.0 * 0.92, 8 * 36.0)  # perChMaxTreeBw Hopper >2 nodes: 36
    assert t.bandwidth_gbps[Func.ALL_REDUCE][Algo.TREE][Proto.SIMPLE] == pytest.approx(bus * 0.5)
    n = 1 << 20  # log2(n / 64) = 14: correction 0.5 for Simple
    assert t.time_us(Func.ALL_REDUCE, Algo.TREE, Proto.SIMPLE, n) == pytest.approx(
        t.latency_us[Func.ALL_REDUCE][Algo.TREE][Proto.SIMPLE] + n / (1000 * bus * 0.5 * 0.5)
    )


def test_ring_all_reduce_across_nodes_pays_network_steps_and_the_plateau():
    graphs = {Algo.RING: Graph(8, 20.0, 20.0, latency_inter_us=2.0)}
    comm = Communicator(n_ranks=32, n_nodes=4, compcap=90, graphs=graphs, cpu_vendor="amd")
    t = tune(comm)
    steps, inter_steps = 62, 6
    intra = max(3.4, 2.0 * 3)  # AMD net overhead 2 us, x3 for Simple
    inter = 14.0 + 2.0 + 2.0
    latency = 8.4 + (steps - inter_steps) * intra + inter_steps * inter
    assert t.latency_us[Func.ALL_REDUCE][Algo.RING][Proto.SIMPLE] == pytest.approx(latency)
    small, large = 8 * 32 * 63, 8 * 32 * 64  # the plateau starts at 64 bytes per channel and rank
    bw = 8 * 20.0 * 32 / steps
    assert t.time_us(Func.ALL_REDUCE, Algo.RING, Proto.SIMPLE, small) == pytest.approx(
        latency + small / (1000 * bw)
    )
    assert t.time_us(Func.ALL_REDUCE, Algo.RING, Proto.SIMPLE, large) == pytest.approx(
        latency * 1.4 + large / (1000 * bw)
    )


def test_nvls_bandwidth_and_usability():
    t = tune(one_node(nvls=True))
    # NVSwitch multicast: efficiency 0.85 on Hopper, one channel lost, all-reduce pipelines two ops
    bus = CH * BW * 0.85 * (CH - 1) / CH * 2
    assert t.bandwidth_gbps[Func.ALL_REDUCE][Algo.NVLS][Proto.SIMPLE] == pytest.approx(
        min(bus / CH, BW) * CH * 8 / 14
    )
    assert t.latency_us[Func.ALL_REDUCE][Algo.NVLS][Proto.SIMPLE] == pytest.approx(25.0)
    assert t.bandwidth_gbps[Func.ALL_REDUCE][Algo.NVLS][Proto.LL] == 0
    assert not tune(one_node(nvls=False)).usable(Func.ALL_REDUCE, Algo.NVLS)


def test_choice_is_the_least_time_and_follows_nccl_algo_and_proto():
    t = tune(one_node())
    for n in (8, 1 << 16, 1 << 30):
        algo, proto, time = t.choose(Func.ALL_REDUCE, n)
        every = [
            t.time_us(Func.ALL_REDUCE, a, p, n) for a in Algo for p in Proto if t.usable(Func.ALL_REDUCE, a)
        ]
        assert time == min(x for x in every if x is not None)
    assert t.choose(Func.ALL_REDUCE, 8)[:2] == (Algo.RING, Proto.LL)  # 15 us: latency rules
    forced = tune(one_node(), nccl_algo="tree", nccl_proto="Simple")
    assert forced.choose(Func.ALL_REDUCE, 8)[:2] == (Algo.TREE, Proto.SIMPLE)
    # LL128 is on by default only where the paths allow it; NCCL_PROTO=LL128 forces it
    no_ll128 = {a: Graph(CH, BW, BW, ll128_ok=False) for a in (Algo.RING, Algo.TREE)}
    comm = Communicator(n_ranks=8, n_nodes=1, compcap=90, graphs=no_ll128)
    assert tune(comm).bandwidth_gbps[Func.ALL_REDUCE][Algo.RING][Proto.LL128] == 0
    assert tune(comm, nccl_proto="LL128").bandwidth_gbps[Func.ALL_REDUCE][Algo.RING][Proto.LL128] > 0
    with pytest.raises(ConfigError, match="no algorithm and protocol enabled for AllReduce"):
        tune(one_node(), nccl_algo="allreduce:^ring,tree").choose(Func.ALL_REDUCE, 8)


def test_env_lists_read_as_nccl_reads_them():
    table = parse_env_list(
        "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring", FUNC_NAMES, ALGO_NAMES, "NCCL_ALGO"
    )
    on = {FUNC_NAMES[f]: {ALGO_NAMES[a] for a, v in enumerate(row) if v} for f, row in enumerate(table)}
    assert on["AllReduce"] == {"Tree", "CollNetDirect"}
    assert on["Broadcast"] == {"Ring"}
    assert on["AllGather"] == {"Ring", "CollNetDirect"}
    assert parse_env_list("allreduce:^ring", FUNC_NAMES, ALGO_NAMES, "NCCL_ALGO")[0] is None
    with pytest.raises(ConfigError, match=r"^NCCL_ALGO='ring;tree': every entry after the first"):
        parse_env_list("ring;tree", FUNC_NAMES, ALGO_NAMES, "NCCL_ALGO")
    with pytest.raises(ConfigError, match=r"unknown 'rign'"):
        parse_env_list("rign", FUNC_NAMES, ALGO_NAMES, "NCCL_ALGO")
    with pytest.raises(ConfigError, match=r"unknown function 'allreduc'"):
        parse_env_list("allreduc:ring", FUNC_NAMES, ALGO_NAMES, "NCCL_ALGO")


def test_times_are_finite_and_grow_with_size():
    t = tune(one_node(nvls=True))
    for func in Func:
        previous = 0.0
        for log in range(3, 34):
            time = t.choose(func, 1 << log)[2]
            assert math.isfinite(time) and time >= previous
            previous = time
