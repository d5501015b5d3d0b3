"""The NCCL collective model: NCCL's topology search, message lanes, and runs.

Expected values are derived here from NCCL's rules (search.cc, tuning.cc,
enqueue.cc constants) and from conservation laws, never copied from astra."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest

import astra
from astra_core.config.gpus import GPUS
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.errors import ConfigError
from astra_core.system.collectives.nccl.schedule import WIRE, Layout, schedule_for
from astra_core.system.collectives.nccl.topology import Machine, communicator, search_graphs
from astra_core.system.collectives.nccl.tuning import Algo, Func, Proto, tune
from astra_core.workload.generators.micro import write_micro

GIB = 1 << 30
H100_NVLINK = 18 * 20.6  # NCCL's view of an H100's NVLinks: 18 x SM90_NVLINK_BW
A100_NVLINK = 12 * 20.0


def h100_node(gpus: int = 8) -> Machine:
    return Machine(gpus, gpus, GPUS["h100"], H100_NVLINK)


def h100_4nodes() -> Machine:
    return Machine(32, 8, GPUS["h100"], H100_NVLINK, nic_gbps=50.0, nics_per_node=8)


# -- NCCL's topology search ------------------------------------------------------------


def test_search_on_one_h100_node():
    graphs = search_graphs(h100_node())
    # Ring: the fastest SM90 speed, 60 GB/s, fits floor(370.8 / 60) = 6 channels (360 GB/s);
    # no slower speed beats 360 before the .49 cut, so 6 x 60 stays and is duplicated to 12 x 30
    ring = graphs[Algo.RING]
    assert (ring.n_channels, ring.bw_intra_gbps) == (12, 30.0)
    # Tree: as many channels as the ring: 12 fit at 30 GB/s (12 x 30 <= 370.8), not duplicated
    # on SM 90 below 50 GB/s with more than 4 channels
    assert (graphs[Algo.TREE].n_channels, graphs[Algo.TREE].bw_intra_gbps) == (12, 30.0)
    # NVLS: 8 heads, each loading every GPU link once and its own twice: 9 s <= 370.8 -> 40;
    # pass 2 raises the (unused) network speed to the fastest below 2 x 40
    nvls = graphs[Algo.NVLS]
    assert (nvls.n_channels, nvls.bw_intra_gbps, nvls.bw_inter_gbps) == (8, 40.0, 60.0)


def test_search_on_one_a100_node():
    graphs = search_graphs(Machine(8, 8, GPUS["a100"], A100_NVLINK))
    # 40 GB/s fits 6 channels = the GPU's 240 GB/s: done; duplicated (SM 80) to 12 x 20
    assert (graphs[Algo.RING].n_channels, graphs[Algo.RING].bw_intra_gbps) == (12, 20.0)
    assert Algo.NVLS not in graphs  # NVLS needs SM 90


def test_search_across_four_h100_nodes():
    graphs = search_graphs(h100_4nodes())
    # Ring: 48 GB/s (fastest SM90 network speed <= the 50 GB/s NIC), one channel per NIC;
    # 8 channels leave through 8 GPUs, each GPU's NVLink out carries 7 x 48 = 336 <= 370.8;
    # 8 x 48 = 384 >= 370.8: done, and not duplicated (48 < 50 on SM 90, 8 > 4 channels)
    assert (graphs[Algo.RING].n_channels, graphs[Algo.RING].bw_inter_gbps) == (8, 48.0)
    # NVLS: (c + 1) s <= 370.8 gives 6 heads at 48, 7 at 45, 8 at 40 (all NICs); pass 2
    # raises the network speed to 48
    nvls = graphs[Algo.NVLS_TREE]
    assert (nvls.n_channels, nvls.bw_intra_gbps, nvls.bw_inter_gbps) == (8, 40.0, 48.0)


def test_search_on_one_gb200_nvl72_domain():
    """A GB200 NVL72 rack is one node to NCCL (MNNVL fuses its trays' topologies)."""
    graphs = search_graphs(Machine(72, 72, GPUS["gb200"], 18 * 40.1))
    # Ring: SM100 speeds 90, 80, 70, 60, 50, 45: floor(721.8 / 45) = 16 channels = 720 GB/s;
    # not duplicated (45 < 50 GB/s with more than 4 channels beyond SM 80)
    assert (graphs[Algo.RING].n_channels, graphs[Algo.RING].bw_intra_gbps) == (16, 45.0)
    # NVLS: at most NCCL_MAX_NVLS_ARITY = 32 heads; (32 + 1) s <= 721.8 -> 20 GB/s
    assert (graphs[Algo.NVLS].n_channels, graphs[Algo.NVLS].bw_intra_gbps) == (32, 20.0)
    t = tune(communicator(Machine(72, 72, GPUS["gb200"], 18 * 40.1)))
    # NVLS serves only all-reduce beyond 32 local ranks (enqueue.cc)
    assert t.choose(Func.ALL_REDUCE, 8 * GIB)[0] == Algo.NVLS
    assert t.choose(Func.ALL_GATHER, 8 * GIB)[0] == t.choose(Func.REDUCE_SCATTER, 8 * GIB)[0] == Algo.RING


def test_nccl_choices_on_h100():
    one = tune(communicator(h100_node()))
    assert one.choose(Func.ALL_REDUCE, 8)[:2] == (Algo.RING, Proto.LL)
    assert one.choose(Func.ALL_REDUCE, 8 * GIB)[:2] == (Algo.NVLS, Proto.SIMPLE)
    # NVLS bus bandwidth: 8 channels x 40 x 0.85 (SM90 nvlsEfficiency) x 7/8 x 2 = 476 GB/s
    bus = tune(communicator(h100_node())).bandwidth_gbps[Func.ALL_REDUCE][Algo.NVLS][Proto.SIMPLE]
    assert bus * 14 / 8 == pytest.approx(8 * 40 * 0.85 * 7 / 8 * 2)
    four = tune(communicator(h100_4nodes()))
    assert four.choose(Func.ALL_REDUCE, 8 * GIB)[:2] == (Algo.RING, Proto.SIMPLE)


def test_channels_drop_for_small_sizes():
    t = tune(communicator(h100_node()))
    # runtime channels: min(ring, tree) = 12, doubled when rings connect (connect.cc) = 24
    assert t.runtime_channels() == 24
    four = tune(communicator(h100_4nodes()))
    assert four.runtime_channels() == 16  # 8 x 2; 16 is not below 16: no second doubling
    # Simple: 512 threads x 64 bytes per channel; 1 MiB keeps all 24 (24 x 32 KiB < 1 MiB)
    assert t.channels(Func.ALL_REDUCE, Algo.RING, Proto.SIMPLE, 1 << 20) == 24
    # 128 KiB: channels while 128 KiB < nc x 32 KiB: 4 stay
    assert t.channels(Func.ALL_REDUCE, Algo.RING, Proto.SIMPLE, 128 << 10) == 4
    # LL on a ring: 8 x 8 ranks = 64 bytes per thread, 32 KiB per channel as well
    assert t.channels(Func.ALL_REDUCE, Algo.RING, Proto.LL, 64 << 10) == 2
    assert t.channels(Func.ALL_REDUCE, Algo.NVLS, Proto.SIMPLE, 8) == 16  # NVLS_NCHANNELS_SM90
    # 4 of 24 channels carry 4/24 of the graph's 12 x 30 GB/s
    n = 128 << 10
    expected = 8.4 + 14 * 3.4 + n / (1e3 * 12 * 30 * 4 / 24 * 8 / 14)
    assert t.time_with_channels_us(Func.ALL_REDUCE, Algo.RING, Proto.SIMPLE, n, 4) == pytest.approx(expected)


# -- message lanes: every send has its receive, bytes are conserved ----------------------

CASES = [
    ("all-reduce", Algo.RING, Proto.SIMPLE, 8, 8, 3 * GIB // 7 + 5, 24),
    ("all-reduce", Algo.RING, Proto.LL, 8, 8, 100_000, 2),
    ("all-reduce", Algo.RING, Proto.LL128, 32, 8, 77 << 20, 8),
    ("all-gather", Algo.RING, Proto.SIMPLE, 32, 8, 32 * (5 << 20), 8),
    ("reduce-scatter", Algo.RING, Proto.SIMPLE, 4, 4, 9 << 20, 12),
    ("all-reduce", Algo.TREE, Proto.SIMPLE, 32, 8, 33 << 20, 16),
    ("all-reduce", Algo.TREE, Proto.LL128, 24, 8, 5 << 20, 16),
    ("broadcast", Algo.RING, Proto.SIMPLE, 16, 8, 9 << 20, 24),
    ("reduce", Algo.RING, Proto.LL, 8, 8, 100_000, 4),
    ("all-reduce", Algo.TREE, Proto.LL, 8, 8, 4096, 3),
    ("all-reduce", Algo.NVLS, Proto.SIMPLE, 8, 8, 70 << 20, 16),
    ("all-reduce", Algo.NVLS_TREE, Proto.SIMPLE, 24, 8, 50 << 20, 16),
    ("all-gather", Algo.NVLS, Proto.SIMPLE, 8, 8, 8 << 20, 16),
    ("all-to-all", Algo.RING, Proto.SIMPLE, 16, 8, 16 * 300_000, 1),
    ("all-reduce", Algo.COLLNET_DIRECT, Proto.SIMPLE, 32, 8, 100 << 20, 8),
    ("all-reduce", Algo.COLLNET_CHAIN, Proto.SIMPLE, 24, 8, 7 << 20, 8),
]


@pytest.mark.parametrize("func, algo, proto, n, per_node, nbytes, channels", CASES)
def test_every_send_has_its_receive(func, algo, proto, n, per_node, nbytes, channels):
    layout = Layout(tuple(range(n)), per_node)
    sent: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    expected: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for me in range(n):
        schedule = schedule_for(func, algo, proto, layout, me, nbytes, channels)
        for i, lane in enumerate(schedule.lanes):
            for dst, size, needs in lane.sends:
                assert dst != me and all(j < len(schedule.recvs) for j in needs)
                sent[(me, dst, i)].append(size)
        for src, size, lane in schedule.recvs:
            expected[(src, me, lane)].append(size)
    assert sent == expected


def wire_bytes_sent(func, algo, proto, n, per_node, nbytes, channels, me=0) -> int:
    layout = Layout(tuple(range(n)), per_node)
    schedule = schedule_for(func, algo, proto, layout, me, nbytes, channels)
    return sum(size for lane in schedule.lanes for _, size, _ in lane.sends)


@pytest.mark.parametrize("proto", list(Proto))
def test_ring_all_reduce_sends_2_n_minus_1_over_n_of_the_buffer(proto):
    n, nbytes = 8, 96 << 20  # divides into 16-byte chunks on every channel
    got = wire_bytes_sent("all-reduce", Algo.RING, proto, n, n, nbytes, 12)
    assert got == pytest.approx(2 * (n - 1) / n * nbytes * WIRE[proto], rel=1e-6)


def test_nvls_and_all_to_all_bytes():
    n, nbytes = 8, 64 << 20
    # NVLS all-reduce: a rank's parts to the 7 other heads, its reduced part to 7 ranks
    assert wire_bytes_sent("all-reduce", Algo.NVLS, Proto.SIMPLE, n, n, nbytes, 16) == pytest.approx(
        2 * (n - 1) / n * nbytes
    )
    # all-to-all: nbytes / n to each of the n - 1 others
    assert wire_bytes_sent("all-to-all", Algo.RING, Proto.SIMPLE, 16, 8, 16 * 10**6, 1) == 15 * 10**6


# -- runs ----------------------------------------------------------------------------


def h100_configs(gpus=8, nvlink_gbps=450.0, **nccl) -> tuple[NetworkConfig, SystemConfig]:
    network = NetworkConfig.from_dict(
        {
            "topology": ["Switch"],
            "npus_count": [gpus],
            "bandwidth": [nvlink_gbps * 1e9 / GIB],
            "latency": [300],
        }
    )
    system = SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 4,
            **{
                f"{c}-implementation": ["nccl"]
                for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
            },
            "nccl": {"gpu": "H100", **nccl},
        }
    )
    return network, system


def run(tmp_path: Path, collective: str, size: int, gpus: int = 8, backend=None, **kw):
    network, system = h100_configs(gpus, **kw)
    prefix = tmp_path / f"{collective}_{size}"
    write_micro(collective, size, gpus, prefix)
    return astra.simulate(str(prefix), system, network, backend=backend)


def test_ring_all_reduce_takes_nccl_time_on_a_fast_fabric(tmp_path):
    size = 2 * GIB
    result = run(tmp_path, "all-reduce", size, NCCL_ALGO="Ring")
    # Ring Simple: base 8.4 + 14 NVLink steps x 3.4 us; bus 12 x 30 GB/s, x 8/14 algorithm bw
    expected_us = 8.4 + 14 * 3.4 + size / (1e3 * 12 * 30 * 8 / 14)
    assert result.step_ns == round(expected_us * 1000)


def test_slow_fabric_bounds_the_time_by_bytes_over_link_rate(tmp_path):
    size = 256 << 20
    slow = 45.0  # GB/s per GPU, an eighth of an H100's NVLinks
    result = run(
        tmp_path, "all-reduce", size, backend="analytical-congestion", nvlink_gbps=slow, NCCL_ALGO="Ring"
    )
    # every rank sends 2 (n-1)/n of the buffer through its one link: a lower bound ...
    wire_ns = 2 * 7 / 8 * size / slow
    # ... and NCCL's own time on what its search finds there: 45 x 20.6/25 = 37.08 GB/s
    # fits 1 channel at 30; 24, 20, 15 do no better and 12 / 30 < .49 ends the search;
    # 1 x 30 is duplicated into 2 x 15 (n = 1 is not above 4)
    nccl_ns = (8.4 + 14 * 3.4 + size / (1e3 * 2 * 15 * 8 / 14)) * 1e3
    assert max(wire_ns, nccl_ns) <= result.step_ns < 1.1 * max(wire_ns, nccl_ns)


@pytest.mark.parametrize("backend", ["analytical-congestion", "garnetlike"])
def test_same_messages_on_other_backends(tmp_path, backend):
    base = run(tmp_path, "all-reduce", 1 << 20)
    other = run(tmp_path, "all-reduce", 1 << 20, backend=backend)
    assert other.messages == base.messages
    assert other.step_ns >= base.step_ns  # NCCL's time is a floor on every fabric


def test_all_to_all_and_all_gather_finish(tmp_path):
    a2a = run(tmp_path, "all-to-all", 64 << 20)
    # 7/8 of 64 MiB over 370.8 GB/s of NVLink, after NCCL's launch and one step (11.8 us)
    assert a2a.step_ns == pytest.approx((11.8 + 7 / 8 * (64 << 20) / 370.8e3) * 1e3, abs=2)
    ag = run(tmp_path, "all-gather", 16 << 20)
    assert ag.step_ns > 0


# -- configuration -------------------------------------------------------------------


def test_nccl_needs_its_section():
    with pytest.raises(ConfigError, match='needs a "nccl" section'):
        SystemConfig.from_dict(
            {
                "scheduling-policy": "LIFO",
                "collective-optimization": "baseline",
                "preferred-dataset-splits": 1,
                "all-reduce-implementation": ["nccl"],
            }
        )


@pytest.mark.parametrize(
    "section, message",
    [
        ({"gpu": "V100"}, "nccl.gpu: expected one of A100, A100-40GB, H100, H200, B200, GB200, GB300"),
        ({"gpu": "H100", "NCCL_ALGO": "Rings"}, "nccl.NCCL_ALGO: NCCL_ALGO='Rings': unknown 'Rings'"),
        ({"gpu": "H100", "nics": 8}, "unknown key 'nics'"),
        ({}, "missing required key 'gpu'"),
    ],
)
def test_bad_sections_are_one_line(section, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SystemConfig.from_dict(
            {
                "scheduling-policy": "LIFO",
                "collective-optimization": "baseline",
                "preferred-dataset-splits": 1,
                "all-reduce-implementation": ["nccl"],
                "nccl": section,
            }
        )


def test_node_must_be_a_switch(tmp_path):
    network = NetworkConfig.from_dict(
        {"topology": ["Ring"], "npus_count": [8], "bandwidth": [400], "latency": [300]}
    )
    _, system = h100_configs()
    write_micro("all-reduce", 1024, 8, tmp_path / "ar")
    with pytest.raises(ConfigError, match="dimension 0 to be a Switch"):
        astra.simulate(str(tmp_path / "ar"), system, network)


def test_presets_load():
    root = Path(__file__).resolve().parents[2] / "examples" / "validation"
    for name in ("hgx_h100", "hgx_h100_4nodes", "dgx_a100"):
        from astra_core.config.network import load_network
        from astra_core.config.system import load_system

        net = load_network(root / name / "network.yml")
        sysc = load_system(root / name / "system.json", dims=net.dims_count)
        assert sysc.nccl is not None and math.prod(net.npus_per_dim) in (8, 32)


def p2p_trace(tmp_path: Path, size: int, npus: int = 8) -> str:
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    prefix = tmp_path / f"p2p_{size}"
    for rank in range(npus):
        if rank == 0:
            nodes = [make_node(1, "send", pb.COMM_SEND_NODE, comm_dst=1, comm_size=size, comm_tag=7)]
        elif rank == 1:
            nodes = [make_node(1, "recv", pb.COMM_RECV_NODE, comm_src=0, comm_size=size, comm_tag=7)]
        else:
            nodes = []
        write_rank_trace(f"{prefix}.{rank}.et", nodes)
    return str(prefix)


@pytest.mark.parametrize(
    "size, expected_us",
    [
        # LL up to 16 KiB: 6.6 + 0.6 us, 16 bytes on the wire per 8 at 370.8 GB/s
        (4096, 6.6 + 0.6 + 2 * 4096 / 370.8e3),
        # Simple: 8.4 + 3.4 us, the bytes at 370.8 GB/s
        (1 << 20, 8.4 + 3.4 + (1 << 20) / 370.8e3),
    ],
)
def test_sends_take_nccl_p2p_cost(tmp_path, size, expected_us):
    network, system = h100_configs()
    result = astra.simulate(p2p_trace(tmp_path, size), system, network)
    assert result.ranks[1].finish_ns == round(expected_us * 1000)
    off = SystemConfig.from_dict({**system.to_dict(), "nccl": {"gpu": "H100", "p2p": 0}})
    plain = astra.simulate(p2p_trace(tmp_path, size), off, network)
    # the network alone: two 300 ns links and one serialization at 450 GB/s
    assert plain.ranks[1].finish_ns == int(600 + size / 450.0)


@pytest.mark.parametrize("collective, chakra", [("broadcast", 5), ("reduce", 1)])
def test_broadcast_and_reduce_run_as_nccl_rings(tmp_path, collective, chakra):
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    size = 64 << 20
    prefix = tmp_path / collective
    for rank in range(8):
        write_rank_trace(
            f"{prefix}.{rank}.et",
            [make_node(1, collective, pb.COMM_COLL_NODE, comm_type=chakra, comm_size=size)],
        )
    network, system = h100_configs()
    result = astra.simulate(str(prefix), system, network)
    # NCCL's time: Ring Simple, one hop of latency (same channels), the bus at 12 x 30 GB/s;
    # a broadcast or reduce moves the buffer once: algorithm bandwidth = bus x n / n
    nccl_ns = (8.4 + 3.4 + size / (1e3 * 12 * 30)) * 1000
    # the chain on the network: 24 channels x 512 KiB chunks = 12 MiB per message; each is
    # forwarded on arrival over 7 hops of 2 x 300 ns + 12 MiB / 450 GB/s (the largest decides)
    chain_ns = 7 * (600 + int((12 << 20) / 450.0))
    assert result.step_ns == pytest.approx(max(nccl_ns, chain_ns), abs=1)


@pytest.mark.parametrize("gpus", [4, 8])
def test_nvls_all_reduce_moves_n_plus_1_over_n_per_gpu(tmp_path, gpus):
    size = 4 * GIB
    result = run(tmp_path, "all-reduce", size, gpus=gpus, NCCL_ALGO="NVLS")
    # NCCL's NVLS latency (hwLat NVLink NVLS 25 us); the data at the NVLinks' 370.8 GB/s x
    # nvlsEfficiency 0.85 x n / (n + 1) (each GPU moves (n + 1) / n of the buffer)
    expected_us = 25 + size / (1e3 * 370.8 * 0.85 * gpus / (gpus + 1))
    assert result.step_ns == pytest.approx(expected_us * 1000, abs=1)


def test_collnet_runs_where_the_network_reduces(tmp_path):
    network = NetworkConfig.from_dict(
        {
            "topology": ["Switch", "Switch"],
            "npus_count": [8, 4],
            "bandwidth": [450e9 / GIB, 50e9 / GIB],
            "latency": [300, 1350],
        }
    )
    results = {}
    for algo in ("CollNetDirect", "CollNetChain"):
        system = SystemConfig.from_dict(
            {
                "scheduling-policy": "LIFO",
                "collective-optimization": "baseline",
                "preferred-dataset-splits": 1,
                "all-reduce-implementation": ["nccl"],
                "nccl": {"gpu": "H100", "collnet": 1, "NCCL_ALGO": algo},
            }
        )
        write_micro("all-reduce", 256 << 20, 32, tmp_path / "ar")
        results[algo] = astra.simulate(str(tmp_path / "ar"), system, network).step_ns
    comm = communicator(Machine(32, 8, GPUS["h100"], H100_NVLINK, 50.0, 8, collnet=True))
    t = tune(comm, "CollNetDirect")
    # CollNet Direct: 8 heads x 48 GB/s; one NIC per GPU (no GPU-per-NIC factor); x 0.85 on
    # SM 90; x 1/2 for an all-reduce (tuning.cc)
    bus = 8 * 48.0 * 0.85 * 0.5
    assert t.bandwidth_gbps[Func.ALL_REDUCE][Algo.COLLNET_DIRECT][Proto.SIMPLE] == pytest.approx(bus)
    assert (
        results["CollNetDirect"]
        >= t.time_us(Func.ALL_REDUCE, Algo.COLLNET_DIRECT, Proto.SIMPLE, 256 << 20) * 1000 - 1
    )
    assert results["CollNetChain"] > 0


def test_several_nodes_need_a_nic_dimension(tmp_path):
    network, _ = h100_configs(gpus=16)
    _, system = h100_configs()
    system = SystemConfig.from_dict({**system.to_dict(), "nccl": {"gpu": "H100", "gpus-per-node": 8}})
    write_micro("all-reduce", 1024, 16, tmp_path / "ar")
    with pytest.raises(ConfigError, match="needs a network dimension 1 for the NICs"):
        astra.simulate(str(tmp_path / "ar"), system, network)


def test_one_gpu_per_node_never_picks_an_unmodelled_algorithm():
    # one GPU per node is where NCCL would consider PAT for all-gather and reduce-scatter
    comm = communicator(Machine(4, 1, GPUS["h100"], H100_NVLINK, nic_gbps=50.0, nics_per_node=1))
    t = tune(comm)
    for func in (Func.ALL_GATHER, Func.REDUCE_SCATTER, Func.ALL_REDUCE):
        for exp in range(3, 34, 3):
            assert t.choose(func, 1 << exp)[0] in (Algo.RING, Algo.TREE)


@pytest.mark.parametrize("involved, members", [([True, False], 8), ([False, True], 2)])
def test_involved_dims_make_the_communicator(tmp_path, involved, members):
    """An NCCL collective with involved_dim runs over the ranks that differ only on the
    involved dimensions: on 2 nodes of 8 GPUs, one node's GPUs or one rail's pair."""
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    size = 64 << 20
    network = NetworkConfig.from_dict(
        {
            "topology": ["Switch", "Switch"],
            "npus_count": [8, 2],
            "bandwidth": [450e9 / GIB, 50e9 / GIB],
            "latency": [300, 1000],
        }
    )
    _, system = h100_configs()
    prefix = tmp_path / "dims"
    node = make_node(
        0, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=size, involved_dim=involved
    )
    for rank in range(16):
        write_rank_trace(f"{prefix}.{rank}.et", [node])
    result = astra.simulate(str(prefix), system, network)
    # a ring all-reduce of a communicator of n ranks sends 2 (n - 1) / n of the buffer per rank
    # (NCCL's Simple protocol moves data bytes on the wire; chunks are whole 16-byte grains)
    assert result.message_bytes == pytest.approx(16 * 2 * (members - 1) / members * size, rel=1e-3)


# -- the network NCCL can place -----------------------------------------------------------


def _two_dims(npus, bandwidths_gbps, latencies=(300, 1350), kinds=("Switch", "Switch")) -> NetworkConfig:
    return NetworkConfig.from_dict(
        {
            "topology": list(kinds),
            "npus_count": list(npus),
            "bandwidth": [b * 1e9 / GIB for b in bandwidths_gbps],
            "latency": list(latencies),
        }
    )


def test_a_dimension_beyond_the_rails_is_refused(tmp_path):
    """NCCL's topology ends at the NIC (the network is one NET vertex per port): a third
    network dimension has no place in the model, so a run on one is refused, not timed as
    if the dimension were not there (it was: 1,382.916 µs on [2, 2, 2], the [2, 4] time)."""
    network = _two_dims([2, 2, 2], [450.0, 50.0, 1.1e-6], latencies=(300, 1350, 1e9), kinds=("Switch",) * 3)
    _, system = h100_configs()
    write_micro("all-reduce", 64 << 20, 8, tmp_path / "ar")
    with pytest.raises(ConfigError) as caught:
        astra.simulate(str(tmp_path / "ar"), system, network)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("<python>: nccl: the NCCL model places 2 network dimensions")
    assert "npus_count [2, 2, 2] has dimension 2 beyond them" in message


def test_gpus_per_node_must_be_the_node_dimension(tmp_path):
    network = _two_dims([4, 2], [450.0, 50.0])
    _, system = h100_configs()
    system = SystemConfig.from_dict({**system.to_dict(), "nccl": {"gpu": "H100", "gpus-per-node": 2}})
    write_micro("all-reduce", 1 << 20, 8, tmp_path / "ar")
    with pytest.raises(
        ConfigError,
        match=r"^<python>: nccl.gpus-per-node: 2 contradicts the network: "
        r"a node is network dimension 0, which has 4 NPUs; leave gpus-per-node out or make it 4$",
    ):
        astra.simulate(str(tmp_path / "ar"), system, network)
    # the same number as dimension 0 is what the default gives
    same = SystemConfig.from_dict({**system.to_dict(), "nccl": {"gpu": "H100", "gpus-per-node": 4}})
    default = SystemConfig.from_dict({**system.to_dict(), "nccl": {"gpu": "H100"}})
    assert (
        astra.simulate(str(tmp_path / "ar"), same, network).step_ns
        == astra.simulate(str(tmp_path / "ar"), default, network).step_ns
    )


def test_nvlink_faster_than_the_gpu_warns(tmp_path):
    """An A100 has 12 NVLink 3 links x 25 GB/s = 300 GB/s per direction (NVIDIA A100
    datasheet: 600 GB/s bidirectional); a 450 GB/s dimension 0 is an H100's, not an A100's."""
    from astra_core.config.issues import ConfigWarning

    write_micro("all-reduce", 64 << 20, 8, tmp_path / "ar")
    network, system = h100_configs(nvlink_gbps=450.0, **{})
    a100 = SystemConfig.from_dict({**system.to_dict(), "nccl": {"gpu": "A100"}})
    with pytest.warns(ConfigWarning) as caught:
        astra.simulate(str(tmp_path / "ar"), a100, network)
    lines = [str(w.message) for w in caught if "nccl.gpu" in str(w.message)]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("<python>: nccl.gpu: A100 has 12 NVLinks x 25 GB/s = 300 GB/s per GPU")
    assert "gives 450.0 GB/s" in lines[0]
    # at the A100's own rate there is nothing to say
    network_300, _ = h100_configs(nvlink_gbps=300.0)
    import warnings as _warnings

    with _warnings.catch_warnings():
        _warnings.simplefilter("error", ConfigWarning)
        astra.simulate(str(tmp_path / "ar"), a100, network_300)


def test_an_unused_nccl_section_warns():
    from astra_core.config.issues import ConfigWarning

    with pytest.warns(
        ConfigWarning, match=r'^<python>: nccl: no effect; no \*-implementation list names "nccl"'
    ):
        SystemConfig.from_dict(
            {
                "scheduling-policy": "LIFO",
                "collective-optimization": "baseline",
                "preferred-dataset-splits": 1,
                "all-reduce-implementation": ["ring"],
                "nccl": {"gpu": "H100"},
            }
        )


def test_models_of_the_same_inputs_share_what_they_found():
    """A process that simulates many steps on one cluster (astra plan's workers) finds each
    communicator once: models of the same nccl section, network and constants share their
    caches; another network is another model, timed anew."""
    from astra_core.config.nccl import NcclConfig
    from astra_core.system.collectives.nccl.model import NcclModel
    from astra_core.system.comm_types import CommType

    def network(nic_gbs: float) -> NetworkConfig:
        return NetworkConfig.from_dict(
            {"topology": ["Switch", "Switch"], "npus_count": [8, 4], "bandwidth": [419.09, nic_gbs], "latency": [300, 1350]}
        )  # fmt: skip

    config = NcclConfig.model_validate({"gpu": "H100"})
    members = tuple(range(32))
    first = NcclModel(config, network(46.57))
    found = first.machine(members)
    assert NcclModel(config, network(46.57)).machine(members) is found
    slower = NcclModel(config, network(23.28))
    assert slower.machine(members) is not found
    at = (CommType.ALL_REDUCE, members, GIB)
    assert slower.choose(*at)[3] > first.choose(*at)[3]
