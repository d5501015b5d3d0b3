"""Generated fabrics: sizes, link bandwidths and route lengths against closed forms."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from astra_core.errors import ConfigError
from astra_core.topology.generators import fat_tree, gpu_cluster, leaf_spine, torus
from tests.topology.conftest import route_nodes

# -- fat-tree (Al-Fares et al. 2008): k^3/4 hosts, 5k^2/4 switches, 3k^3/4 cables ----------------


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fat_tree_sizes(k):
    t = fat_tree(k)
    assert t.npus_count == k**3 // 4
    assert len(t.switches) == 5 * k * k // 4
    assert t.links_count == 2 * (3 * k**3 // 4)
    assert t.hosts == list(range(k**3 // 4))
    assert set(t.link_bandwidth) == {12.5} and set(t.link_latency) == {1000.0}


def test_fat_tree_k4_route_lengths():
    t = fat_tree(4)
    assert (t.npus_count, len(t.switches), t.links_count) == (16, 20, 96)
    for a, b in itertools.permutations(range(16), 2):
        hops = len(route_nodes(t, a, b)) - 1
        # 2 hosts per edge switch, 4 hosts per pod
        expected = 2 if a // 2 == b // 2 else 4 if a // 4 == b // 4 else 6
        assert hops == expected, (a, b)
        assert all(n in t.switches for n in route_nodes(t, a, b)[1:-1])


def _shortest_paths_between(t, a, b) -> int:
    """Count the shortest node paths from host a to host b relaying only through switches."""
    src, dst = t.hosts[a], t.hosts[b]
    count = {src: 1}
    depth = {src: 0}
    frontier = [src]
    while frontier and dst not in depth:
        nxt_frontier = []
        for node in frontier:
            if node != src and node not in t.switches:
                continue
            for link in t.out_links[node]:
                nxt = t.link_dst[link]
                if nxt not in depth:
                    depth[nxt] = depth[node] + 1
                    count[nxt] = 0
                    nxt_frontier.append(nxt)
                if depth[nxt] == depth[node] + 1:
                    count[nxt] += count[node]
        frontier = nxt_frontier
    return count[dst]


@pytest.mark.parametrize("k", [4, 8])
def test_fat_tree_has_k2_over_4_core_paths_between_pods(k):
    t = fat_tree(k)
    assert _shortest_paths_between(t, 0, t.npus_count - 1) == (k // 2) ** 2


def test_fat_tree_ecmp_keeps_flows_on_shortest_paths_and_spreads_them():
    t = fat_tree(4)
    paths = Counter(tuple(route_nodes(t, 0, 15, tag)) for tag in range(512))
    assert all(len(p) == 7 for p in paths)
    assert len(paths) >= 2
    assert route_nodes(t, 0, 15, 7) == route_nodes(t, 0, 15, 7)  # one flow, one path


def test_fat_tree_ecmp_uses_every_core_path():
    t = fat_tree(4)
    cores = {route_nodes(t, 0, 15, tag)[3] for tag in range(1024)}
    assert len(cores) == 4


@pytest.mark.parametrize("k", [0, 3, 5, -2, 4.0])
def test_fat_tree_needs_even_k(k):
    with pytest.raises(ConfigError, match="k must be an even integer >= 2"):
        fat_tree(k)


# -- leaf-spine --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hosts, leaves, spines, over, host_gbps",
    [
        (8, 2, 2, 1.0, 100.0),
        (16, 4, 3, 2.0, 100.0),
        (12, 3, 2, 3.0, 25.0),
        (4, 4, 1, 0.5, 400.0),
    ],
)
def test_leaf_spine_link_bandwidths(hosts, leaves, spines, over, host_gbps):
    t = leaf_spine(hosts, leaves, spines, oversubscription=over, host_gbps=host_gbps)
    per_leaf = hosts // leaves
    assert (t.npus_count, len(t.switches)) == (hosts, leaves + spines)
    assert t.links_count == 2 * (hosts + leaves * spines)
    up_gbps = per_leaf * host_gbps / (over * spines)
    for leaf in range(hosts, hosts + leaves):
        down = [t.link_bandwidth[t.link(leaf, h)] for h in range(hosts) if h // per_leaf == leaf - hosts]
        up = [t.link_bandwidth[t.link(leaf, s)] for s in range(hosts + leaves, hosts + leaves + spines)]
        assert down == [host_gbps / 8] * per_leaf
        assert up == [pytest.approx(up_gbps / 8, rel=1e-12)] * spines
        assert sum(down) == pytest.approx(over * sum(up), rel=1e-12)
    # host h hangs off leaf h // per_leaf; hosts on different leaves are 4 links apart
    for a, b in itertools.permutations(range(hosts), 2):
        nodes = route_nodes(t, a, b)
        assert nodes[1] == hosts + a // per_leaf
        assert len(nodes) - 1 == (2 if a // per_leaf == b // per_leaf else 4)


@pytest.mark.parametrize(
    "args, message",
    [
        ((10, 3, 2), "10 hosts do not split evenly over 3 leaves"),
        ((8, 2, 0), "spines must be an integer >= 1, got 0"),
        ((8, 2, 2, 0.0), "oversubscription must be > 0"),
    ],
)
def test_leaf_spine_errors(args, message):
    with pytest.raises(ConfigError, match=message):
        leaf_spine(*args)


# -- torus ---------------------------------------------------------------------------------------


def _wrapped(a: int, b: int, n: int) -> int:
    d = abs(a - b)
    return min(d, n - d)


def test_torus_4x4_routes_are_wrapped_manhattan_distances():
    t = torus([4, 4])
    assert (t.npus_count, len(t.switches), t.links_count) == (16, 0, 64)
    for a, b in itertools.permutations(range(16), 2):
        hops = len(route_nodes(t, a, b)) - 1
        assert hops == _wrapped(a % 4, b % 4, 4) + _wrapped(a // 4, b // 4, 4), (a, b)


def test_torus_3d_neighbours_and_ids():
    dims = [4, 3, 2]
    t = torus(dims)

    def node(x, y, z):
        return x + dims[0] * (y + dims[1] * z)

    # x and y rings wrap (4 and 3 cables each), the z pair has one cable
    assert t.links_count == 2 * (4 * 6 + 3 * 8 + 1 * 12)
    for x, y, z in itertools.product(range(4), range(3), range(2)):
        n = node(x, y, z)
        neighbours = {t.link_dst[i] for i in t.out_links[n]}
        assert neighbours == {
            node((x + 1) % 4, y, z),
            node((x - 1) % 4, y, z),
            node(x, (y + 1) % 3, z),
            node(x, (y - 1) % 3, z),
            node(x, y, 1 - z),
        }
    assert len(route_nodes(t, node(0, 0, 0), node(2, 1, 1))) - 1 == 2 + 1 + 1


@pytest.mark.parametrize("dims, cables", [([2, 2], 4), ([2, 3], 3 + 6), ([1, 4], 4), ([3, 3], 18)])
def test_torus_small_dimensions(dims, cables):
    assert torus(dims).links_count == 2 * cables


def test_torus_errors():
    with pytest.raises(ConfigError, match=r"dims\[1\] must be an integer >= 1, got 0"):
        torus([4, 0])


# -- GPU cluster -----------------------------------------------------------------------------------


def test_gpu_cluster_layout_and_rails():
    nodes, g = 4, 8
    t = gpu_cluster(nodes, g)
    gpus = nodes * g
    nvswitch0, leaf0, spine0 = gpus, gpus + nodes, gpus + nodes + g
    assert (t.npus_count, len(t.switches), t.nodes_count) == (gpus, nodes + g + g, gpus + nodes + 2 * g)
    assert t.links_count == 2 * (gpus + gpus + g * g)
    for rank in range(gpus):
        n, gpu = divmod(rank, g)
        neighbours = {t.link_dst[i] for i in t.out_links[rank]}
        assert neighbours == {nvswitch0 + n, leaf0 + gpu}  # NVSwitch of its server, leaf of its rail
        assert t.link_bandwidth[t.link(rank, nvswitch0 + n)] == 3600 / 8  # 450 GB/s per direction
        assert t.link_bandwidth[t.link(rank, leaf0 + gpu)] == 400 / 8
        assert t.link_latency[t.link(rank, nvswitch0 + n)] == 936.25
    # non-blocking by default: 4 GPUs per leaf x 400 Gbps over 8 spines
    assert t.link_bandwidth[t.link(leaf0, spine0)] == 4 * 400 / 8 / 8


def test_gpu_cluster_routes_intra_node_on_nvswitch_inter_node_through_nics():
    nodes, g = 4, 4
    t = gpu_cluster(nodes, g)
    gpus = nodes * g
    nvswitch0, leaf0 = gpus, gpus + nodes
    for a, b in itertools.permutations(range(gpus), 2):
        for tag in (0, 1, 2):
            path = route_nodes(t, a, b, tag)
            if a // g == b // g:
                assert path == [a, nvswitch0 + a // g, b]
            else:
                assert not set(path[1:-1]) & set(range(gpus)), path  # no other GPU relays
                assert path[1] == leaf0 + a % g and path[-2] == leaf0 + b % g
                assert len(path) - 1 == (2 if a % g == b % g else 4)


@pytest.mark.parametrize(
    "nodes, g, leaves, leaf_of",
    [
        (2, 4, 2, lambda n, gpu: gpu % 2),  # fewer leaves: rails share a leaf
        (4, 2, 4, lambda n, gpu: gpu + 2 * (n // 2)),  # 2 leaves per rail: servers 0-1 and 2-3
        (3, 2, 1, lambda n, gpu: 0),
    ],
)
def test_gpu_cluster_leaf_choices(nodes, g, leaves, leaf_of):
    t = gpu_cluster(nodes, g, leaves=leaves, spines=2)
    leaf0 = nodes * g + nodes
    for n, gpu in itertools.product(range(nodes), range(g)):
        assert t.link(n * g + gpu, leaf0 + leaf_of(n, gpu)) >= 0
    # intra-node traffic stays on the NVSwitch even when two GPUs share a leaf
    assert route_nodes(t, 0, 1) == [0, nodes * g, 1]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(leaves=3), "leaves \\(3\\) must divide gpus_per_node \\(4\\) or be a multiple of it"),
        (dict(leaves=12), "12 leaves make 3 leaves per rail; nodes \\(2\\) must be a multiple of it"),
        (dict(nic_gbps=0), "nic_gbps must be > 0"),
    ],
)
def test_gpu_cluster_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        gpu_cluster(2, 4, **kwargs)
