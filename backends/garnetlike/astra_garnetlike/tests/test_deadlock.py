"""Deadlock: the dateline scheme prevents it on wrap-around links; without it, it is reported.

Dimension-order routing on a ring has a cyclic channel dependency: packets
that each hold a VC on one link and wait for a VC on the next can close the
ring. With 2 VC classes and the dateline (class 1 from the wrap-around link on)
no cycle exists (Dally & Seitz 1987). The tests load tori so heavily that the
same traffic deadlocks with ``deadlock_avoidance = "none"``: that shows the
load is enough, and that the detector names the routers and VCs of the cycle
instead of hanging.
"""

from __future__ import annotations

import pytest

from astra_core.errors import ConfigError, SimulationDeadlock
from astra_garnetlike.noc import run_noc
from astra_garnetlike.tests.networks import noc_network


def _all_ahead(net, k: int, shift: int, messages: int, size: int) -> list:
    """Every node sends ``messages`` messages to the node ``shift`` ahead in dimension 0."""
    delivered: list = []
    for src in range(net.physical.npus_count):
        x = src % k
        for _ in range(messages):
            net.send(src, src - x + (x + shift) % k, size, delivered.append, src)
    return delivered


@pytest.mark.parametrize("dims", [[8], [4, 4]])
def test_heavy_same_direction_traffic_completes_with_the_dateline(dims):
    # Every node streams 20 packets of 8 flits the same way round (2 or 3 hops ahead).
    shift = 3 if dims[0] == 8 else 2
    net = noc_network("torus", dims, packet_flits=8, vcs_per_vnet=2, buffer_depth_flits=2)
    delivered = _all_ahead(net, dims[0], shift, 20, 128)
    net.run()
    assert len(delivered) == 20 * net.physical.npus_count
    assert net.check_credits() == []


@pytest.mark.parametrize("dims, vcs", [([8], 1), ([8], 2), ([4, 4], 2)])
def test_the_same_traffic_without_the_dateline_deadlocks_and_names_the_cycle(dims, vcs):
    k = dims[0]
    shift = 3 if k == 8 else 2
    net = noc_network(
        "torus", dims, packet_flits=8, vcs_per_vnet=vcs, buffer_depth_flits=2, deadlock_avoidance="none"
    )
    _all_ahead(net, k, shift, 20, 128)
    with pytest.raises(SimulationDeadlock) as info:
        net.run()
    text = str(info.value)
    assert text.startswith("garnetlike: deadlock at ")
    assert "the event queue ran dry" in text and "a cycle of VCs each waiting for the next" in text
    assert "\n" not in text
    # The cycle runs around the first ring (row 0) in the positive direction: router x
    # holds a packet arriving from x-1 and waits for a VC on its link to x+1.
    for x in range(k):
        assert f"NPU {x} (in from NPU {(x - 1) % k}, VC " in text
        assert f"on the link to NPU {(x + 1) % k}" in text
    assert set(info.value.waiting) >= set(range(k))  # router node ids with stuck VCs


def test_open_loop_overload_on_a_torus_runs_with_the_dateline_and_is_caught_without():
    kw = dict(cycles=1500, warmup=200, drain_factor=0.5, packet_flits=8)
    ok = run_noc("torus", (6, 6), "tornado", 0.9, vcs_per_vnet=2, **kw)
    assert ok.accepted > 0.05 and ok.saturated  # overloaded, still moving
    # Without it the watchdog (injection never stops, so the queue never runs dry) sees
    # no flit move for 1000 cycles and reports the cycle.
    with pytest.raises(
        SimulationDeadlock,
        match=r"no flit moved for 1000 ns = 1000 cycles.*"
        r"a cycle of VCs",
    ):
        run_noc("torus", (8,), "tornado", 0.9, vcs_per_vnet=2, deadlock_avoidance="none", **kw)


def test_uniform_random_overload_on_a_4x4_torus_does_not_deadlock():
    r = run_noc(
        "torus", (4, 4), "uniform_random", 0.9, cycles=2000, warmup=200, drain_factor=1, packet_flits=8
    )
    assert 0.3 < r.accepted < 0.9


def test_dateline_needs_two_vcs_per_vnet():
    with pytest.raises(
        ConfigError,
        match=r"vcs_per_vnet: the dateline scheme on the wrap-around "
        r"links of torus 4x4 needs >= 2 VCs per virtual network, got 1",
    ):
        noc_network("torus", [4, 4], vcs_per_vnet=1)
    noc_network("mesh", [4, 4], vcs_per_vnet=1)  # no wrap-around links: one VC is fine
