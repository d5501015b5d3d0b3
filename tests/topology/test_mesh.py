"""The mesh generator: a torus without wrap-around cables (astra_core/topology/generators.py)."""

from __future__ import annotations

import itertools

import pytest

from astra_core.errors import ConfigError
from astra_core.topology.generators import mesh
from tests.topology.conftest import route_nodes


def test_mesh_4x3_links_ids_and_manhattan_routes():
    dims = [4, 3]
    t = mesh(dims, bandwidth_gbps=8.0, latency_ns=2.0)
    # 3 cables per row x 3 rows + 2 per column x 4 columns = 17 cables, 34 directed links
    assert (t.npus_count, len(t.switches), t.links_count) == (12, 0, 34)
    assert set(t.link_bandwidth) == {1.0} and set(t.link_latency) == {2.0}
    for x, y in itertools.product(range(4), range(3)):
        n = x + 4 * y
        neighbours = {t.link_dst[i] for i in t.out_links[n]}
        expected = {
            x2 + 4 * y2
            for x2, y2 in ((x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1))
            if 0 <= x2 < 4 and 0 <= y2 < 3
        }
        assert neighbours == expected
    for a, b in itertools.permutations(range(12), 2):
        # no wrap-around: the hop count is the Manhattan distance
        assert len(route_nodes(t, a, b)) - 1 == abs(a % 4 - b % 4) + abs(a // 4 - b // 4)


@pytest.mark.parametrize("dims, cables", [([8, 8], 2 * 8 * 7), ([2, 2, 2], 12), ([5], 4), ([1, 3], 2)])
def test_mesh_cable_counts(dims, cables):
    # a line of n nodes has n - 1 cables; there are prod(dims) / n lines per dimension
    assert mesh(dims).links_count == 2 * cables


def test_mesh_errors():
    with pytest.raises(ConfigError, match=r"mesh 4x0: dims\[1\] must be an integer >= 1, got 0"):
        mesh([4, 0])
    with pytest.raises(ConfigError, match="bandwidth_gbps must be > 0"):
        mesh([2, 2], bandwidth_gbps=0)
