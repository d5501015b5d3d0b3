"""Physical topologies built from a few numbers.

Every generator returns a :class:`PhysicalTopology` whose hosts (NPUs) are
nodes ``0 .. H-1`` in rank order, followed by the switches. Bandwidths are
given in Gbps (10^9 bit/s per direction, the unit of ns-3 topology files;
1 Gbps = 0.125 bytes/ns) and latencies in ns per link. Every cable is two
directed links of the same bandwidth and latency; routes are the model's
default (shortest latency, then fewest hops, equal-cost multipath).

Defaults: 100 Gbps and 1000 ns per link are what the HPCC artifact's ns-3
topologies use (``100Gbps 0.001ms``), the usual starting point of RoCE
studies with ns-3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from astra_core.errors import ConfigError
from astra_core.topology.physical import PhysicalTopology
from astra_core.topology.size import check_topology_size

#: Bytes/ns in one Gbps (10^9 bit/s).
BYTES_PER_NS_PER_GBPS = 0.125

DEFAULT_GBPS = 100.0
DEFAULT_LATENCY_NS = 1000.0

#: NVLink4 gives each H100 900 GB/s counting both directions (18 links x 25 GB/s
#: each way), i.e. 450 GB/s = 3600 Gbps per direction; links here are directed.
NVLINK4_GBPS = 3600.0
#: Per-link latency of upstream ASTRA-sim's network.yml validated on a real
#: 8xH100 HGX system (``upstream_HGX-H100-validated.yml``: Switch, 936.25 ns).
NVLINK_LATENCY_NS = 936.25
#: One ConnectX-7 400 Gb/s NIC per H100, as in a DGX H100 node.
NIC_GBPS = 400.0


class _Builder:
    """Collects cables and checks parameters with the generator's name."""

    def __init__(self, name: str):
        self.name = name
        self.links: list[tuple[int, int, float, float]] = []

    def cable(self, a: int, b: int, gbps: float, latency_ns: float) -> None:
        bandwidth = gbps * BYTES_PER_NS_PER_GBPS
        self.links.append((a, b, bandwidth, latency_ns))
        self.links.append((b, a, bandwidth, latency_ns))

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            raise ConfigError(f"{self.name}: {message}")

    def number(self, key: str, value: float) -> None:
        self.check(
            isinstance(value, (int, float)) and not isinstance(value, bool),
            f"{key} must be a number, got {value!r}",
        )
        self.check(math.isfinite(value), f"{key} must be finite, got {value}")

    def positive(self, **values: float) -> None:
        for key, value in values.items():
            self.number(key, value)
            self.check(value > 0, f"{key} must be > 0, got {value}")

    def latency(self, **values: float) -> None:
        for key, value in values.items():
            self.number(key, value)
            self.check(value >= 0, f"{key} must be >= 0, got {value}")

    def integer(self, minimum: int, **values: int) -> None:
        for key, value in values.items():
            self.check(
                isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
                f"{key} must be an integer >= {minimum}, got {value!r}",
            )

    def size(self, nodes: int, cables: int, npus: int) -> None:
        """Refuse a fabric past the limits of :mod:`astra_core.topology.size` before building it."""
        check_topology_size(self.name, nodes, 2 * cables, npus)

    def build(self, nodes: int, switches: range) -> PhysicalTopology:
        return PhysicalTopology(nodes, switches, self.links, source=self.name)


def fat_tree(
    k: int, bandwidth_gbps: float = DEFAULT_GBPS, latency_ns: float = DEFAULT_LATENCY_NS
) -> PhysicalTopology:
    """A k-ary fat-tree (Al-Fares, Loukissas, Vahdat, SIGCOMM 2008).

    ``k`` pods, each of ``k/2`` edge and ``k/2`` aggregation switches;
    ``(k/2)^2`` core switches; ``k^3/4`` hosts, ``k/2`` per edge switch. Every
    edge switch links to every aggregation switch of its pod; aggregation
    switch ``a`` of each pod links to core switches ``a*k/2 .. a*k/2 + k/2 - 1``.
    Node ids: hosts pod by pod and edge switch by edge switch, then the edge
    switches, the aggregation switches (both pod-major) and the core switches.
    """
    b = _Builder(f"fat-tree k={k}")
    b.check(
        isinstance(k, int) and not isinstance(k, bool) and k >= 2 and k % 2 == 0,
        f"k must be an even integer >= 2, got {k!r}",
    )
    b.positive(bandwidth_gbps=bandwidth_gbps)
    b.latency(latency_ns=latency_ns)
    half = k // 2
    hosts = k * half * half
    edge0 = hosts
    agg0 = edge0 + k * half
    core0 = agg0 + k * half
    nodes = core0 + half * half
    b.size(nodes, 3 * hosts, hosts)  # host-edge, edge-aggregation, aggregation-core: k^3/4 each
    for pod in range(k):
        for e in range(half):
            edge = edge0 + pod * half + e
            for h in range(half):
                b.cable((pod * half + e) * half + h, edge, bandwidth_gbps, latency_ns)
            for a in range(half):
                b.cable(edge, agg0 + pod * half + a, bandwidth_gbps, latency_ns)
        for a in range(half):
            for c in range(half):
                b.cable(agg0 + pod * half + a, core0 + a * half + c, bandwidth_gbps, latency_ns)
    return b.build(nodes, range(hosts, nodes))


def star(
    hosts: int, bandwidth_gbps: float = DEFAULT_GBPS, latency_ns: float = DEFAULT_LATENCY_NS
) -> PhysicalTopology:
    """``hosts`` NPUs on one switch: the fabric of an incast or a single rack.

    Node ids: hosts ``0 .. hosts-1``, then the switch; host ``h``'s cable is links
    ``2h`` (up to the switch) and ``2h + 1`` (down)."""
    b = _Builder(f"star {hosts} hosts")
    b.integer(1, hosts=hosts)
    b.positive(bandwidth_gbps=bandwidth_gbps)
    b.latency(latency_ns=latency_ns)
    b.size(hosts + 1, hosts, hosts)
    for h in range(hosts):
        b.cable(h, hosts, bandwidth_gbps, latency_ns)
    return b.build(hosts + 1, range(hosts, hosts + 1))


def leaf_spine(
    hosts: int,
    leaves: int,
    spines: int,
    oversubscription: float = 1.0,
    host_gbps: float = DEFAULT_GBPS,
    latency_ns: float = DEFAULT_LATENCY_NS,
) -> PhysicalTopology:
    """A two-tier leaf-spine (folded Clos) fabric.

    ``hosts / leaves`` consecutive hosts per leaf (host ``h`` on leaf
    ``h // (hosts/leaves)``); every leaf links to every spine. Each leaf-spine
    link carries ``hosts_per_leaf * host_gbps / (oversubscription * spines)``
    Gbps, so a leaf's uplinks have 1/oversubscription of its downlink capacity.
    Node ids: hosts, then leaves, then spines.
    """
    b = _Builder(f"leaf-spine {hosts} hosts/{leaves} leaves/{spines} spines")
    b.integer(1, hosts=hosts, leaves=leaves, spines=spines)
    b.check(hosts % leaves == 0, f"{hosts} hosts do not split evenly over {leaves} leaves")
    b.positive(oversubscription=oversubscription, host_gbps=host_gbps)
    b.latency(latency_ns=latency_ns)
    b.size(hosts + leaves + spines, hosts + leaves * spines, hosts)
    per_leaf = hosts // leaves
    uplink_gbps = per_leaf * host_gbps / (oversubscription * spines)
    leaf0, spine0 = hosts, hosts + leaves
    for h in range(hosts):
        b.cable(h, leaf0 + h // per_leaf, host_gbps, latency_ns)
    for leaf in range(leaves):
        for spine in range(spines):
            b.cable(leaf0 + leaf, spine0 + spine, uplink_gbps, latency_ns)
    return b.build(spine0 + spines, range(hosts, spine0 + spines))


def _grid(kind: str, dims: list[int], bandwidth_gbps: float, latency_ns: float):
    """A checked builder for a switchless grid of ``dims`` and its node count."""
    b = _Builder(f"{kind} {'x'.join(map(str, dims))}")
    b.check(len(dims) >= 1, "needs at least one dimension")
    b.integer(1, **{f"dims[{i}]": n for i, n in enumerate(dims)})
    b.positive(bandwidth_gbps=bandwidth_gbps)
    b.latency(latency_ns=latency_ns)
    nodes = 1
    for n in dims:
        nodes *= n
    return b, nodes


def _grid_size(b: _Builder, dims: list[int], nodes: int, wrap: bool) -> None:
    """Refuse a grid past the size limits: per dimension of n, nodes/n lines of n - 1
    cables, plus the wrap-around cable of rings of 3 or more."""
    cables = sum(nodes // n * (n - 1 + (wrap and n >= 3)) for n in dims)
    b.size(nodes, cables, nodes)


def torus(
    dims: Sequence[int], bandwidth_gbps: float = DEFAULT_GBPS, latency_ns: float = DEFAULT_LATENCY_NS
) -> PhysicalTopology:
    """A torus of NPUs without switches (2-D or 3-D; any number of dimensions works).

    Node id ``x + dims[0] * (y + dims[1] * z)``. Each dimension wraps around: a
    ring of ``n >= 3`` has ``n`` cables, of 2 one cable, of 1 none. NPUs relay
    each other's traffic along shortest paths (dimensions in any order, ECMP).
    """
    dims = list(dims)
    b, nodes = _grid("torus", dims, bandwidth_gbps, latency_ns)
    _grid_size(b, dims, nodes, wrap=True)
    stride = 1
    for n in dims:
        for node in range(nodes):
            k = (node // stride) % n
            if n >= 3 or (n == 2 and k == 0):  # k -> k+1 (mod n): once per neighbour pair
                b.cable(node, node + (((k + 1) % n) - k) * stride, bandwidth_gbps, latency_ns)
        stride *= n
    return b.build(nodes, range(nodes, nodes))


def mesh(
    dims: Sequence[int], bandwidth_gbps: float = DEFAULT_GBPS, latency_ns: float = DEFAULT_LATENCY_NS
) -> PhysicalTopology:
    """A mesh of NPUs without switches: a torus without its wrap-around cables.

    Node id ``x + dims[0] * (y + dims[1] * z)``, as :func:`torus`. Each
    dimension of ``n`` nodes is a line of ``n - 1`` cables. NPUs relay each
    other's traffic along shortest paths (dimensions in any order, ECMP).
    """
    dims = list(dims)
    b, nodes = _grid("mesh", dims, bandwidth_gbps, latency_ns)
    _grid_size(b, dims, nodes, wrap=False)
    stride = 1
    for n in dims:
        for node in range(nodes):
            if (node // stride) % n < n - 1:
                b.cable(node, node + stride, bandwidth_gbps, latency_ns)
        stride *= n
    return b.build(nodes, range(nodes, nodes))


def gpu_cluster(
    nodes: int,
    gpus_per_node: int,
    nvlink_gbps: float = NVLINK4_GBPS,
    nvlink_latency_ns: float = NVLINK_LATENCY_NS,
    nic_gbps: float = NIC_GBPS,
    nic_latency_ns: float = DEFAULT_LATENCY_NS,
    leaves: int | None = None,
    spines: int | None = None,
    spine_gbps: float | None = None,
) -> PhysicalTopology:
    """GPU servers with an NVSwitch each, joined by a rail-optimized leaf-spine.

    ``nodes`` servers of ``gpus_per_node`` GPUs; GPU ``g`` of server ``n`` is
    rank ``n * gpus_per_node + g``. Each server has one switch (its NVSwitch
    fabric, lumped) linked to its GPUs at ``nvlink_gbps``. Each GPU's NIC is
    its one link to a leaf at ``nic_gbps`` (the NIC is not a node of its own).

    Rails: GPU ``g`` of every server shares a leaf with GPU ``g`` of the other
    servers (NVIDIA DGX SuperPOD's rail-optimized fabric). ``leaves`` defaults
    to one leaf per rail (``gpus_per_node``). With fewer leaves (a divisor of
    ``gpus_per_node``) GPU ``g`` goes to leaf ``g % leaves``; with more (a
    multiple, ``m`` leaves per rail) the servers split into ``m`` equal
    consecutive groups and GPU ``g`` of group ``i`` goes to leaf
    ``g + gpus_per_node * i``. Every leaf links to every spine; ``spines``
    defaults to ``leaves`` and ``spine_gbps`` to non-blocking: a leaf's
    uplinks carry as much as its GPU links.

    Routing keeps traffic between GPUs of one server on the NVSwitch (2 links)
    as long as that is the lowest-latency path (true for the defaults, and
    whenever ``nvlink_latency_ns <= nic_latency_ns``); traffic between servers
    leaves through the sender's NIC, since GPUs never relay.
    Node ids: GPUs, then the NVSwitches (one per server), leaves, spines.
    """
    b = _Builder(f"gpu-cluster {nodes}x{gpus_per_node}")
    g = gpus_per_node
    leaves = g if leaves is None else leaves
    spines = leaves if spines is None else spines
    b.integer(1, nodes=nodes, gpus_per_node=g, leaves=leaves, spines=spines)
    b.positive(nvlink_gbps=nvlink_gbps, nic_gbps=nic_gbps)
    b.latency(nvlink_latency_ns=nvlink_latency_ns, nic_latency_ns=nic_latency_ns)
    if leaves <= g:
        b.check(g % leaves == 0, f"leaves ({leaves}) must divide gpus_per_node ({g}) or be a multiple of it")
        per_rail = 1
    else:
        b.check(leaves % g == 0, f"leaves ({leaves}) must divide gpus_per_node ({g}) or be a multiple of it")
        per_rail = leaves // g
        b.check(
            nodes % per_rail == 0,
            f"{leaves} leaves make {per_rail} leaves per rail; nodes ({nodes}) must be a multiple of it",
        )
    gpus = nodes * g
    per_leaf = gpus // leaves
    if spine_gbps is None:
        spine_gbps = per_leaf * nic_gbps / spines
    b.positive(spine_gbps=spine_gbps)
    nvswitch0 = gpus
    leaf0 = nvswitch0 + nodes
    spine0 = leaf0 + leaves
    total = spine0 + spines
    b.size(total, 2 * gpus + leaves * spines, gpus)  # NVLink and NIC per GPU, leaf-spine mesh
    for n in range(nodes):
        group = n * per_rail // nodes
        for gpu in range(g):
            rank = n * g + gpu
            b.cable(rank, nvswitch0 + n, nvlink_gbps, nvlink_latency_ns)
            leaf = gpu % leaves if per_rail == 1 else gpu + g * group
            b.cable(rank, leaf0 + leaf, nic_gbps, nic_latency_ns)
    for leaf in range(leaves):
        for spine in range(spines):
            b.cable(leaf0 + leaf, spine0 + spine, spine_gbps, nic_latency_ns)
    return b.build(total, range(gpus, total))
