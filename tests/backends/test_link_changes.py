"""Links that change during a run (``change_links``: astra_core.backend.LinkChanges) on
the flow and congestion-aware models, against closed forms derived here.

The fabric: hosts A (node 0) and B (node 1); switches S1 (2), S2 (3), S3 (4); every
cable 100 Gbps (12.5 bytes/ns) and 1 us each way. A -> B takes A-S1-S2-B (3 us); with
S1-S2 down it takes A-S1-S3-S2-B (4 us).
"""

from __future__ import annotations

import pytest

from astra_analytical.congestion import CongestionAwareNetwork
from astra_core.topology.faults import routing_without
from astra_core.topology.physical import PhysicalTopology
from astra_flow.config import FlowConfig
from astra_flow.network import FlowNetwork

C = 12.5  # bytes/ns
L = 1000.0  # ns
PS = 2e-3  # ns: flow event times are rounded to whole ps
CABLES = [(0, 2), (2, 3), (3, 1), (2, 4), (4, 3)]
FABRIC = PhysicalTopology(5, [2, 3, 4], [(a, b, C, L) for x, y in CABLES for a, b in ((x, y), (y, x))])
S1_S2 = [FABRIC.link(2, 3), FABRIC.link(3, 2)]


def changes_at(network, steps: list[tuple[float, dict[int, float]]]) -> None:
    for at, change in steps:
        network.schedule(at, network.change_links, change)


def deliver(network, size: int, steps) -> float:
    """One message A -> B sent at 0, with ``steps`` [(at_ns, {link: bytes_per_ns})];
    when it is in."""
    arrived: list[float] = []
    changes_at(network, steps)
    network.send(0, 1, size, lambda _: arrived.append(network.now()))
    network.run()
    assert len(arrived) == 1
    return arrived[0]


def link_bytes(network, src: int, dst: int) -> float:
    return network.link_bytes[FABRIC.link(src, dst)]


def test_routing_without_a_link_keeps_the_link_ids_and_goes_round_it():
    route = routing_without(FABRIC, S1_S2)
    assert FABRIC.route(0, 1) == (FABRIC.link(0, 2), FABRIC.link(2, 3), FABRIC.link(3, 1))
    assert route(0, 1, 0) == tuple(FABRIC.link(a, b) for a, b in ((0, 2), (2, 4), (4, 3), (3, 1)))


# -- flow: 100 full packets of 4096 + 82 bytes; one flow alone drains at C -------------

Q = 4096 + 82  # wire bytes of a full packet
SIZE = 100 * 4096
W = 100 * Q


def flow() -> FlowNetwork:
    return FlowNetwork(FABRIC, FlowConfig())


def test_a_flow_moves_off_a_cable_that_goes_down_and_loses_no_byte():
    # The rate stays C on the longer path: the drain still ends at W / C; the tail is the
    # 4-link path's, latencies plus one packet on each link after the first.
    net = flow()
    at = 10_000.0
    done = deliver(net, SIZE, [(at, dict.fromkeys(S1_S2, 0.0))])
    assert done == pytest.approx(W / C + 4 * L + 3 * Q / C, abs=PS)
    assert link_bytes(net, 0, 2) == W and link_bytes(net, 3, 1) == W
    assert link_bytes(net, 2, 3) == pytest.approx(C * at)
    assert link_bytes(net, 2, 4) == link_bytes(net, 4, 3) == pytest.approx(W - C * at)


def test_a_flow_moves_back_when_the_cable_is_whole_again():
    net = flow()
    down, up = 10_000.0, 20_000.0
    done = deliver(net, SIZE, [(down, dict.fromkeys(S1_S2, 0.0)), (up, dict.fromkeys(S1_S2, C))])
    assert done == pytest.approx(W / C + 3 * L + 2 * Q / C, abs=PS)
    assert link_bytes(net, 2, 3) == pytest.approx(C * down + W - C * up)
    assert link_bytes(net, 2, 4) == pytest.approx(C * (up - down))


def test_a_degraded_cable_slows_the_rest_of_the_flow():
    # From `at` the flow drains at C / 2; its tail over links at t, 2t, t per byte
    # (t = 1 / C) is the latencies plus one packet on the first and on the last link.
    net = flow()
    at = 10_000.0
    done = deliver(net, SIZE, [(at, dict.fromkeys(S1_S2, C / 2))])
    assert done == pytest.approx(at + (W - C * at) / (C / 2) + 3 * L + 2 * Q / C, abs=PS)
    assert net.link_busy_ns[S1_S2[0]] == pytest.approx(W / (C / 2))  # counted when it ended


def test_a_change_leaves_flows_on_other_links_alone():
    # B -> A crosses S2 -> S1, not S1 -> S2: halving S1 -> S2 only keeps its times exact.
    def b_to_a(steps):
        net = flow()
        arrived: list[float] = []
        changes_at(net, steps)
        net.send(0, 1, SIZE, lambda _: None)
        net.send(1, 0, SIZE, lambda _: arrived.append(net.now()))
        net.run()
        return arrived[0]

    assert b_to_a([(10_000.0, {S1_S2[0]: C / 2})]) == b_to_a([])


# -- analytical-congestion: a message of S bytes takes int(L + S / C) ns per link -------

S = 1_000_000
HOP = int(L + S / C)  # 81,000 ns


def congestion() -> CongestionAwareNetwork:
    return CongestionAwareNetwork(FABRIC)


def test_a_message_whose_route_ahead_goes_down_is_sent_again_from_its_source():
    # S1-S2 fails while the message crosses A -> S1: when that hop ends it starts again
    # from A over the 4-link path.
    net = congestion()
    assert deliver(net, S, [(40_000.0, dict.fromkeys(S1_S2, 0.0))]) == HOP + 4 * HOP
    assert link_bytes(net, 0, 2) == 2 * S and link_bytes(net, 2, 3) == 0 and link_bytes(net, 2, 4) == S


def test_a_message_on_the_link_that_goes_down_is_lost_there_and_sent_again():
    net = congestion()
    assert deliver(net, S, [(100_000.0, dict.fromkeys(S1_S2, 0.0))]) == 2 * HOP + 4 * HOP
    assert link_bytes(net, 2, 3) == S and link_bytes(net, 2, 4) == S


def test_a_waiting_message_is_sent_again_at_once():
    # Two messages A -> B at 0: the second waits for A -> S1. S1-S2 fails at 40 us: the
    # second goes back to A's queue on its new route (behind nothing: the link is
    # still busy with the first until int(S / C)); the first starts again from A when
    # its hop ends, behind the second.
    net = congestion()
    arrived: dict[int, float] = {}
    changes_at(net, [(40_000.0, dict.fromkeys(S1_S2, 0.0))])
    for i in range(2):
        net.send(0, 1, S, lambda j: arrived.__setitem__(j, net.now()), i, tag=i)
    net.run()
    busy = int(S / C)
    second_starts = busy  # A -> S1 frees at int(S / C)
    first_starts = second_starts + busy  # after the second's serialization
    assert arrived == {1: second_starts + 4 * HOP, 0: first_starts + 4 * HOP}


def test_a_degraded_link_serves_its_next_message_slower():
    net = congestion()
    done = deliver(net, S, [(40_000.0, dict.fromkeys(S1_S2, C / 2))])
    assert done == HOP + int(L + S / (C / 2)) + HOP


@pytest.mark.parametrize("make", [flow, congestion])
def test_bad_changes_are_errors_naming_the_link(make):
    net = make()
    with pytest.raises(IndexError, match="no link 99"):
        net.change_links({99: 1.0})
    with pytest.raises(ValueError, match="link 0: bandwidth must be >= 0"):
        net.change_links({0: -1.0})
