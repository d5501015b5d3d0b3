"""ns3: the estimate's packet-hops are the packets the model sends (astra_ns3.work).

A message of B bytes over H links is P = ceil(B / payload_bytes) data packets,
what the backend's max_packet_hops budget counts at send and what the C++ model
makes (its per-message ``packets_sent``), and ceil(P / ack_interval) ACKs back
over a route as long. The model's ``packet_hops`` statistic (every frame a port
sent, counted in C++) has them all where no CNP, PFC frame or retransmission
adds to it, but for the ACKs still on their way when the last message of the
run is delivered (the simulation stops there). The estimate finds both from the
system layer on the analytical model, before (and without) any packet.
"""

from __future__ import annotations

import json

import pytest

from astra_core.api import estimate, simulate
from astra_ns3.tests.fabrics import require_ns3


@pytest.fixture(autouse=True)
def _ns3_installed():
    require_ns3()


def assert_packets_as_counted_in_cpp(est, backend, last_messages: int, acks: int) -> None:
    """The estimate's data packet-hops are the data packets the C++ model made x their
    routes' links; its data and ACK packet-hops are what the ports sent, less at most the
    ACKs (``acks`` per message, over at most 6 links) of the ``last_messages`` messages
    of the last step, which may still be on their way when the run stops."""
    stats = backend.stats
    assert stats["cnps"] == stats["pfc_pauses"] == stats["retransmits"] == 0
    table = backend.results.messages()
    made = sum(
        packets * len(backend.physical.route(src, dst, tag))
        for src, dst, tag, packets in zip(table.src, table.dst, table.tag, table.packets_sent)
    )
    assert est.budgeted == made
    assert 0 <= est.work - stats["packet_hops"] <= last_messages * acks * 6


@pytest.mark.parametrize("ack_interval", [1, 3])
def test_packet_hops_of_the_estimate_are_the_ones_ns3_counts_on_a_ring_all_reduce(
    built_backends, reference_dir, ack_interval
):
    # 1 MiB ring all-reduce on 8 NPUs of one switch: 448 messages of 32 KiB (8 packets of
    # 4096 B), each over 2 links (up to the switch and down).
    case = dict(
        workload=reference_dir / "workload/micro/ALL_REDUCE_8npus_1MB/ALL_REDUCE",
        system=reference_dir / "system/ring_1d.json",
        network=reference_dir / "network/sw8.yml",
        backend="ns3",
        backend_config={"cc": "none", "ack_interval": ack_interval},
    )
    est = estimate(**case)
    acks = -(-8 // ack_interval)
    assert (est.messages, est.budgeted, est.work) == (448, 448 * 8 * 2, 448 * (8 + acks) * 2)
    run = simulate(**case)
    assert est.budgeted == built_backends[-1].budget.total  # counted at send
    assert est.messages == run.counters["messages"] == run.messages
    assert_packets_as_counted_in_cpp(est, built_backends[-1], last_messages=8, acks=acks)


def test_packet_hops_of_the_estimate_match_ns3_on_a_fat_tree_with_ecmp(tmp_path, built_backends):
    from astra_core.config.system import upstream_system
    from astra_core.topology.generators import fat_tree
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    # A direct all-to-all of 48 KiB per rank on the 16 hosts of a k = 4 fat-tree: 3 KiB
    # (one packet) to each of 15 peers, over 2 (same edge), 4 (same pod) or 6 links,
    # on whichever equal-cost path ECMP picks.
    topology = tmp_path / "fat_tree.txt"
    write_ns3_topology(fat_tree(4), topology)
    system = tmp_path / "system.json"
    system.write_text(json.dumps(upstream_system("direct", 1)))
    node = make_node(
        0, "a2a", pb.COMM_COLL_NODE, comm_type=pb.ALL_TO_ALL, comm_size=48 << 10, is_cpu_op=False
    )
    for rank in range(16):
        write_rank_trace(f"{tmp_path}/a2a.{rank}.et", [node])
    case = dict(
        workload=f"{tmp_path}/a2a",
        system=system,
        topology=topology,
        backend="ns3",
        backend_config={"cc": "none"},
    )
    est = estimate(**case)
    # Per rank and chunk: 1 peer on its edge (2 links), 2 in its pod (4), 12 elsewhere (6).
    chunks = upstream_system("direct", 1)["preferred-dataset-splits"]
    per_rank = chunks * (1 * 2 + 2 * 4 + 12 * 6)
    packets = -(-(48 << 10) // 16 // chunks // 4096)
    assert est.budgeted == 16 * per_rank * packets
    assert est.work == 2 * est.budgeted  # one ACK per packet
    simulate(**case)
    assert est.budgeted == built_backends[-1].budget.total
    assert_packets_as_counted_in_cpp(est, built_backends[-1], last_messages=16 * 15, acks=packets)


def test_the_estimate_builds_no_ns3_fabric_and_starts_no_worker(reference_dir, monkeypatch):
    from astra_ns3 import network, process

    def refuse(*args, **kwargs):
        raise AssertionError("the estimate must not build the ns3 backend")

    monkeypatch.setattr(network.Ns3Network, "__init__", refuse)
    monkeypatch.setattr(process, "prestart", refuse)
    est = estimate(
        reference_dir / "workload/micro/ALL_REDUCE_8npus_1MB/ALL_REDUCE",
        reference_dir / "system/ring_1d.json",
        reference_dir / "network/sw8.yml",
        backend="ns3",
    )
    assert est.unit == "packet-hops" and est.budgeted == 448 * 8 * 2


@pytest.mark.parametrize("fast_forward", [True, False])
def test_messages_too_short_to_be_found_steady_are_priced_packet_by_packet(fast_forward):
    from astra_core.estimate import price_run as price
    from astra_ns3.config import load_config
    from astra_ns3.tests.fabrics import star
    from astra_ns3.work import (
        MEMORY_BASE_BYTES,
        MEMORY_PER_MESSAGE_BYTES,
        MESSAGE_S,
        PACKET_HOPS_PER_S,
        RUN_PER_NPU_S,
        RUN_S,
        SPEED_SPREAD,
        Ns3Work,
    )

    # 1000 messages of 40 KiB (10 packets) from NPU 1 to NPU 2 of a star: 2 links each.
    config = load_config({"ack_interval": 2}).model_copy(update={"fast_forward": fast_forward})
    model = Ns3Work(star(3), config)
    est = price("ns3", model, lambda: ({(1, 2, 40 << 10): 1000}, None, False))
    assert (est.budgeted, est.work) == (1000 * 10 * 2, 1000 * (10 + 5) * 2)
    assert model.run_s == RUN_S + 3 * RUN_PER_NPU_S  # the run's own cost, whatever it sends
    assert est.wall_s == pytest.approx(model.run_s + 1000 * MESSAGE_S + est.work / PACKET_HOPS_PER_S)
    assert est.peak_memory_bytes == MEMORY_BASE_BYTES + 1000 * MEMORY_PER_MESSAGE_BYTES
    if fast_forward:  # 10 packets: fewer than a base RTT and two windows of 8, never skipped
        assert est.simulated == est.work and est.packet_s == est.wall_s
        assert (est.low_s, est.high_s) == pytest.approx(
            (est.wall_s / SPEED_SPREAD, est.wall_s * SPEED_SPREAD)
        )
        assert "fast-forward simulates about 3e+04 of the packet-hops; " in est.line()
    else:
        assert est.simulated is None and "fast-forward" not in est.line()
        assert (est.low_s, est.high_s) == pytest.approx(
            (est.wall_s / SPEED_SPREAD, est.wall_s * SPEED_SPREAD)
        )


def test_fast_forward_skips_packets_the_estimate_counts_as_an_upper_bound(reference_dir, built_backends):
    # 64 MiB ring all-reduce on 8 NPUs: 448 messages of 2 MiB (512 packets) over 2 links,
    # long steady flows that the default config fast-forwards.
    case = dict(
        workload=reference_dir / "workload/micro/ALL_REDUCE_8npus_64MB/ALL_REDUCE",
        system=reference_dir / "system/ring_1d.json",
        network=reference_dir / "network/sw8.yml",
        backend="ns3",
    )
    est = estimate(**case)
    assert (est.budgeted, est.work) == (448 * 512 * 2, 448 * 1024 * 2)
    assert est.simulated is not None  # fast-forward is on by default
    run = simulate(**case)
    stats = run.counters
    skipped = stats["fast_forward_packet_hops"]
    assert skipped > stats["packet_hops"] / 2  # most packets were never simulated ...
    assert est.budgeted == built_backends[-1].budget.total  # ... but every one is counted
    assert_packets_as_counted_in_cpp(est, built_backends[-1], last_messages=8, acks=512)
    assert stats["packet_hops"] - skipped < est.work  # the packets simulated: fewer
    # ... and no fewer than the estimate prices: every message's last packet (2 MiB: a whole
    # one, cpp/fastforward.cc MarginPackets) and its ACK on both links, and each of the 8
    # pairs measured once from a standing start
    assert 448 * (1 + 1) * 2 < est.simulated <= stats["packet_hops"] - skipped
