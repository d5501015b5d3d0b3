"""Poisson flow arrivals at a given load, as congestion-control evaluations draw them.

Every host starts flows as its own Poisson process; the rate makes the
offered load a fraction ``load`` of the host's link capacity:
``mean gap = mean flow size x 8 / (link bit/s x load)``. Each flow goes to a
destination drawn uniformly among the other hosts, and its size from the
flow-size CDF. Gaps are whole ns (truncated, at least 1 ns). This is the
method of the HPCC artifact's ``traffic_gen.py`` (and of the DCTCP and HPCC
evaluations); flows start from time 0 here instead of the artifact's 2 s.
"""

from __future__ import annotations

import heapq
import math
import random

from astra_core.errors import ConfigError
from astra_core.flows.cdf import FlowSizeCdf
from astra_core.flows.flowfile import FlowSpec
from astra_core.topology.physical import PhysicalTopology

#: Most flows one call may draw (a guard against a load or duration typo).
MAX_FLOWS = 10_000_000


def host_link_gbps(topology: PhysicalTopology) -> float:
    """The injection rate of the topology's hosts (Gbps): the fastest link out of
    host 0 (every host of a generated fabric has the same)."""
    host = topology.hosts[0]
    rates = [
        topology.link_bandwidth[link] * 8
        for link in range(topology.links_count)
        if topology.link_src[link] == host
    ]
    return max(rates)


def duration_ns(duration_ms: float) -> int:
    """``--duration-ms`` as whole ns; raises ConfigError unless it is a finite number > 0."""
    if isinstance(duration_ms, bool) or not (math.isfinite(duration_ms) and duration_ms > 0):
        raise ConfigError(f"--duration-ms: must be a finite number > 0, got {duration_ms:g}")
    return round(duration_ms * 1e6)


def poisson_flows(
    cdf: FlowSizeCdf, hosts: int, link_gbps: float, load: float, duration_ns: int, seed: int = 1
) -> list[FlowSpec]:
    """Flows that start in ``[0, duration_ns)``, in start order (ties by host).

    ``hosts`` NPUs each offer ``load`` (0 < load <= 1) x ``link_gbps`` of
    traffic. Raises ConfigError for fewer than two hosts, a load outside
    (0, 1], a duration that is not positive, more than :data:`MAX_FLOWS`
    flows expected, or no flow drawn at all (a window too short for the load:
    a flow file with no flows is of no use to any run)."""
    if hosts < 2:
        raise ConfigError(f"flows need at least two hosts, the topology has {hosts}")
    if not 0 < load <= 1:
        raise ConfigError(f"--load: must be in (0, 1], got {load:g}")
    if not duration_ns > 0:
        raise ConfigError(f"--duration-ms: must be > 0, got {duration_ns / 1e6:g}")
    mean_gap_ns = cdf.mean_bytes * 8 / (link_gbps * load)  # bits / (bit/ns)
    expected = hosts * duration_ns / mean_gap_ns
    if expected > MAX_FLOWS:
        raise ConfigError(
            f"about {expected:.3g} flows expected, more than {MAX_FLOWS:,}: "
            "shorten --duration-ms or lower --load"
        )
    rng = random.Random(seed)

    def gap() -> int:
        return max(1, int(-math.log(1.0 - rng.random()) * mean_gap_ns))

    due = [(gap(), host) for host in range(hosts)]
    heapq.heapify(due)
    flows = []
    while due:
        start, src = due[0]
        if start >= duration_ns:
            heapq.heappop(due)
            continue
        dst = rng.randrange(hosts - 1)
        dst += dst >= src  # uniform over the other hosts
        flows.append(FlowSpec(src, dst, cdf.draw(rng), start))
        heapq.heapreplace(due, (start + gap(), src))
    if not flows:
        raise ConfigError(
            f"--duration-ms: no flow starts in {duration_ns / 1e6:g} ms (about {expected:.3g} "
            "expected at this load): lengthen --duration-ms or raise --load"
        )
    return flows
