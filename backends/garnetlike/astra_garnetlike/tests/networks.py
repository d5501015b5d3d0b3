"""Helpers for the garnetlike tests: small networks and single messages timed in ps."""

from __future__ import annotations

from astra_garnetlike.noc import build_network, noc_config


def noc_network(topology: str, dims, *, packet_flits: int = 4, link_latency: int = 1, **config):
    """A NoC of one-flit-per-cycle links (1 GHz: a cycle is 1000 ps) with Garnet defaults."""
    return build_network(topology, dims, noc_config(None, packet_flits, **config), link_latency)


def lone_times_ps(net, sends, gap_ps: int = 10**7):
    """Send each (src, dst, bytes) alone on an idle network; their times in flight (ps).

    Each message is sent ``gap_ps`` after the previous one arrived, so every
    credit and VC is back and each one sees a network at zero load.
    """
    times = []
    sends = list(sends)

    def go(index):
        src, dst, size = sends[index]
        started = net.clock.now_ps
        net.send(src, dst, size, arrived, (index, started))

    def arrived(arg):
        index, started = arg
        times.append(net.clock.now_ps - started)
        if index + 1 < len(sends):
            net.clock.call_in(gap_ps, go, index + 1)

    go(0)
    net.run()
    assert len(times) == len(sends)
    return times
