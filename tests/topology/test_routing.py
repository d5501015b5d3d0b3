"""The default routing (the kernel's ShortestPaths) against shortest paths worked out here.

The rule (astra_core.topology.physical, ``kernel_route``): a path is shortest by
total latency, then by hop count, relaying through switches only, or through any
node where no such path exists; at every hop with several equally short next
hops, the one at ``flow_hash(bucket, node, 0) % count`` in link-id order. The
reference below is Floyd-Warshall over (latency, hops) pairs, written
independently of the kernel's Dijkstra, on random fabrics of hosts and switches
(some hosts reachable only through other hosts).
"""

from __future__ import annotations

import random

import pytest

from astra_core.topology.physical import ROUTE_BUCKETS, PhysicalTopology, flow_hash

INF = (float("inf"), 0)


def random_fabric(seed: int) -> PhysicalTopology:
    rng = random.Random(seed)
    hosts, switches = rng.randint(2, 9), rng.randint(0, 5)
    nodes = hosts + switches
    pairs = {(h - 1, h) for h in range(1, hosts)}  # a host chain: always connected
    pairs |= {tuple(rng.sample(range(nodes), 2)) for _ in range(rng.randint(0, 3 * nodes))}
    cables = {(a, b) for a, b in pairs} | {(b, a) for a, b in pairs}
    links = [(a, b, 1.0 + rng.random(), rng.choice([0.5, 1.0, 2.0, 3.0])) for a, b in sorted(cables)]
    return PhysicalTopology(nodes, range(hosts, nodes), links)


def distances(t: PhysicalTopology, relay: set[int]) -> list[list[tuple[float, int]]]:
    """(latency, hops) between every two nodes, relaying only through ``relay``."""
    n = t.nodes_count
    d = [[(0.0, 0) if a == b else INF for b in range(n)] for a in range(n)]
    for link, (a, b) in enumerate(zip(t.link_src, t.link_dst)):
        d[a][b] = min(d[a][b], (t.link_latency[link], 1))
    for k in relay:
        for a in range(n):
            for b in range(n):
                via = (d[a][k][0] + d[k][b][0], d[a][k][1] + d[k][b][1])
                if via < d[a][b]:
                    d[a][b] = via
    return d


@pytest.mark.parametrize("seed", range(60))
def test_every_route_is_the_shortest_path_with_the_hashed_equal_cost_hop(seed):
    t = random_fabric(seed)
    through_switches = distances(t, set(t.switches))
    through_any = distances(t, set(range(t.nodes_count)))
    for src in range(t.npus_count):
        for dst in range(t.npus_count):
            if src == dst:
                continue
            a, b = t.hosts[src], t.hosts[dst]
            table, relay = through_switches, t.switches
            if table[a][b] == INF:
                table, relay = through_any, range(t.nodes_count)
            for bucket in (0, 5, ROUTE_BUCKETS - 1):
                links = t.bucket_route(src, dst, bucket)
                node, latency = a, 0.0
                for link in links:
                    # the hop is the hashed one among the equally short next hops
                    best = table[node][b]
                    equal = [
                        out
                        for out in t.out_links[node]
                        if (t.link_dst[out] == b or t.link_dst[out] in relay)
                        and table[t.link_dst[out]][b] != INF
                        and (
                            table[t.link_dst[out]][b][0] + t.link_latency[out],
                            table[t.link_dst[out]][b][1] + 1,
                        )
                        == best
                    ]
                    pick = 0 if len(equal) == 1 else flow_hash(bucket, node, 0) % len(equal)
                    assert link == equal[pick], (seed, src, dst, bucket)
                    latency += t.link_latency[link]
                    node = t.link_dst[link]
                assert node == b
                assert (latency, len(links)) == pytest.approx(table[a][b])


def test_a_route_for_a_rank_outside_the_fabric_is_a_clear_error():
    t = random_fabric(1)
    with pytest.raises(IndexError, match="no NPU rank"):
        t.bucket_route(0, t.npus_count, 0)
