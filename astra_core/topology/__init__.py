"""Physical network topologies shared by the packet-level backends.

:class:`~astra_core.topology.physical.PhysicalTopology` is the one model: nodes
(NPUs and switches), directed links with bandwidth and latency, and routes.
It is built from the logical network.yml (:mod:`.logical`), from a file in
upstream's ns-3 format (:mod:`.ns3_format`) or by a generator
(:mod:`.generators`).
"""

from astra_core.topology.physical import PhysicalTopology

__all__ = ["PhysicalTopology"]
