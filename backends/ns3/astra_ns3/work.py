"""What a run costs the ns3 backend, message by message, before simulating it.

A message of ``B`` bytes over ``H`` links is ``P = max(1, ceil(B /
payload_bytes))`` data packets (what :class:`~astra_ns3.network.Ns3Network`
adds to its ``max_packet_hops`` budget at send) and ``ceil(P / ack_interval)``
ACKs back over the reverse route, which is as long (every cable has one
latency both ways, so a shortest path reversed is a shortest path): the C++
model ACKs every ``ack_interval``-th in-order packet and the last one
(``cpp/flow.cc`` ``Flow::OnData``). Its ``packet_hops`` statistic counts
every frame a port sends (``cpp/port.cc`` ``Port::Pump``), so without CNPs,
PFC frames, NACKs or retransmissions it is exactly ``(P + ceil(P /
ack_interval)) x H`` summed over the messages
(tests/backends/ns3/test_work.py).

Speed: the projection divides by :data:`PACKET_HOPS_PER_S`; the per-message
cost is :data:`MESSAGE_S` (both measured, sources
there).
"""

from __future__ import annotations

from typing import Any

from astra_core.backend import Topology
from astra_core.topology.physical import PhysicalTopology
from astra_ns3.config import Ns3Config
from astra_ns3.network import PACKET_HOPS_PER_S

#: Where the model's speed (:data:`astra_ns3.network.PACKET_HOPS_PER_S`, packet-hops of
#: data, ACK, CNP and PFC frames per wall second on one core) was measured.
RATE_SOURCE = "benchmarks/ns3_speed.py (0.2-0.9 M packet-hops/s on one core; the low end)"
#: Wall seconds a message costs the run whatever its size: the system layer's work for
#: it, the caller's send, the worker's flow set-up and completion, and the lock-step
#: round trips (benchmarks/ns3_message_cost.py).
MESSAGE_S = 20e-6


class Ns3Work:
    """:class:`~astra_core.backend.WorkModel` of the ns3 backend on ``physical``."""

    unit = "packet-hops"
    rate = PACKET_HOPS_PER_S
    rate_source = RATE_SOURCE
    limit_key = "max_packet_hops"
    message_s = MESSAGE_S

    def __init__(self, physical: PhysicalTopology, config: Ns3Config):
        self.physical = physical
        self.payload = config.payload_bytes
        self.ack_interval = config.ack_interval
        self.limit = config.max_packet_hops or None
        # The steady-state fast-forward, where the config has it (key ``fast_forward``: a
        # switch, or a section with ``enabled``), skips most packets of long flows.
        fast = getattr(config, "fast_forward", None)
        enabled = getattr(fast, "enabled", fast)
        self.fast_forward = enabled not in (None, False)

    def per_link(self, size_bytes: int) -> tuple[int, int]:
        """(data packets, data packets + ACKs) of a message of ``size_bytes``."""
        packets = max(1, -(-size_bytes // self.payload))
        return packets, packets + -(-packets // self.ack_interval)

    def hops(self, src: int, dst: int) -> int:
        """Links of the route from NPU ``src`` to NPU ``dst`` (every ECMP path is as long)."""
        return 0 if src == dst else len(self.physical.route(src, dst, 0))


def work_model(topology: Topology, config: Any = None) -> Ns3Work:
    """The ns3 backend's work model for ``topology`` (as :func:`astra_ns3.factory.create`
    builds its fabric) and ``config`` (None, an Ns3Config, a mapping or a TOML/YAML
    path). Raises ConfigError naming the file and key of a bad config."""
    from astra_core.topology.logical import from_network
    from astra_ns3.config import load_config

    physical = topology.physical if topology.physical is not None else from_network(topology.network)
    return Ns3Work(physical, load_config(config))
