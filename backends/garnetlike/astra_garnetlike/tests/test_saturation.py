"""8x8 mesh, uniform random traffic, dimension-order routing: the latency-load curve.

Bound: under uniform random traffic a packet crosses the mesh's bisection with
probability 1/2, so N = k^2 nodes injecting r flits/cycle each push N * r / 2
flits/cycle across it, N * r / 4 each way over k one-flit-per-cycle channels:
N * r / 4 <= k, i.e. r <= 4 / k = 0.5 flits/node/cycle for k = 8 (Dally &
Towles 3.3.1). Real routers saturate below the bound (head-of-line blocking,
allocation conflicts): the model must saturate between 0.3 and 0.5.

Zero-load latency (test_zero_load.py): (H + 1) * P + H * LL + F cycles with
P = LL = 1 and F = 4, averaged over uniform random pairs. The mean Manhattan
distance between distinct nodes of an 8 x 8 mesh is 2 * (k^2 - 1) / (3k) *
k^2 / (k^2 - 1) = 2 * 8 / 3 = 5.333 hops, so 2 * 5.333 + 1 + 4 = 15.67 cycles.
"""

from __future__ import annotations

import pytest

from astra_garnetlike.noc import run_noc

ZERO_LOAD = 2 * 16 / 3 + 1 + 4


def _point(rate: float, **kw):
    return run_noc("mesh", (8, 8), "uniform_random", rate, cycles=1000, warmup=300, seed=1, **kw)


def test_mean_hops_of_uniform_random_on_8x8():
    pairs = [(a, b) for a in range(64) for b in range(64) if a != b]
    mean = sum(abs(a % 8 - b % 8) + abs(a // 8 - b // 8) for a, b in pairs) / len(pairs)
    assert mean == pytest.approx(16 / 3)


def test_saturation_throughput_is_between_0_3_and_0_5():
    # Offered well past saturation: what the network accepts is its saturation throughput.
    beyond = _point(0.6, drain_factor=0)
    assert beyond.offered == pytest.approx(0.6, abs=0.02)
    assert 0.3 <= beyond.accepted <= 0.5
    assert beyond.accepted < beyond.offered - 0.1
    assert beyond.saturated  # measured packets were still queued at their sources


def test_latency_starts_at_zero_load_and_rises_sharply_near_saturation():
    low, mid, near = _point(0.05), _point(0.30), _point(0.38)
    for point in (low, mid, near):  # below saturation everything offered gets through
        assert not point.saturated
        assert point.accepted == pytest.approx(point.offered, rel=0.05)
    assert ZERO_LOAD <= low.avg_packet_latency <= 1.15 * ZERO_LOAD
    # Latency per unit of load: gentle at first, several times steeper near saturation.
    slope_low = (mid.avg_packet_latency - low.avg_packet_latency) / (mid.offered - low.offered)
    slope_near = (near.avg_packet_latency - mid.avg_packet_latency) / (near.offered - mid.offered)
    assert slope_near > 4 * slope_low
    assert near.avg_packet_latency > 2.5 * ZERO_LOAD
