"""One message on an idle path: the packet-level time against its closed form."""

from __future__ import annotations

import math

import pytest

from astra_ns3.tests.fabrics import GBPS_100, LINK_NS, make_ns3, star

MIB = 1 << 20
# Per data packet on the wire: Ethernet header 14 + FCS 4 + preamble/SFD 8 +
# inter-frame gap 12, and RoCEv2's IPv4 20 + UDP 8 + BTH 12 + ICRC 4 = 82 bytes.
OVERHEAD = 82
PAYLOAD = 4096


def ideal_ns(size: int, hops: int, bandwidth: float = GBPS_100, latency: float = LINK_NS) -> float:
    """bytes / bandwidth + latency, headers counted: the wire bytes of every
    packet serialized once, plus one propagation delay per hop."""
    packets = max(1, math.ceil(size / PAYLOAD))
    return (size + packets * OVERHEAD) / bandwidth + hops * latency


@pytest.mark.parametrize("cc", ["dcqcn", "none"])
def test_64mib_flow_on_an_idle_path_takes_bytes_over_bandwidth_plus_latency(cc):
    backend = make_ns3(star(2), {"cc": cc})
    arrived = []
    backend.send(0, 1, 64 * MIB, lambda _: arrived.append(backend.now()))
    backend.run()
    ideal = ideal_ns(64 * MIB, hops=2)
    assert abs(arrived[0] - ideal) / ideal < 0.02
    # Exactly: store and forward adds one frame's serialization at the switch.
    frame_ns = (PAYLOAD + OVERHEAD) / GBPS_100
    assert arrived[0] == pytest.approx(ideal + frame_ns, abs=1.0)
    stats = backend.stats
    assert stats["drops"] == 0 and stats["ecn_marks"] == 0 and stats["pfc_pauses"] == 0


def test_bytes_on_the_wire_are_conserved():
    # 3 MiB + 7 bytes: 769 data packets (the last one 7 bytes) cross two links;
    # the receiver answers each with an 86-byte ACK (AETH adds 4 bytes). run()
    # returns when the message is delivered, so the ACKs still on their way
    # back then are not simulated: the receiver's link carries all of them,
    # the switch's link to the sender at most as many.
    size = 3 * MIB + 7
    physical = star(2)
    backend = make_ns3(physical, {"cc": "none"})
    backend.send(0, 1, size, lambda _: None)
    backend.run()
    packets = math.ceil(size / PAYLOAD)
    tx = backend.results.ports().set_index(["node", "peer"]).tx_bytes
    switch = 2
    assert tx[(0, switch)] == tx[(switch, 1)] == size + packets * OVERHEAD
    assert tx[(1, switch)] == packets * (OVERHEAD + 4)
    assert tx[(switch, 0)] <= tx[(1, switch)]
    assert backend.stats["drops"] == 0


def test_a_later_message_counts_from_when_it_is_sent_and_zero_bytes_take_one_frame():
    backend = make_ns3(star(2))
    times = {}
    backend.schedule(
        12_345, lambda _: backend.send(0, 1, 0, lambda _: times.setdefault("empty", backend.now()))
    )
    backend.run()
    # A header-only packet: 82 bytes serialized on each of two links, two propagation delays.
    assert times["empty"] - 12_345 == pytest.approx(2 * (OVERHEAD / GBPS_100 + LINK_NS), abs=0.01)
