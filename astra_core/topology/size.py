"""How large a physical topology astra builds, and the one-line refusal past that.

A :class:`~astra_core.topology.physical.PhysicalTopology` keeps Python lists and
dicts per node and per directed link: about 400 bytes per directed link once
routes start to be cached (measured: a k=64 fat-tree, 70,656 nodes and 393,216
directed links, takes 0.8 s and 140 MB to build). Every generator, the ns-3
file reader and network.yml's physical links compute their node and link
counts from their parameters first and call :func:`check_topology_size`, so
that a typing mistake (``--k 1000``, a header ``1000000000 0 0``) is refused in
well under a second with its estimate instead of exhausting memory.

The limits (documented in ``astra topology --help`` and the README):

* :data:`MAX_NPUS` = 2^20 NPUs, the same bound network.yml's ``npus_count``
  has: astra reads one trace file and runs one rank engine per NPU;
* :data:`MAX_NODES` = 2^21 nodes (NPUs and switches);
* :data:`MAX_LINKS` = 2^22 directed links (2^21 cables): about 1.7 GB and
  8 s to build. The largest fabric of each generator inside them: a k=128
  fat-tree (524,288 NPUs, 3,145,728 directed links), a 1024x1024 torus.
"""

from __future__ import annotations

from astra_core.errors import ConfigError

MAX_NPUS = 1 << 20
MAX_NODES = 1 << 21
MAX_LINKS = 1 << 22
#: Bytes of memory per directed link, for the estimate in the refusal (see above).
BYTES_PER_LINK = 400


def check_topology_size(source: str, nodes: int, directed_links: int, npus: int | None = None) -> None:
    """Raise ConfigError (one line naming ``source``, the counts and the limits) when a
    topology of ``nodes`` nodes (``npus`` of them NPUs) and ``directed_links`` links
    (a cable is two) is past :data:`MAX_NODES`, :data:`MAX_NPUS` or :data:`MAX_LINKS`."""
    npus = nodes if npus is None else npus
    if nodes <= MAX_NODES and npus <= MAX_NPUS and directed_links <= MAX_LINKS:
        return
    need_gb = directed_links * BYTES_PER_LINK / 1e9
    memory = f", about {need_gb:,.0f} GB of memory" if need_gb >= 1 else ""
    raise ConfigError(
        f"{source}: too large: {nodes:,} nodes ({npus:,} NPUs) and {directed_links:,} directed links"
        f"{memory}; astra's limit is {MAX_NODES:,} nodes, {MAX_NPUS:,} NPUs and "
        f"{MAX_LINKS:,} directed links"
    )
