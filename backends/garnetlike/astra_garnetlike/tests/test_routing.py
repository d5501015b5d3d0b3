"""Routes and VC classes: grids recognised, dimension order, up*/down*, no dependency cycles.

Deadlock freedom is checked the classical way (Dally & Seitz 1987): build the
channel dependency graph -- a channel is (link, VC class), and a route that
uses channel a and then channel b adds the edge a -> b -- from the routes of
every pair of NPUs; deterministic routing is deadlock-free iff it is acyclic.
"""

from __future__ import annotations

import itertools
import random

import pytest

from astra_core.config.network import NetworkConfig
from astra_core.errors import ConfigError
from astra_core.topology.generators import fat_tree, leaf_spine, mesh, torus
from astra_core.topology.logical import from_network
from astra_core.topology.physical import PhysicalTopology
from astra_garnetlike.routing import ANY, HIGH, LOW, Routing, recognize_grid


def dependency_cycle(routing: Routing, npus: int) -> list | None:
    """A cycle of (link, class) channels in the dependency graph of all routes, or None."""
    edges: dict[tuple, set] = {}
    for a, b in itertools.permutations(range(npus), 2):
        links = routing.links(a, b)
        channels = list(zip(links, routing.classes(links)))
        for x, y in zip(channels, channels[1:]):
            edges.setdefault(x, set()).add(y)
    state: dict = {}
    for start in edges:
        if start in state:
            continue
        stack = [(start, iter(edges.get(start, ())))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child) :]
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(edges.get(child, ()))))
                path.append(child)
    return None


@pytest.mark.parametrize(
    "build, dims, wraps",
    [
        (torus, [4, 4], [True, True]),
        (torus, [4, 3, 2], [True, True, False]),
        (mesh, [8, 8], [False, False]),
        (mesh, [2, 3], [False, False]),
        (torus, [8], [True]),
        (torus, [2, 6], [False, True]),
    ],
)
def test_mesh_and_torus_generators_are_recognised(build, dims, wraps):
    grid = recognize_grid(build(dims))
    assert grid is not None
    assert grid.sizes == dims and grid.wrap == wraps


def test_other_topologies_are_not_grids():
    assert recognize_grid(fat_tree(4)) is None
    # a 2x3 torus's links renumbered: the same graph, not the generators' layout
    t = torus([3, 3])
    perm = [0, 1, 2, 3, 4, 5, 6, 8, 7]
    shuffled = PhysicalTopology(9, [], [(perm[s], perm[d], 1.0, 1.0) for s, d in zip(t.link_src, t.link_dst)])
    assert recognize_grid(shuffled) is None


def test_dimension_order_on_a_recognised_torus():
    t = torus([4, 4])
    r = Routing(t)
    assert r.mode == "dimension_order"
    # (1, 0) -> (3, 3): x first, 2 hops either way so the positive way (1 -> 2 -> 3), then y
    # the short way, backwards over the wrap-around link (y 0 -> 3)
    nodes = [t.hosts[1]] + [t.link_dst[link] for link in r.links(1, 15)]
    assert nodes == [1, 2, 3, 15]
    # classes: x hops stay in class 0; the y hop crosses the dateline: class 1
    assert r.classes(r.links(1, 15)) == (LOW, LOW, HIGH)
    # (3, 0) -> (1, 0): positive way 3 -> 0 (the wrap-around link: class 1) -> 1 (still 1)
    assert [t.link_dst[link] for link in r.links(3, 1)] == [0, 1]
    assert r.classes(r.links(3, 1)) == (HIGH, HIGH)


@pytest.mark.parametrize(
    "dims, rings_close", [([4, 4], True), ([5, 3], True), ([6], True), ([3, 3, 3], False)]
)
def test_dimension_order_with_datelines_has_no_dependency_cycle(dims, rings_close):
    topology = torus(dims)
    routing = Routing(topology)
    assert routing.uses_classes
    assert dependency_cycle(routing, topology.npus_count) is None
    # Without datelines a ring of >= 4 closes a cycle (routes of 2+ hops one way round);
    # on a ring of 3 every shortest route is one hop, so nothing depends on anything.
    without = Routing(topology, dateline=False)
    assert (dependency_cycle(without, topology.npus_count) is not None) == rings_close


def test_network_yml_rings_get_datelines_and_switch_dims_do_not():
    net = NetworkConfig.from_dict(
        {
            "topology": ["Ring", "Switch"],
            "npus_count": [4, 4],
            "bandwidth": [100.0, 50.0],
            "latency": [200.0, 500.0],
        }
    )
    routing = Routing(from_network(net), network=net)
    assert routing.mode == "dimension_order" and routing.uses_classes
    assert routing.classes(routing.links(0, 3)) == (HIGH,)  # ring 0 -> 3 is the wrap link
    assert routing.classes(routing.links(1, 3)) == (LOW, LOW)  # 1 -> 2 -> 3
    assert routing.classes(routing.links(0, 4)) == (ANY, ANY)  # up to the switch and down
    assert dependency_cycle(routing, 16) is None


def _irregular(seed: int) -> PhysicalTopology:
    """8 switches with random extra cables (cycles everywhere), 2 NPUs on each."""
    rng = random.Random(seed)
    cables = {(s, s + 1) for s in range(7)} | {tuple(sorted(rng.sample(range(8), 2))) for _ in range(8)}
    links = []
    for a, b in cables:
        links += [(16 + a, 16 + b, 10.0, 5.0), (16 + b, 16 + a, 10.0, 5.0)]
    for npu in range(16):
        links += [(npu, 16 + npu // 2, 10.0, 5.0), (16 + npu // 2, npu, 10.0, 5.0)]
    return PhysicalTopology(24, range(16, 24), links, source="irregular")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_up_down_routes_are_legal_and_acyclic_on_irregular_fabrics(seed):
    t = _irregular(seed)
    routing = Routing(t, "up_down")
    levels = routing._order()
    for a, b in itertools.permutations(range(16), 2):
        links = routing.links(a, b)
        assert t.link_src[links[0]] == a and t.link_dst[links[-1]] == b
        ups = [(levels[t.link_dst[k]], t.link_dst[k]) < (levels[t.link_src[k]], t.link_src[k]) for k in links]
        assert ups == sorted(ups, reverse=True), (a, b)  # all up links come before any down link
    assert dependency_cycle(routing, 16) is None


def test_up_down_root_is_the_best_connected_switch_or_the_configured_node():
    t = leaf_spine(8, 2, 2)  # hosts 0-7, leaves 8-9, spines 10-11
    assert Routing(t, "up_down")._root == 8  # a leaf: 4 hosts + 2 spines = 6 links
    assert Routing(t, "up_down", up_down_root=10)._root == 10
    with pytest.raises(ConfigError, match="up_down_root: node 99 is not in"):
        Routing(t, "up_down", up_down_root=99)


def test_fat_tree_table_routes_are_up_then_down():
    t = fat_tree(4)
    routing = Routing(t)
    assert routing.mode == "table" and not routing.uses_classes
    assert dependency_cycle(routing, 16) is None


def test_dimension_order_needs_a_grid():
    with pytest.raises(ConfigError, match="'dimension_order' needs a ring, mesh or torus"):
        Routing(fat_tree(4), "dimension_order")
