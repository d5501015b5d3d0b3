"""Send/receive across nodes: the channels NCCL gives a peer (src/graph/paths.cc) and
the rate they reach, against public nccl-tests ``sendrecv_perf`` logs."""

from __future__ import annotations

from pathlib import Path

import pytest

import astra
from astra_core.calibrate.nccl_fit import _Problem
from astra_core.calibrate.nccl_tests import read_logs
from astra_core.config.network import NetworkConfig, load_network
from astra_core.config.system import SystemConfig, load_system
from astra_core.errors import TraceError
from astra_core.system.collectives.nccl.model import NcclModel
from astra_core.system.collectives.nccl.p2p import net_peer_channels, net_peer_gbps

REPO = Path(__file__).resolve().parents[2]
PRESET = REPO / "examples" / "validation" / "hgx_h100_4nodes"
DATA = REPO / "tests" / "data" / "nccl_tests"


@pytest.mark.parametrize(
    "rule, ranks, nodes, comm_channels, expected",
    [
        # 2.29 on: ceil(50 / 14) = 4, then halved while 4 x ceil(ranks / 8) > p2pnChannels
        ("bandwidth", 80, 10, 16, 1),  # 4 x 10 = 40 > 16, 2 x 10 = 20 > 16
        ("bandwidth", 40, 10, 16, 2),  # 4 x 5 = 20 > 16, 2 x 5 = 10
        ("bandwidth", 10, 10, 4, 2),  # 4 x 2 = 8 > 4, 2 x 2 = 4
        ("bandwidth", 16, 2, 16, 4),  # 4 x 2 = 8 <= 16
        ("bandwidth", 8, 1, 2, 2),  # one node: at most p2pnChannels
        # 2.20 to 2.28.9: 2, halved while 2 x ranks > 4 x p2pnChannels
        ("ranks", 16, 2, 16, 2),  # 32 <= 64
        ("ranks", 80, 10, 16, 1),  # 160 > 64
        ("ranks", 10, 10, 3, 1),  # p2pnChannels 4: 20 > 16
        ("fixed", 80, 10, 16, 2),
    ],
)
def test_channels_per_net_peer_follow_nccls_rule(rule, ranks, nodes, comm_channels, expected):
    assert net_peer_channels(rule, ranks, nodes, comm_channels, 50.0) == expected


def test_a_peer_reaches_its_channels_rate_up_to_the_nic():
    assert net_peer_gbps(1, 50.0) == 14.0
    assert net_peer_gbps(2, 50.0) == 28.0
    assert net_peer_gbps(4, 50.0) == 50.0


def _preset(nodes: int, version: str) -> tuple[NetworkConfig, SystemConfig]:
    """The ``hgx_h100_4nodes`` preset (8 H100 per node on NVSwitch, one 400 Gb/s NIC per
    GPU) with ``nodes`` nodes, NCCL ``version`` choosing."""
    data = load_network(PRESET / "network.yml").to_dict()
    data["npus_count"] = [8, nodes]
    config = load_system(PRESET / "system.json").to_dict()
    config["nccl"] = {**config["nccl"], "version": version}
    return NetworkConfig.from_dict(data, source="test"), SystemConfig.from_dict(config)


def _model(nodes: int, version: str) -> NcclModel:
    network, system = _preset(nodes, version)
    assert system.nccl is not None
    return NcclModel(system.nccl, network)


def test_a_send_across_nodes_costs_what_its_communicators_channels_carry():
    """10 nodes of 8 H100 (16 ring channels, one 50 GB/s NIC per GPU), NCCL 2.29.2: one
    channel per peer in the world's communicator, two in a pipeline group of one GPU
    per node (4 channels), and a send inside a node at the NVLinks' rate."""
    model = _model(10, "2.29.2")
    size = 1 << 30
    latency_ns = 1000 * model.p2p_latency_us(False, False)
    world = model.p2p_ns(7, 8, size)
    assert world == round(latency_ns + size / 14.0)
    pipeline = tuple(range(0, 80, 8))
    assert model.p2p_ns(0, 8, size, pipeline) == round(latency_ns + size / 28.0)
    inside = model.p2p_ns(0, 1, size)
    assert inside == round(1000 * model.p2p_latency_us(False, True) + size / model.nvlink_gbps)
    # NCCL 2.28.9's rule halves by ranks: the same pipeline group runs one channel
    older = _model(10, "2.28.9")
    assert older.p2p_ns(0, 8, size, pipeline) == round(latency_ns + size / 14.0)


@pytest.mark.parametrize(
    "name, channels",
    [
        ("h100_10node_g1_5colls.txt", 2),
        ("h100_10node_g2_5colls.txt", 2),
        ("h100_10node_g4_5colls.txt", 2),
        ("h100_10node_5colls.txt", 1),
    ],
)
def test_send_recv_across_ten_nodes_within_12_percent_of_nccl_tests(name, channels):
    """nccl-tests sendrecv_perf on 10 nodes of 1, 2, 4 and 8 H100 (NCCL 2.29.2, one 400
    Gb/s NIC per GPU; tests/data/nccl_tests/README.md): measured 24.8-26.2 GB/s with
    NCCL's two channels per peer, 15.2 GB/s with one, against 28 and 14 GB/s."""
    system, network = load_system(PRESET / "system.json"), load_network(PRESET / "network.yml")
    logs = read_logs(DATA / name, "send-recv")
    predicted = _Problem(logs, system, network).predict(None)
    big = [(p, t) for p, (t, _) in zip(logs[0].points, predicted, strict=True) if p.size_bytes >= 1 << 28]
    assert big
    for point, time_us in big:
        measured_gbps = point.size_bytes / point.time_us / 1e3
        assert abs(time_us / point.time_us - 1) <= 0.12, (point.size_bytes, measured_gbps)
        assert point.size_bytes / time_us / 1e3 == pytest.approx(14.0 * channels, rel=0.01)


def _send_trace(tmp_path: Path, npus: int, src: int, dst: int, size: int, **attrs) -> str:
    """One send from ``src`` to ``dst`` carrying ``attrs``, every other rank idle."""
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    prefix = tmp_path / "send"
    for rank in range(npus):
        nodes = []
        if rank == src:
            nodes = [
                make_node(1, "send", pb.COMM_SEND_NODE, comm_dst=dst, comm_size=size, comm_tag=3, **attrs)
            ]
        elif rank == dst:
            nodes = [make_node(1, "recv", pb.COMM_RECV_NODE, comm_src=src, comm_size=size, comm_tag=3)]
        write_rank_trace(f"{prefix}.{rank}.et", nodes)
    return str(prefix)


def test_a_pipeline_send_costs_its_pipeline_communicators_channels(tmp_path):
    """16 nodes of 8 H100, NCCL 2.29.2: a send in the world's communicator (128 ranks, 16
    ring channels) gets one channel, 14 GB/s; the same send on a pipeline of 16 ranks,
    one per node (``comm_group_stride`` 8, ``comm_group_size`` 16, as ``astra gen llm``
    writes it; 4 channels), gets two, 28 GB/s."""
    network, system = _preset(16, "2.29.2")
    size = 64 << 20
    model = NcclModel(system.nccl, network)
    latency_ns = 1000 * model.p2p_latency_us(False, False)
    world = astra.simulate(_send_trace(tmp_path, 128, 3, 11, size), system, network)
    assert world.ranks[11].finish_ns == round(latency_ns + size / 14.0)
    pipeline = _send_trace(tmp_path, 128, 3, 11, size, comm_group_stride=8, comm_group_size=16)
    assert astra.simulate(pipeline, system, network).ranks[11].finish_ns == round(latency_ns + size / 28.0)


@pytest.mark.parametrize(
    "attrs, message",
    [
        (
            {"comm_group_stride": 0, "comm_group_size": 16},
            "comm_group_stride 0 and comm_group_size 16 name no group of the 128 NPUs",
        ),
        (
            {"comm_group_stride": 8, "comm_group_size": 17},
            "comm_group_stride 8 and comm_group_size 17 name no group of the 128 NPUs",
        ),
        (
            {"comm_group_stride": 1, "comm_group_size": 8},
            "COMM_SEND to rank 11, which is not in its communicator",
        ),
    ],
)
def test_a_send_outside_its_communicator_is_one_line_naming_the_node(tmp_path, attrs, message):
    network, system = _preset(16, "2.29.2")
    with pytest.raises(TraceError, match=f"rank 3: node 1 \\(send\\): {message}"):
        astra.simulate(_send_trace(tmp_path, 128, 3, 11, 1 << 20, **attrs), system, network)
