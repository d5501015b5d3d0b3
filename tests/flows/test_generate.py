"""Poisson flow arrivals: offered load, destinations, gaps, determinism, guards."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from astra_core.errors import ConfigError
from astra_core.flows.cdf import load_cdf, parse_cdf
from astra_core.flows.generate import MAX_FLOWS, host_link_gbps, poisson_flows
from astra_core.topology.generators import fat_tree
from astra_core.topology.physical import PhysicalTopology
from tests.flows.conftest import moments

HOSTS, GBPS, LOAD = 16, 100.0, 0.3
DURATION_NS = 200_000_000  # 200 ms: about 10^5 hadoop flows


@pytest.fixture(scope="module")
def drawn():
    cdf = load_cdf("hadoop")
    return cdf, poisson_flows(cdf, HOSTS, GBPS, LOAD, DURATION_NS, seed=11)


def mean_gap_ns(cdf) -> float:
    # bits per flow / (bit/ns x load)
    return cdf.mean_bytes * 8 / (GBPS * LOAD)


def test_flow_count_is_poisson_with_the_rate_the_load_sets(drawn):
    cdf, flows = drawn
    expected = HOSTS * DURATION_NS / mean_gap_ns(cdf)  # 16 x 200 ms / 32.1 us = 99,650
    assert abs(len(flows) - expected) <= 4 * math.sqrt(expected)


def test_offered_load_is_total_bytes_over_capacity_and_duration(drawn):
    cdf, flows = drawn
    rate = HOSTS * DURATION_NS / mean_gap_ns(cdf)  # expected flows
    m1, m2 = moments(cdf)
    # compound Poisson: mean rate x E[X], variance rate x E[X^2]
    capacity_bytes = HOSTS * GBPS / 8 * DURATION_NS
    offered = sum(f.size_bytes for f in flows) / capacity_bytes
    sigma = math.sqrt(rate * m2) / capacity_bytes
    assert rate * m1 / capacity_bytes == pytest.approx(LOAD, rel=1e-12)
    assert abs(offered - LOAD) <= 4 * sigma, (offered, sigma)
    assert 4 * sigma < 0.1 * LOAD  # tight enough to catch a wrong rate (sigma is 1.8 %)


def test_flows_start_in_the_window_in_order_and_never_go_to_themselves(drawn):
    cdf, flows = drawn
    starts = [f.start_ns for f in flows]
    assert starts == sorted(starts)
    assert starts[0] > 0 and starts[-1] < DURATION_NS
    assert all(f.src != f.dst for f in flows)
    assert all(0 <= f.src < HOSTS and 0 <= f.dst < HOSTS for f in flows)
    assert all(1 <= f.size_bytes <= cdf.sizes[-1] for f in flows)
    assert all((f.group, f.dport) == (3, 100) for f in flows)


def chi_square(counts: list[int]) -> float:
    mean = sum(counts) / len(counts)
    return sum((c - mean) ** 2 / mean for c in counts)


def test_destinations_are_uniform_over_the_other_hosts(drawn):
    _, flows = drawn
    pairs = Counter((f.src, f.dst) for f in flows)
    statistic = 0.0
    for src in range(HOSTS):
        statistic += chi_square([pairs[(src, dst)] for dst in range(HOSTS) if dst != src])
    df = HOSTS * (HOSTS - 2)  # 15 cells per source, given the source's count
    # chi-square with df degrees of freedom: mean df, standard deviation sqrt(2 df)
    assert abs(statistic - df) <= 5 * math.sqrt(2 * df), statistic


def test_every_host_starts_flows_at_the_same_rate(drawn):
    _, flows = drawn
    per_host = Counter(f.src for f in flows)
    df = HOSTS - 1
    assert abs(chi_square([per_host[h] for h in range(HOSTS)]) - df) <= 5 * math.sqrt(2 * df)


def test_gaps_per_host_are_exponential_with_the_mean_the_load_sets(drawn):
    cdf, flows = drawn
    mean = mean_gap_ns(cdf)  # 120,420.75 x 8 / (100 x 0.3) = 32,112.2 ns
    assert mean == pytest.approx(32_112.2, abs=0.01)
    gaps, last = [], [0] * HOSTS
    for f in flows:
        gaps.append(f.start_ns - last[f.src])
        last[f.src] = f.start_ns
    n = len(gaps)
    assert min(gaps) >= 1
    # exponential: standard deviation = mean; whole ns truncate by 1/2 ns on average
    assert abs(sum(gaps) / n - (mean - 0.5)) <= 4 * mean / math.sqrt(n)
    # P(gap > mean) = e^-1 and P(gap > 3 mean) = e^-3
    for k in (1, 3):
        p = math.exp(-k)
        above = sum(1 for g in gaps if g > k * mean) / n
        assert abs(above - p) <= 4 * math.sqrt(p * (1 - p) / n), (k, above)


def test_the_mean_gap_follows_link_rate_and_load():
    # one host pair, a 1000-byte flow size: gap = 8000 bits / (10 Gbps x 0.5) = 1600 ns
    cdf = parse_cdf("1000 0\n1000.5 100\n", "const")
    flows = poisson_flows(cdf, 2, 10.0, 0.5, 40_000_000, seed=3)
    expected = 2 * 40_000_000 / (cdf.mean_bytes * 8 / (10.0 * 0.5))
    assert abs(len(flows) - expected) <= 4 * math.sqrt(expected)
    assert {(f.src, f.dst) for f in flows} == {(0, 1), (1, 0)}
    assert {f.size_bytes for f in flows} == {1000}


def test_same_seed_same_flows_other_seed_other_flows():
    cdf = load_cdf("websearch")
    a = poisson_flows(cdf, 8, 100.0, 0.5, 5_000_000, seed=4)
    assert a == poisson_flows(cdf, 8, 100.0, 0.5, 5_000_000, seed=4)
    assert a != poisson_flows(cdf, 8, 100.0, 0.5, 5_000_000, seed=5)
    assert len(a) > 50


def test_load_one_is_allowed():
    assert len(poisson_flows(load_cdf("hadoop"), 2, 100.0, 1.0, 1_000_000)) > 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"hosts": 1}, "flows need at least two hosts, the topology has 1"),
        ({"hosts": 0}, "flows need at least two hosts, the topology has 0"),
        ({"load": 0.0}, "--load: must be in (0, 1], got 0"),
        ({"load": -0.2}, "--load: must be in (0, 1], got -0.2"),
        ({"load": 1.01}, "--load: must be in (0, 1], got 1.01"),
        ({"load": math.nan}, "--load: must be in (0, 1], got nan"),
        ({"duration_ns": 0}, "--duration-ms: must be > 0, got 0"),
        ({"duration_ns": -2_000_000}, "--duration-ms: must be > 0, got -2"),
    ],
)
def test_bad_arguments_are_config_errors(kwargs, message):
    args = {
        "cdf": load_cdf("hadoop"),
        "hosts": 4,
        "link_gbps": 100.0,
        "load": 0.5,
        "duration_ns": 1_000_000,
        **kwargs,
    }
    with pytest.raises(ConfigError) as exc:
        poisson_flows(**args)
    assert str(exc.value) == message


def test_too_many_flows_are_refused_before_drawing_any():
    cdf = load_cdf("hadoop")
    # 2 hosts x 100 s / (120,420.75 x 8 / 100 ns) = 2.08e7 flows > 10^7
    duration = 100 * 10**9
    expected = 2 * duration / (cdf.mean_bytes * 8 / 100.0)
    assert expected > MAX_FLOWS == 10_000_000
    with pytest.raises(ConfigError) as exc:
        poisson_flows(cdf, 2, 100.0, 1.0, duration)
    assert str(exc.value) == (
        f"about {expected:.3g} flows expected, more than 10,000,000: shorten --duration-ms or lower --load"
    )


def test_host_link_rate_of_a_fat_tree():
    assert host_link_gbps(fat_tree(4, 100.0, 1000.0)) == 100.0
    assert host_link_gbps(fat_tree(2, 25.0, 10.0)) == 25.0


def test_host_link_rate_is_the_fastest_link_of_the_first_host():
    # node 0 is a switch, so NPU 0 is node 1; it has a 10 and a 40 Gbps link (1.25, 5 B/ns)
    links = []
    for host in (1, 2):
        links += [
            (host, 0, 1.25, 100.0),
            (0, host, 1.25, 100.0),
            (host, 3, 5.0, 100.0),
            (3, host, 5.0, 100.0),
        ]
    topology = PhysicalTopology(4, [0, 3], links)
    assert host_link_gbps(topology) == 40.0
