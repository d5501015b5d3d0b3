"""The ideal FCT of astra_core.flows.run is what ns-3 gives a lone flow at line rate.

A two-switch line with every order of slow and fast links: the store-and-forward
pipeline of a lone flow (n - 1 full frames and a shorter last one) must be the
packet model's time to the picosecond, whichever link is the bottleneck and
whether the links after it are as slow.
"""

from __future__ import annotations

import pytest

from astra_core.flows.run import ideal_fct_ns
from astra_core.topology.physical import PhysicalTopology
from astra_ns3.tests.fabrics import make_ns3

G100, G50, G25 = 12.5, 6.25, 3.125  # bytes/ns


def line(rates: list[float], latencies=(1000.0, 500.0, 2000.0)) -> PhysicalTopology:
    """NPU 0 - switch 2 - switch 3 - NPU 1 with the given link rates (both directions)."""
    links = []
    for (a, b), rate, latency in zip([(0, 2), (2, 3), (3, 1)], rates, latencies):
        links += [(a, b, rate, latency), (b, a, rate, latency)]
    return PhysicalTopology(4, [2, 3], links, source="line")


@pytest.mark.parametrize(
    "rates", [[G100, G25, G100], [G100, G50, G25], [G25, G100, G100], [G100, G100, G25], [G50, G100, G50]]
)
@pytest.mark.parametrize("size", [1, 4097, 123_457])
def test_a_lone_flow_takes_the_ideal_fct(rates, size):
    physical = line(rates)
    backend = make_ns3(physical, {"cc": "none"})
    done = []
    backend.send(0, 1, size, lambda _: done.append(backend.now()), None, tag=1)
    backend.run()
    assert done[0] == pytest.approx(ideal_fct_ns(physical, physical.route(0, 1, 1), size), abs=1e-3)
