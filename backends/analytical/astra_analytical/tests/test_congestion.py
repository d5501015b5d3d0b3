"""analytical-congestion's model on its own: store and forward, a link serving one
message at a time first come first served, upstream's truncations, and the per-link
statistics, against times worked out here by hand."""

from __future__ import annotations

import pytest

from astra_analytical.congestion import CongestionAwareNetwork
from astra_core.topology.generators import star

# star(3): hosts 0-2 on switch 3, 100 Gbps (12.5 bytes/ns) and 1,000 ns per link; host
# h's cable is links 2h (up) and 2h + 1 (down).
UP = {h: 2 * h for h in range(3)}
DOWN = {h: 2 * h + 1 for h in range(3)}


def run(sends):
    """Deliver ``sends`` ((src, dst, bytes), all at t = 0); each one's arrival time."""
    net = CongestionAwareNetwork(star(3))
    arrived = {}
    for i, (src, dst, size) in enumerate(sends):
        net.send(src, dst, size, lambda i: arrived.__setitem__(i, net.now()), i)
    net.run()
    return net, [arrived[i] for i in range(len(sends))]


def test_two_messages_share_the_first_link_first_come_first_served():
    # A (0 -> 1) and B (0 -> 2), 125,000 bytes each: 10,000 ns on a link. A crosses link
    # 0 by 11,000 (latency + bytes / bandwidth) and link 3 by 22,000; B waits for link 0
    # until A has left it (10,000), is at the switch at 21,000 and at host 2 at 32,000.
    net, times = run([(0, 1, 125_000), (0, 2, 125_000)])
    assert times == [22_000, 32_000]
    assert net.link_bytes[UP[0]] == 250_000 and net.link_busy_ns[UP[0]] == 20_000
    assert net.link_bytes[DOWN[1]] == net.link_bytes[DOWN[2]] == 125_000
    assert net.max_queue[UP[0]] == 1 and net.max_queue[DOWN[1]] == 0
    assert net.messages == 2


def test_each_hop_truncates_to_whole_ns_as_upstream_does():
    # 101 bytes take 8.08 ns: the link is busy int(8.08) = 8 ns, and the message is at
    # its far end int(1000 + 8.08) = 1,008 ns later; two hops, 2,016 ns.
    net, times = run([(1, 2, 101)])
    assert times == [2016]
    assert net.link_busy_ns[UP[1]] == 8
    assert net.lone_message_ns(1, 2, 101) == 2016


def test_every_byte_is_counted_once_per_link_it_crosses():
    sends = [(src, dst, 1000 + 17 * src + dst) for src in range(3) for dst in range(3) if src != dst]
    net, _ = run(sends)
    assert sum(net.link_bytes) == 2 * sum(size for *_, size in sends)  # two links each


def test_bad_link_changes_name_the_link():
    net = CongestionAwareNetwork(star(3))
    with pytest.raises(IndexError, match=r"^set_links: no link 9 \(links are 0\.\.5\)$"):
        net.change_links({9: 1.0})
    with pytest.raises(ValueError, match=r"^set_links: link 2: bandwidth must be >= 0 and finite$"):
        net.change_links({2: -1.0})
