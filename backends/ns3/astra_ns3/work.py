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

Speed and memory: the projection is ``messages x`` :data:`MESSAGE_S` ``+
packet-hops /`` :data:`PACKET_HOPS_PER_S`, the peak memory ``messages x``
:data:`MEMORY_PER_MESSAGE_BYTES` ``+`` :data:`MEMORY_BASE_BYTES`, all fitted on
runs of this model (sources there). With the steady-state fast-forward, most
packets of long flows are never simulated: the packet-hops are then an upper
bound and ``messages x MESSAGE_S`` the floor.
"""

from __future__ import annotations

from typing import Any

from astra_core.backend import Topology
from astra_core.topology.physical import PhysicalTopology
from astra_ns3.config import Ns3Config

# Fitted by benchmarks/ns3_message_cost.py on this project's 2-core machine, otherwise idle
# (2026-11-26, model of 8a91dbb): wall = 44.0 us x messages + packet-hops / 0.34 M over a
# 16-GPU Llama-shaped step at two sequence lengths (143,872 messages, 0.62 M and 4.65 M
# packet-hops: 8.0 s and 20.2 s) and a 64 MiB all-reduce (0.92 M packet-hops: 2.1 s),
# packet by packet. (Before the messages of a step crossed to the worker as one buffer
# the same fit gave 77 us a message, under load 3.6-4.4.) A projection on a busy machine
# is optimistic, on an idle one about right.
# benchmarks/ns3_speed.py gave 0.45 M packet-hops/s for a 1 GiB all-reduce at load 1.6;
# ../shared/NS3-NOTES.md 0.17-0.2 M; docs/cc-studies.md 0.36 M.
#: Packet-hops (data, ACK, CNP and PFC frames over one link) per wall second; also the
#: figure in max_packet_hops's refusal at a send (astra_ns3.network).
PACKET_HOPS_PER_S = 3.4e5
#: Wall seconds a message costs the run whatever its size: the system layer's work for it
#: (every rank is simulated on ns3), the send, the worker's flow set-up and completion,
#: and the lock-step round trips.
MESSAGE_S = 44e-6
RATE_SOURCE = "benchmarks/ns3_message_cost.py, a fit on this 2-core machine"
#: Peak resident memory of the caller and the ns-3 worker together, as fitted by the same
#: runs: 52 + 51 MiB at 448 messages, 108 + 119 MiB at 143,872 (the per-message counters
#: and flow records both keep until the run ends). The Llama-3-8B steps of
#: benchmarks/ns3_llm.py peaked lower per message: 585 + 1,193 MiB at 2.55 M messages (128 GPUs).
MEMORY_BASE_BYTES = 100 << 20
MEMORY_PER_MESSAGE_BYTES = 906


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
        # The steady-state fast-forward skips most packets of long flows.
        self.fast_forward = config.fast_forwards

    def peak_memory_bytes(self, messages: int) -> int:
        """Peak resident memory (bytes) of a run of ``messages`` messages, caller and worker."""
        return MEMORY_BASE_BYTES + messages * MEMORY_PER_MESSAGE_BYTES

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
