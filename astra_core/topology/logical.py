"""Physical links for the logical dimensions of network.yml.

Each dimension connects the NPUs whose coordinates differ only in that
dimension (NPU id = sum of coordinate x stride, dimension 0 fastest, as
upstream numbers NPUs):

* ``Ring``: a bidirectional ring, member ``k`` to ``k + 1`` (one cable when
  the ring has two members);
* ``FullyConnected``: a link between every pair;
* ``Switch``: one switch node per group, one up and one down link per NPU.

Every link of dimension ``d`` has that dimension's bandwidth (GB/s, 1 GB =
2^30 B) and latency. Routes are upstream's congestion-aware ones, dimension by
dimension from 0 up: a ring goes the shorter way round (clockwise on a tie), a
fully connected dimension takes the direct link, a switch goes through its
switch (astra-network-analytical ``Ring::route``, ``Switch::route``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from astra_core.errors import ConfigError
from astra_core.topology.physical import PhysicalTopology
from astra_core.topology.size import check_topology_size

if TYPE_CHECKING:  # listing the backends must not load the config library (pydantic)
    from astra_core.config.network import NetworkConfig


def from_network(network: NetworkConfig) -> PhysicalTopology:
    """The physical topology of network.yml's dimensions, with upstream's routes."""
    sizes = [d.npus for d in network.dims]
    strides = []
    stride = 1
    for size in sizes:
        strides.append(stride)
        stride *= size
    npus = stride
    _check_size(network, sizes, npus)
    links: list[tuple[int, int, float, float]] = []
    switch_of: list[dict[int, int]] = []  # per dim: group base NPU -> switch node
    next_node = npus

    def cable(a: int, b: int, bw: float, lat: float) -> None:
        links.append((a, b, bw, lat))
        links.append((b, a, bw, lat))

    for d, dim in enumerate(network.dims):
        n, s = sizes[d], strides[d]
        bw, lat = dim.bandwidth_bytes_per_ns, dim.latency_ns
        switches: dict[int, int] = {}
        for base in range(npus):
            if (base // s) % n:  # only the group's first member builds the group
                continue
            members = [base + k * s for k in range(n)]
            kind = str(dim.kind)
            if kind == "Ring":
                for k in range(n if n > 2 else 1):
                    cable(members[k], members[(k + 1) % n], bw, lat)
            elif kind == "FullyConnected":
                for i in range(n):
                    for j in range(i + 1, n):
                        cable(members[i], members[j], bw, lat)
            else:
                switches[base] = next_node
                for m in members:
                    cable(m, next_node, bw, lat)
                next_node += 1
        switch_of.append(switches)

    kinds = [str(d.kind) for d in network.dims]

    def route(src: int, dst: int, _flow: int) -> list[int]:
        path = [src]
        node = src
        for d in range(len(sizes)):
            n, s = sizes[d], strides[d]
            a, b = (node // s) % n, (dst // s) % n
            if a == b:
                continue
            base = node - a * s
            if kinds[d] == "Ring":
                clockwise = (b - a) % n
                step = -1 if n - clockwise < clockwise else 1
                k = a
                while k != b:
                    k = (k + step) % n
                    path.append(base + k * s)
            elif kinds[d] == "FullyConnected":
                path.append(base + b * s)
            else:
                path.append(switch_of[d][base])
                path.append(base + b * s)
            node = base + b * s
        return path

    return PhysicalTopology(
        next_node,
        range(npus, next_node),
        links,
        source=network.source if hasattr(network, "source") else "network.yml",
        router=route,
        router_uses_flow=False,
    )


def _check_size(network: NetworkConfig, sizes: list[int], npus: int) -> None:
    """Refuse network.yml dimensions whose physical links would be past the size limits
    (a FullyConnected dimension of n NPUs alone has n(n-1) directed links per group)."""
    nodes, cables = npus, 0
    for dim, n in zip(network.dims, sizes):
        kind = str(dim.kind)
        if kind == "Ring":
            cables += npus if n > 2 else npus // 2 if n == 2 else 0
        elif kind == "FullyConnected":
            cables += npus // n * (n * (n - 1) // 2)
        else:
            nodes += npus // n
            cables += npus
    check_topology_size(getattr(network, "source", "network.yml"), nodes, 2 * cables, npus)


def logical_dims(physical: PhysicalTopology, sizes: list[int] | None = None) -> NetworkConfig:
    """The logical dimensions the system layer runs collectives over, for a physical topology.

    NPU rank ``r`` is the ``r``-th non-switch node of the topology (ascending
    node id) and its coordinate in dimension ``d`` is ``(r // prod(sizes[:d])) %
    sizes[d]``, as for network.yml. ``sizes`` defaults to one dimension of all
    NPUs. The dimensions are described as ``Switch`` with the bandwidth and
    latency of NPU 0's first link (a summary; the physical links decide the
    timing). Raises ConfigError when the sizes do not multiply to the NPU count
    or the topology has a single NPU.
    """
    from astra_core.config.network import NetworkConfig

    npus = physical.npus_count
    if npus < 2:  # network.yml dimensions have >= 2 NPUs each; a lone NPU has no links either
        raise ConfigError(f"{physical.source}: 1 NPU; a simulated network needs at least 2")
    sizes = list(sizes) if sizes else [npus]
    product = 1
    for size in sizes:
        product *= size
    if product != npus or any(size < 1 for size in sizes):
        shown = "x".join(map(str, sizes))
        raise ConfigError(
            f"{physical.source}: {npus} NPUs do not fit the logical dimensions {shown} ({product} NPUs)"
        )
    first = physical.out_links[physical.hosts[0]][0]
    gbps = physical.link_bandwidth[first] * 1e9 / 2**30  # bytes/ns -> GB/s (2^30 B)
    dims = [size for size in sizes if size > 1] or [npus]
    return NetworkConfig.from_dict(
        {
            "topology": ["Switch"] * len(dims),
            "npus_count": dims,
            "bandwidth": [gbps] * len(dims),
            "latency": [physical.link_latency[first]] * len(dims),
        },
        source=f"{physical.source} (logical dimensions)",
    )
