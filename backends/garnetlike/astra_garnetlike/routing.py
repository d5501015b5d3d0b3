"""Routes and deadlock-free VC classes for the garnetlike routers.

Routing modes (config key ``routing``):

``dimension_order``
    Rings, meshes and tori: correct the coordinate of dimension 0 first, then
    1, ...; around a ring the shorter way (the positive way on a tie, as
    upstream ASTRA-sim's Ring). The grid comes from network.yml's dimensions
    (Ring dimensions are rings; FullyConnected and Switch dimensions take their
    direct link or their switch, upstream's routes) or is recognised in a
    switchless physical topology laid out like astra's ``mesh``/``torus``
    generators (node ``x + X * (y + Y * z)``, links to the next node of each
    dimension, wrap-around links where the dimension is a ring).
``table``
    The physical topology's own routing table: upstream's routes for
    network.yml, shortest paths with per-flow ECMP for topology files. Minimal
    routes on fat-trees, leaf-spines and single switches go up then down and
    are deadlock-free; on other graphs they may not be.
``up_down``
    up*/down* routing (Autonet, Schroeder et al., IEEE JSAC 1991): a BFS from
    a root switch orders the nodes by (level, id); a link is *up* when it goes
    to a lower (level, id). A route is a shortest path of zero or more up links
    followed by zero or more down links, so no cycle of channel dependencies
    can form on any topology.
``auto``
    ``dimension_order`` where the topology is a grid (network.yml, or a
    recognised mesh/torus), else ``table``.

Deadlock freedom on rings (``deadlock_avoidance = "dateline"``, Dally &
Seitz 1987; Dally & Towles, *Principles and Practices of Interconnection
Networks*, 14.2): dimension-order routing has no cyclic dependency between
dimensions, but each ring (per direction) has one. Each vnet's VCs are split
into two classes; a packet entering a ring uses class 0, and from the
wrap-around link (between coordinates ``n-1`` and ``0``, the dateline) on it
uses class 1, so neither class closes the cycle. Hops outside rings may use
every VC.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from astra.plugin import ConfigError, NetworkConfig, PhysicalTopology

#: VC classes of a hop: the lower half of a vnet's VCs, the upper half, or all.
LOW, HIGH, ANY = 0, 1, 2


class Grid:
    """A ring/mesh/torus layout: ``sizes`` per dimension, ``wrap[d]`` if dimension d is a ring.

    Node id = sum of coordinate x stride, dimension 0 fastest.
    """

    def __init__(self, sizes: Sequence[int], wrap: Sequence[bool]):
        self.sizes = list(sizes)
        self.wrap = list(wrap)
        self.strides = []
        stride = 1
        for n in self.sizes:
            self.strides.append(stride)
            stride *= n
        self.nodes = stride

    def __repr__(self) -> str:
        kinds = ["ring" if w else "line" for w in self.wrap]
        return f"Grid({'x'.join(map(str, self.sizes))}: {', '.join(kinds)})"

    def links(self) -> set[tuple[int, int]]:
        """Every directed link such a grid has."""
        out = set()
        for d, (n, s) in enumerate(zip(self.sizes, self.strides)):
            for node in range(self.nodes):
                k = (node // s) % n
                if k + 1 < n:
                    out.add((node, node + s))
                    out.add((node + s, node))
                elif self.wrap[d] and n >= 3:
                    out.add((node, node - k * s))
                    out.add((node - k * s, node))
        return out

    def path(self, src: int, dst: int) -> list[int]:
        """Dimension-order node path from ``src`` to ``dst``."""
        path = [src]
        node = src
        for n, s, wrap in zip(self.sizes, self.strides, self.wrap):
            a, b = (node // s) % n, (dst // s) % n
            if a == b:
                continue
            base = node - a * s
            if wrap:
                forward = (b - a) % n
                step = 1 if forward <= n - forward else -1
            else:
                step = 1 if b > a else -1
            while a != b:
                a = (a + step) % n
                path.append(base + a * s)
            node = base + b * s
        return path


def _factorizations(n: int, max_dims: int) -> list[list[int]]:
    """Ordered factorizations of ``n`` into at most ``max_dims`` factors >= 2."""
    if n == 1:
        return [[]]
    if max_dims == 0:
        return []
    out = []
    for f in range(2, n + 1):
        if n % f == 0:
            out.extend([f, *rest] for rest in _factorizations(n // f, max_dims - 1))
    return out


def recognize_grid(physical: PhysicalTopology, max_dims: int = 4) -> Grid | None:
    """The mesh/torus layout of a switchless topology, if its links are exactly one's.

    Tries every ordered factorization of the node count (up to ``max_dims``
    dimensions); a dimension is a ring when node 0 links to its last
    coordinate. Returns None when no layout matches link for link.
    """
    if physical.switches:
        return None
    n = physical.nodes_count
    links = set(zip(physical.link_src, physical.link_dst))
    zero = {physical.link_dst[i] for i in physical.out_links[0]}
    for sizes in _factorizations(n, max_dims):
        strides = [1]
        for size in sizes[:-1]:
            strides.append(strides[-1] * size)
        wrap = [size >= 3 and (size - 1) * s in zero for size, s in zip(sizes, strides)]
        expected0 = {s for s in strides} | {(size - 1) * s for size, s, w in zip(sizes, strides, wrap) if w}
        if expected0 != zero:
            continue
        grid = Grid(sizes, wrap)
        if grid.links() == links:
            return grid
    return None


def _ring_links(
    physical: PhysicalTopology, sizes: Sequence[int], rings: Sequence[bool], npus: int
) -> dict[int, tuple[int, bool]]:
    """link id -> (dimension, is the wrap-around link) for links along a ring dimension of >= 3.

    NPU node ids are their grid ids (< ``npus``); links touching other nodes
    (switches) are not ring links.
    """
    strides = []
    stride = 1
    for n in sizes:
        strides.append(stride)
        stride *= n
    out: dict[int, tuple[int, bool]] = {}
    for link, (a, b) in enumerate(zip(physical.link_src, physical.link_dst)):
        if a >= npus or b >= npus:
            continue
        for d, (n, s) in enumerate(zip(sizes, strides)):
            ca, cb = (a // s) % n, (b // s) % n
            if ca != cb:
                if rings[d] and n >= 3 and (cb - ca) % n in (1, n - 1):
                    out[link] = (d, {ca, cb} == {0, n - 1})
                break
    return out


def _up_down_root(physical: PhysicalTopology, root: int | None) -> int:
    if root is not None:
        if not 0 <= root < physical.nodes_count:
            raise ConfigError(
                f"garnetlike config: up_down_root: node {root} is not in "
                f"{physical.source} (nodes are 0..{physical.nodes_count - 1})"
            )
        return root
    candidates = sorted(physical.switches) or list(range(physical.nodes_count))
    return max(candidates, key=lambda node: (len(physical.out_links[node]), -node))


class Routing:
    """Routes (link ids) and per-hop VC classes between NPU ranks.

    Built from the physical topology, the config's ``routing`` and
    ``deadlock_avoidance``, and network.yml's dimensions when the physical
    topology was built from them (``network``). Raises ConfigError when the
    routing asked for does not fit the topology.
    """

    def __init__(
        self,
        physical: PhysicalTopology,
        routing: str = "auto",
        dateline: bool = True,
        network: NetworkConfig | None = None,
        up_down_root: int | None = None,
    ):
        self.physical = physical
        self.grid: Grid | None = None
        ring_links: dict[int, tuple[int, bool]] = {}
        if network is not None:  # physical = from_network(network): upstream's DOR routes
            sizes = [d.npus for d in network.dims]
            rings = [str(d.kind) == "Ring" for d in network.dims]
            ring_links = _ring_links(physical, sizes, rings, network.npus_count)
            is_grid = True
        else:
            self.grid = recognize_grid(physical)
            is_grid = self.grid is not None
            if is_grid:
                ring_links = _ring_links(physical, self.grid.sizes, self.grid.wrap, self.grid.nodes)
        if routing == "auto":
            routing = "dimension_order" if is_grid else "table"
        if routing == "dimension_order" and not is_grid:
            raise ConfigError(
                f"garnetlike config: routing: 'dimension_order' needs a ring, mesh or torus "
                f"(network.yml dimensions, or a switchless topology laid out like astra's mesh/torus "
                f"generators); {physical.source} is not one (use 'table' or 'up_down')"
            )
        self.mode = routing
        self.dateline = dateline and routing in ("dimension_order", "table") and bool(ring_links)
        self._ring_links = ring_links if self.dateline else {}
        self._root = _up_down_root(physical, up_down_root) if routing == "up_down" else None
        self._levels: dict[int, int] | None = None
        self._up_down: dict[int, dict[int, tuple[int, ...]]] = {}
        self._grid_paths: dict[tuple[int, int], tuple[int, ...]] = {}

    @property
    def uses_classes(self) -> bool:
        """True when some hops are restricted to one dateline VC class."""
        return bool(self._ring_links)

    def links(self, src: int, dst: int, tag: int = 0) -> tuple[int, ...]:
        """Link ids from NPU ``src`` to NPU ``dst`` (ranks)."""
        if self.mode == "up_down":
            return self._up_down_links(src, dst)
        if self.mode == "dimension_order" and self.grid is not None:
            key = (src, dst)
            path = self._grid_paths.get(key)
            if path is None:
                physical = self.physical
                nodes = self.grid.path(physical.hosts[src], physical.hosts[dst])
                path = self._grid_paths[key] = tuple(physical.link(a, b) for a, b in zip(nodes, nodes[1:]))
            return path
        return self.physical.route(src, dst, tag)

    def classes(self, links: Sequence[int]) -> tuple[int, ...]:
        """The VC class (LOW, HIGH or ANY) of each hop of a route (the dateline scheme)."""
        ring_links = self._ring_links
        out = []
        current = None
        cls = LOW
        for link in links:
            info = ring_links.get(link)
            if info is None:
                out.append(ANY)
                current = None
                continue
            dim, wraps = info
            if dim != current:
                current, cls = dim, LOW
            if wraps:
                cls = HIGH
            out.append(cls)
        return tuple(out)

    # -- up*/down* ---------------------------------------------------------------------------
    def _order(self) -> dict[int, int]:
        if self._levels is None:
            physical = self.physical
            levels = {self._root: 0}
            queue = deque([self._root])
            while queue:
                node = queue.popleft()
                for link in physical.out_links[node]:
                    nxt = physical.link_dst[link]
                    if nxt not in levels:
                        levels[nxt] = levels[node] + 1
                        queue.append(nxt)
            self._levels = levels
        return self._levels

    def _up_down_links(self, src: int, dst: int) -> tuple[int, ...]:
        table = self._up_down.get(src)
        if table is None:
            table = self._up_down[src] = self._up_down_from(src)
        path = table.get(dst)
        if path is None:
            raise ConfigError(
                f"{self.physical.source}: up_down routing: no up*/down* route from "
                f"NPU {src} to NPU {dst} (root node {self._root})"
            )
        return path

    def _up_down_from(self, src: int) -> dict[int, tuple[int, ...]]:
        """Shortest up*/down* routes from NPU ``src`` to every NPU (BFS over (node, gone down))."""
        physical = self.physical
        levels = self._order()
        far = len(levels) + physical.nodes_count
        relay = not physical.switches  # in a switch fabric NPUs do not forward
        start = (physical.hosts[src], False)
        parent: dict[tuple[int, bool], tuple[tuple[int, bool], int] | None] = {start: None}
        queue = deque([start])
        while queue:
            state = queue.popleft()
            node, down = state
            if node != start[0] and not relay and node not in physical.switches:
                continue
            rank = (levels.get(node, far), node)
            for link in physical.out_links[node]:
                nxt = physical.link_dst[link]
                up = (levels.get(nxt, far), nxt) < rank
                if up and down:
                    continue  # down then up: the turn up*/down* forbids
                new = (nxt, down or not up)
                if new not in parent:
                    parent[new] = (state, link)
                    queue.append(new)
        routes: dict[int, tuple[int, ...]] = {}
        for rank_dst, node in enumerate(physical.hosts):
            best = None
            for state in ((node, False), (node, True)):
                if state in parent:
                    path = []
                    at = state
                    while parent[at] is not None:
                        at, link = parent[at]
                        path.append(link)
                    if best is None or len(path) < len(best):
                        best = path
            if best is not None:
                routes[rank_dst] = tuple(reversed(best))
        return routes
