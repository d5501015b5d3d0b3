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
    ``router`` replaces the default routing; ``router_uses_flow`` False says it
    ignores its flow argument (one path per pair), so routes are kept per pair.
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
        router_uses_flow: bool = True,
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
        self._router = router  # None: the kernel's shortest paths with ECMP (kernel_route)
        #: The flow buckets a pair's routes are kept by: ROUTE_BUCKETS, or 1 for a router
        #: that ignores its flow argument (one path per pair, as network.yml's).
        self.route_buckets = ROUTE_BUCKETS if router is None or router_uses_flow else 1
        self._routes: dict[int, tuple[int, ...]] = {}  # (pair, flow bucket) -> links
        self._path_copies: dict[tuple[int, ...], tuple[int, ...]] = {}
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

    @property
    def default_routing(self) -> bool:
        """Whether routes are the default shortest paths (no router given)."""
        return self._router is None

    @functools.cached_property
    def in_links(self) -> list[list[int]]:
        """Per node, the ids of the links into it."""
        into: list[list[int]] = [[] for _ in range(self.nodes_count)]
        for link, dst in enumerate(self.link_dst):
            into[dst].append(link)
        return into

    def link(self, src: int, dst: int) -> int:
        """Index of the directed link src -> dst. Raises KeyError."""
        return self._link_id[(src, dst)]

    def route(self, src_rank: int, dst_rank: int, tag: int = 0) -> tuple[int, ...]:
        """Link indices a message from NPU ``src_rank`` to ``dst_rank`` crosses, in order."""
        buckets = self.route_buckets
        h = flow_hash(src_rank, dst_rank, tag) % buckets
        key = (src_rank * len(self.hosts) + dst_rank) * buckets + h
        path = self._routes.get(key)
        if path is None:
            path = self._routes[key] = self.bucket_route(src_rank, dst_rank, h)
        return path

    def bucket_route(self, src_rank: int, dst_rank: int, bucket: int) -> tuple[int, ...]:
        """The links of the path of flow bucket ``bucket`` (``flow_hash`` modulo
        :data:`ROUTE_BUCKETS`) from NPU ``src_rank`` to ``dst_rank``, computed (not
        cached: the kernel's models keep their own routes)."""
        if self._router is None:
            path = self.kernel_route(src_rank, dst_rank, bucket)
        else:
            src, dst = self.hosts[src_rank], self.hosts[dst_rank]
            nodes = self._router(src, dst, bucket)
            path = tuple(self._link_id[(a, b)] for a, b in zip(nodes, nodes[1:]))
        # Flows of a pair share a few paths: keep one copy of each.
        return self._path_copies.setdefault(path, path)

    @functools.cached_property
    def kernel_route(self) -> Callable[[int, int, int], tuple[int, ...]]:
        """What the kernel's network models ask for a route, ``(src_rank, dst_rank,
        bucket) -> link ids``: the kernel's own ``ShortestPaths`` (no Python call) for the
        default routing, else :meth:`bucket_route` (a router given at construction).

        The default routing: shortest paths by total latency, then by hop count,
        relaying through switches only (through any node where no such path exists:
        tori and other switchless fabrics); where several next hops are equally
        short, ``flow_hash(bucket, node, 0)`` picks one at every hop, so each hop's
        choice is independent (``astra_core/cpp/kernel/routing.h``)."""
        if self._router is not None:
            return self.bucket_route
        return kernel().ShortestPaths(
            self.nodes_count, sorted(self.switches), self.link_src, self.link_dst, self.link_latency
        )
