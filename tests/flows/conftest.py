"""Shared pieces of the flow-workload tests: small fabrics and closed forms of a CDF."""

from __future__ import annotations

import pytest

from astra_core.flows.cdf import FlowSizeCdf
from astra_core.flows.report import BUCKET_EDGES
from astra_core.topology.generators import star  # noqa: F401 - the suite's fabric (100 Gbps, 1 us links)
from astra_core.topology.physical import PhysicalTopology
from tests.conftest import isolate_plugins

GBPS_100 = 12.5  # bytes/ns
LINK_NS = 1000.0  # the HPCC artifact's "100Gbps 0.001ms"


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Only the installed backends, whatever plugins.toml or the environment say."""
    isolate_plugins(monkeypatch, tmp_path)


def chain(rates: list[float], latencies: list[float]) -> tuple[PhysicalTopology, list[int]]:
    """Host 0 - switch 1 - ... - switch h-1 - host h: ``h`` cables, the forward link
    ``j`` of ``rates[j]`` bytes/ns and ``latencies[j]`` ns (the reverse links the same).
    Returns the topology and the forward route (link ids) from NPU 0 to NPU 1."""
    h = len(rates)
    links = []
    for j, (rate, latency) in enumerate(zip(rates, latencies)):
        links += [(j, j + 1, rate, latency), (j + 1, j, rate, latency)]
    topology = PhysicalTopology(h + 1, range(1, h), links, source="chain")
    return topology, [topology.link(j, j + 1) for j in range(h)]


def cdf_points(text: str) -> list[tuple[float, float]]:
    """(size, percent) of a CDF file, read independently of astra's parser."""
    return [(float(a), float(b)) for a, b in (line.split() for line in text.splitlines() if line.strip())]


def moments(cdf: FlowSizeCdf) -> tuple[float, float]:
    """E[X] and E[X^2] of the piecewise-uniform distribution: on a segment [a, b] of
    probability q, E[X] = q (a + b) / 2 and E[X^2] = q (a^2 + ab + b^2) / 3."""
    s, p = cdf.sizes, cdf.percents
    m1 = m2 = 0.0
    for k in range(1, len(s)):
        a, b, q = s[k - 1], s[k], (p[k] - p[k - 1]) / 100
        m1 += q * (a + b) / 2
        m2 += q * (a * a + a * b + b * b) / 3
    return m1, m2


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between order statistics (Hyndman and Fan's type 7, numpy's
    default): rank p/100 x (n - 1) in the sorted values."""
    xs = sorted(values)
    rank = p / 100 * (len(xs) - 1)
    low = int(rank)
    high = min(low + 1, len(xs) - 1)
    return xs[low] + (rank - low) * (xs[high] - xs[low])


def bucket_of(size: int) -> int:
    """Index of the fixed size bucket of ``size`` (edges belong to the upper bucket)."""
    return sum(size >= edge for edge in BUCKET_EDGES)
