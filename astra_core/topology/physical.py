"""The physical topology model: nodes, directed links, routes.

Nodes are numbered ``0 .. nodes_count-1``; some are switches, the rest are
NPU hosts. NPU rank ``r`` is the ``r``-th host in ascending node id (the rule
for topology files: list NPUs in rank order, switches anywhere). Links are
directed (a cable is two links) with bandwidth in bytes/ns and latency in ns.

Routing: by default shortest paths by total latency, then by hop count; where
several next hops are equally short, the flow's hash picks one at every hop
(equal-cost multipath), so all messages of one flow keep one path. A
topology built from network.yml installs upstream's dimension-order routes
instead (:mod:`astra_core.topology.logical`).
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable, Iterable, Sequence

from astra_core.errors import ConfigError
from astra_core.events import kernel
from astra_core.topology.size import check_topology_size

#: A router maps (src node, dst node, flow hash) to the node path [src, ..., dst].
Router = Callable[[int, int, int], list[int]]


#: ``flow_hash(src, dst, tag)``: deterministic 32-bit hash of a flow (not Python's salted
#: ``hash``): ``(src * 0x9E3779B1) ^ (dst * 0x85EBCA77) ^ (tag * 0xC2B2AE3D)`` to 32 bits,
#: then xor-shift 16, times ``0x7FEB352D`` to 32 bits, xor-shift 15. The kernel's
#: (``astra_core/cpp/kernel.cc``), which also caches routes by it.
flow_hash: Callable[[int, int, int], int] = kernel().flow_hash

#: The flow buckets of a pair of NPUs: a route depends on ``flow_hash(src, dst, tag)``
#: modulo this only.
ROUTE_BUCKETS = 1024


class PhysicalTopology:
    """Nodes, directed links and routing of one network.

    ``links`` are ``(src, dst, bandwidth_bytes_per_ns, latency_ns)``.
    ``source`` names where the topology came from, for error messages.
    Raises :class:`ConfigError` (one line naming ``source``) for a node id out
    of range, a bandwidth that is not positive and finite, a negative or
    infinite latency, a duplicate link, no NPU at all, NPUs that cannot reach
    each other, or more nodes or links than :mod:`astra_core.topology.size` allows.
    """

    def __init__(
        self,
        nodes_count: int,
        switches: Iterable[int],
        links: Sequence[tuple[int, int, float, float]],
        *,
        source: str = "topology",
        router: Router | None = None,
        check_connected: bool = True,
    ):
        self.source = source
        if isinstance(nodes_count, bool) or not isinstance(nodes_count, int) or nodes_count < 1:
            raise ConfigError(f"{source}: node count must be an integer >= 1, got {nodes_count!r}")
        if not hasattr(links, "__len__"):
            links = list(links)
        check_topology_size(source, nodes_count, len(links), npus=0)  # before any per-node list
        self.nodes_count = nodes_count
        self.switches = frozenset(switches)
        for s in self.switches:
            if not 0 <= s < nodes_count:
                raise ConfigError(f"{source}: switch id {s} is not a node (nodes are 0..{nodes_count - 1})")
        self.hosts = [n for n in range(nodes_count) if n not in self.switches]
        if not self.hosts:
            raise ConfigError(f"{source}: no NPU nodes (every node is a switch)")
        check_topology_size(source, nodes_count, len(links), len(self.hosts))
        self.rank_of_node = {node: rank for rank, node in enumerate(self.hosts)}
        self.link_src: list[int] = []
        self.link_dst: list[int] = []
        self.link_bandwidth: list[float] = []
        self.link_latency: list[float] = []
        self.out_links: list[list[int]] = [[] for _ in range(nodes_count)]
        self._link_id: dict[tuple[int, int], int] = {}
        for src, dst, bandwidth, latency in links:
            self._add_link(src, dst, bandwidth, latency)
        self._router = router  # None: shortest paths with ECMP (_shortest_links)
        self._dist: dict[int, dict[int, tuple[float, int]]] = {}
        self._host_dist: dict[int, _HostDistances] = {}
        self._routes: dict[int, tuple[int, ...]] = {}  # (pair, flow bucket) -> links
        self._path_copies: dict[tuple[int, ...], tuple[int, ...]] = {}
        # dst -> node -> (link, next node) of each equally short first hop
        self._next_hops: dict[int, dict[int, tuple[tuple[int, int], ...]]] = {}
        if check_connected:
            self._check_connected()

    # -- construction -------------------------------------------------------------
    def _add_link(self, src: int, dst: int, bandwidth: float, latency: float) -> None:
        n = self.nodes_count
        where = f"{self.source}: link {src} -> {dst}"
        if not (0 <= src < n and 0 <= dst < n):
            bad = src if not 0 <= src < n else dst
            raise ConfigError(f"{where}: unknown node id {bad} (nodes are 0..{n - 1})")
        if src == dst:
            raise ConfigError(f"{where}: a link from a node to itself")
        if not bandwidth > 0:
            raise ConfigError(f"{where}: bandwidth must be > 0, got {bandwidth}")
        if not latency >= 0:
            raise ConfigError(f"{where}: latency must be >= 0, got {latency}")
        if bandwidth == math.inf or latency == math.inf:
            raise ConfigError(f"{where}: bandwidth and latency must be finite, got {bandwidth} and {latency}")
        if (src, dst) in self._link_id:
            raise ConfigError(f"{where}: defined twice")
        index = len(self.link_src)
        self._link_id[(src, dst)] = index
        self.link_src.append(src)
        self.link_dst.append(dst)
        self.link_bandwidth.append(float(bandwidth))
        self.link_latency.append(float(latency))
        self.out_links[src].append(index)

    def _check_connected(self) -> None:
        """Every NPU must reach every other NPU (links are directed)."""
        start = self.hosts[0]
        for reverse in (False, True):
            seen = {start}
            stack = [start]
            adjacency = (
                self._reverse_adjacency()
                if reverse
                else [[self.link_dst[i] for i in out] for out in self.out_links]
            )
            while stack:
                node = stack.pop()
                for nxt in adjacency[node]:
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            missing = [self.rank_of_node[h] for h in self.hosts if h not in seen]
            if missing:
                direction = "reach" if reverse else "be reached from"
                raise ConfigError(
                    f"{self.source}: disconnected: NPU rank(s) "
                    f"{', '.join(map(str, missing[:8]))} cannot {direction} rank 0"
                )

    def _reverse_adjacency(self) -> list[list[int]]:
        adjacency: list[list[int]] = [[] for _ in range(self.nodes_count)]
        for src, dst in zip(self.link_src, self.link_dst):
            adjacency[dst].append(src)
        return adjacency

    # -- queries ----------------------------------------------------------------------
    @property
    def npus_count(self) -> int:
        return len(self.hosts)

    @property
    def links_count(self) -> int:
        return len(self.link_src)

    def link(self, src: int, dst: int) -> int:
        """Index of the directed link src -> dst. Raises KeyError."""
        return self._link_id[(src, dst)]

    def route(self, src_rank: int, dst_rank: int, tag: int = 0) -> tuple[int, ...]:
        """Link indices a message from NPU ``src_rank`` to ``dst_rank`` crosses, in order."""
        h = flow_hash(src_rank, dst_rank, tag) & (ROUTE_BUCKETS - 1)
        key = (src_rank * len(self.hosts) + dst_rank) * ROUTE_BUCKETS + h
        path = self._routes.get(key)
        if path is None:
            path = self._routes[key] = self.bucket_route(src_rank, dst_rank, h)
        return path

    def bucket_route(self, src_rank: int, dst_rank: int, bucket: int) -> tuple[int, ...]:
        """The links of the path of flow bucket ``bucket`` (``flow_hash`` modulo
        :data:`ROUTE_BUCKETS`) from NPU ``src_rank`` to ``dst_rank``, computed (not
        cached: the kernel's congestion-aware links keep their own routes)."""
        src, dst = self.hosts[src_rank], self.hosts[dst_rank]
        if self._router is None:
            path = self._shortest_links(src, dst, bucket)
        else:
            nodes = self._router(src, dst, bucket)
            path = tuple(self._link_id[(a, b)] for a, b in zip(nodes, nodes[1:]))
        # Flows of a pair share a few paths: keep one copy of each.
        return self._path_copies.setdefault(path, path)

    # -- default routing: shortest paths with per-hop ECMP ---------------------------------
    def _distances_to(self, dst: int, hosts_forward: bool) -> dict[int, tuple[float, int]]:
        """(latency, hops) of the best path from each node to ``dst`` (Dijkstra).

        Without ``hosts_forward`` only switches relay traffic; with it any
        node does (tori and other switchless fabrics).
        """
        key = dst if not hosts_forward else -1 - dst
        dist = self._dist.get(key)
        if dist is not None:
            return dist
        incoming = self._incoming
        switches = self.switches
        dist = {dst: (0.0, 0)}
        heap = [(0.0, 0, dst)]
        while heap:
            lat, hops, node = heapq.heappop(heap)
            if dist[node] < (lat, hops):
                continue
            if node != dst and not hosts_forward and node not in switches:
                continue  # a host is a path's end, not a relay
            for link in incoming[node]:
                prev = self.link_src[link]
                cand = (lat + self.link_latency[link], hops + 1)
                if cand < dist.get(prev, (float("inf"), 0)):
                    dist[prev] = cand
                    heapq.heappush(heap, (cand[0], cand[1], prev))
        self._dist[key] = dist
        return dist

    @functools.cached_property
    def _incoming(self) -> list[list[int]]:
        """Per node, the links that end at it."""
        incoming: list[list[int]] = [[] for _ in range(self.nodes_count)]
        for index, dst in enumerate(self.link_dst):
            incoming[dst].append(index)
        return incoming

    def _host_distances(self, dst: int) -> _HostDistances:
        """Distances to host ``dst`` through switches, from the switches it hangs on."""
        dist = self._host_dist.get(dst)
        if dist is None:
            incoming = self._incoming
            attachments = []
            for link in incoming[dst]:
                prev = self.link_src[link]
                if prev in self.switches:
                    attachments.append((self._distances_to(prev, False), self.link_latency[link]))
            dist = self._host_dist[dst] = _HostDistances(dst, attachments, self)
        return dist

    def _shortest_links(self, src: int, dst: int, flow: int) -> tuple[int, ...]:
        """Links of the shortest path from node ``src`` to node ``dst`` for flow bucket
        ``flow``: where several next hops are equally short, the flow's hash with the
        hop's node picks one, so each hop's choice is independent."""
        hosts_forward = False
        dist: dict[int, tuple[float, int]] | _HostDistances
        if dst in self.switches:
            dist = self._distances_to(dst, False)
        else:  # as Dijkstra to dst would find, without running it once per host
            dist = self._host_distances(dst)
        if dist.get(src) is None:
            hosts_forward = True
            dist = self._distances_to(dst, True)
        hops = self._next_hops.setdefault(-1 - dst if hosts_forward else dst, {})
        path = []
        node = src
        while node != dst:
            choices = hops.get(node)
            if choices is None:
                choices = hops[node] = self._equal_next_hops(node, dst, dist, hosts_forward)
            link, node = choices[0] if len(choices) == 1 else choices[flow_hash(flow, node, 0) % len(choices)]
            path.append(link)
        return tuple(path)

    def _equal_next_hops(self, node: int, dst: int, dist, hosts_forward: bool) -> tuple[tuple[int, int], ...]:
        """(link, next node) of every first hop of a shortest path from ``node`` to ``dst``."""
        best = dist[node]
        found = []
        for link in self.out_links[node]:
            nxt = self.link_dst[link]
            d = dist.get(nxt)
            if d is None or (not hosts_forward and nxt != dst and nxt not in self.switches):
                continue
            if (d[0] + self.link_latency[link], d[1] + 1) == best:
                found.append((link, nxt))
        return tuple(found)


class _HostDistances:
    """(latency, hops) from each node to host ``dst`` relaying through switches only, as
    Dijkstra to ``dst`` gives: through a switch it hangs on (that switch's distances
    plus its link to ``dst``), or over a direct link (from another host, which may
    only start a path). Computed per node on demand (``get``), so a host costs a
    look-up per switch it hangs on instead of a Dijkstra over the whole fabric."""

    __slots__ = ("dst", "attachments", "topology", "_cache")

    def __init__(self, dst: int, attachments: list[tuple[dict, float]], topology: PhysicalTopology):
        self.dst = dst
        self.attachments = attachments
        self.topology = topology
        self._cache: dict[int, tuple[float, int] | None] = {dst: (0.0, 0)}

    def get(self, node: int) -> tuple[float, int] | None:
        if node in self._cache:
            return self._cache[node]
        best = None
        for dist, latency in self.attachments:
            d = dist.get(node)
            if d is not None:
                cand = (d[0] + latency, d[1] + 1)
                if best is None or cand < best:
                    best = cand
        topology = self.topology
        link = topology._link_id.get((node, self.dst))
        if link is not None and node not in topology.switches:
            cand = (topology.link_latency[link], 1)
            if best is None or cand < best:
                best = cand
        self._cache[node] = best
        return best

    def __getitem__(self, node: int) -> tuple[float, int]:
        value = self.get(node)
        if value is None:
            raise KeyError(node)
        return value
