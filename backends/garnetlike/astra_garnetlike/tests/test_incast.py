"""Incast: seven NPUs send 1 MiB each to NPU 0 through one switch (Switch 8, 50 GB/s, 500 ns).

The switch's link down to NPU 0 carries everything: 7 MiB at bw = 53.687 B/ns
takes 7 * 19531.25 = 136718.75 ns at least. With credit-based flow control the
switch can hold only what its input buffers hold, C = 7 senders x VCs x depth
x flit bytes (which includes what is on the wires: a slot is reserved when a
flit is sent). So by time t at most bw * t + C bytes can have left the
senders, and the last sender cannot have sent its last flit before
(7 MiB - C) / bw: senders stall, back-pressure reaches them. A lone sender
pushes its 4096 flits out in P + 4095 flit times.

The analytical models cannot show this: the congestion-unaware one delivers
every message after 2 * 500 ns + 1 MiB / bw as if alone; the congestion-aware
one queues messages at the switch but a sender's link is busy for exactly
1 MiB / bw from t = 0 and then free -- senders never wait.
"""

from __future__ import annotations

import pytest

from astra_core.backend import Topology
from astra_core.config.network import NetworkConfig
from astra_core.plugins import backend_registry

MIB = 1 << 20
BW = 50 * 2**30 / 1e9  # B/ns
SW8 = NetworkConfig.from_dict(
    {"topology": ["Switch"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
)
REGISTRY = backend_registry()


def _incast(name: str, senders=range(1, 8)):
    net = REGISTRY.create(name, Topology(SW8))
    arrivals = {}
    for src in senders:
        net.send(src, 0, MIB, lambda s: arrivals.__setitem__(s, net.now()), src, tag=src)
    return net, arrivals


def test_garnetlike_senders_stall_behind_the_shared_downlink():
    # A lone sender for reference: its last flit leaves after P + 4095 flit times.
    lone, _ = _incast("garnetlike", [1])
    messages = []
    lone.packet_hook = lambda pkt: messages.append(pkt.msg)
    lone.run()
    s = lone.link_ports[0].ser_ps
    lone_ns = (1000 + 4095 * s) / 1000
    assert messages[-1].injected_ps / 1000 == lone_ns

    net, arrivals = _incast("garnetlike")
    messages = {}
    net.packet_hook = lambda pkt: messages.setdefault(pkt.msg.src, pkt.msg)
    net.run()
    assert sorted(arrivals) == list(range(1, 8))
    # The downlink is the bottleneck and is kept busy: the last message lands just after
    # 7 MiB / bw (the rounding of flit times to whole ps and pipeline latency aside).
    drain_ns = 7 * MIB / BW
    assert drain_ns <= max(arrivals.values()) <= 1.01 * drain_ns + 1000
    # Back-pressure: the switch buffers C bytes at most, so senders are held back.
    cfg = net.config
    buffered = 7 * cfg.vcs_per_vnet * net.link_ports[0].down.depth * cfg.flit_bytes
    assert buffered < 2 * MIB  # far less than what is sent: 7 MiB
    injected_ns = sorted(m.injected_ps / 1000 for m in messages.values())
    assert injected_ns[-1] >= (7 * MIB - buffered) / BW
    # ... and round-robin switch allocation shares the downlink fairly, so every sender is
    # held back, the first to finish too: each gets about 1/7 of the link for most of the run.
    assert injected_ns[0] > 5 * lone_ns


def test_the_analytical_models_cannot_show_back_pressure():
    unaware, arrivals = _incast("analytical")
    unaware.run()
    assert set(arrivals.values()) == {int(2 * 500 + MIB / BW)}  # every one as if alone

    aware, arrivals = _incast("analytical-congestion")
    aware.run()
    # Queued at the switch: deliveries one downlink-time apart ...
    times = sorted(arrivals.values())
    assert times[-1] - times[0] == 6 * int(MIB / BW)
    # ... but every sender's uplink carried its whole message from t = 0 in int(B / bw):
    # nothing ever made a sender wait.
    uplinks = [aware.topology.route(src, 0)[0] for src in range(1, 8)]
    assert [aware.link_busy_ns[link] for link in uplinks] == [int(MIB / BW)] * 7
    assert all(aware.max_queue[link] == 0 for link in uplinks)


FC8 = NetworkConfig.from_dict(
    {"topology": ["FullyConnected"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
)


@pytest.mark.parametrize("ni_ports", ["per_link", "single"])
def test_fan_out_uses_every_link_only_with_an_ni_port_per_link(ni_ports):
    # NPU 0 sends 1 MiB to each of its 7 FullyConnected peers at once. With an NI port per
    # link the 7 messages cross 7 links in parallel, each as if alone (test_zero_load.py:
    # 2 P + s + L + c + 4095 s). With Garnet's single NI port, one flit leaves per flit time
    # s in all: 7 x 4096 flits in a row, the last one arriving L + s + P + c after it left.
    net = REGISTRY.create("garnetlike", Topology(FC8), {"ni_ports": ni_ports})
    arrivals = {}
    for dst in range(1, 8):
        net.send(0, dst, MIB, lambda d: arrivals.__setitem__(d, net.clock.now_ps), dst)
    net.run()
    s, L = net.link_ports[0].ser_ps, 500_000
    alone = 2 * 1000 + s + L + 1000 + 4095 * s
    if ni_ports == "per_link":
        assert set(arrivals.values()) == {alone}
    else:
        assert max(arrivals.values()) == 1000 + (7 * 4096 - 1) * s + s + L + 1000 + 1000
