"""The flow backend's configuration file (TOML or YAML) and its defaults.

Every key is optional; unknown keys are errors (one line per problem naming
the file and key). The defaults frame data packets as the ``ns3`` backend
does, so the two agree where congestion control keeps links full:

``payload_bytes`` (4096)
    Payload per packet: the RoCE path MTU most deployments use, and the ns3
    backend's ``payload_bytes`` (upstream's ``PACKET_PAYLOAD_SIZE``). A
    message of ``B`` bytes is ``max(1, ceil(B / payload_bytes))`` packets.
``header_bytes`` (82)
    Wire bytes per packet besides its payload: Ethernet's MAC header 14, FCS
    4, preamble and start delimiter 8 and inter-frame gap 12, plus RoCEv2's
    IPv4 20, UDP 8, BTH 12 and ICRC 4 (IBTA RoCEv2 annex A17), as the ns3
    backend frames a data packet.
``ack_bytes`` (0: ACKs left out)
    Wire bytes of the ACK each ``ack_interval`` data packets send back along
    the reverse route. 86 charges them as the ns3 backend sends them (a data
    frame's 82 plus the 4-byte AETH): the ring cases of
    ``validation/backends.py`` then agree with ns3 within 0.2 % instead of
    about 1 % (all-to-all: +4.2 % instead of +2.3 %), but every flow then
    shares links with the flows it meets head-on, and a 4096-GPU ring
    all-reduce (``benchmarks/flow_scale.py``) took 2.6x as long (493 s
    against 192 s, both with a second job on the other core).
``ack_interval`` (1)
    Data packets per ACK (the ns3 backend's and upstream's
    ``L2_ACK_INTERVAL``).
``reallocation_delay_ns`` (1000)
    The period of the clock on which the others take up the bandwidth of
    flows that ended: at the first multiple of it after a flow ends, its
    links are re-solved (sooner where a flow starting meanwhile on a link
    it shares reaches them: a start re-solves at once). No transport learns
    of freed bandwidth before the news has crossed at least one link, so
    this stays below the reaction of any real congestion control on links
    of 1 µs; it lets the flows that end within one period share one
    re-solve (an all-to-all of 128 hosts, measured with the earlier timer
    set by the first flow to end: 59 re-solves instead of 13,959, 20x
    faster, the step 0.25 % longer). A fixed clock, as NICs' periodic
    rate-update timers, rather than one set by the first flow to end, so
    that flows that share no link (two jobs on their own leaves) never move
    each other's re-solves. 0 re-solves at every instant (exact max-min at
    all times).
``flow_rate_cap_gbps`` (0 = none)
    The fastest one flow (a queue pair) may inject, in Gbps (10^9 bit/s of
    wire bytes): a NIC's per-queue-pair limit, or its line rate where it is
    slower than the first link.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel

from astra.plugin import STRICT, between, load_model

#: The ns3 backend's data-frame overhead (backends/ns3 cpp/roce.h: kDataOverhead).
ROCE_HEADER_BYTES = 14 + 4 + 8 + 12 + 20 + 8 + 12 + 4


class FlowConfig(BaseModel):
    """The flow backend's settings (see the module docstring for every default)."""

    model_config = STRICT
    payload_bytes: Annotated[int, between(1, 1 << 30, " bytes")] = 4096
    header_bytes: Annotated[int, between(0, 1 << 20, " bytes")] = ROCE_HEADER_BYTES
    ack_bytes: Annotated[int, between(0, 1 << 20, " bytes")] = 0
    ack_interval: Annotated[int, between(1, 1 << 31, "")] = 1
    reallocation_delay_ns: Annotated[float, between(0, 1e12, " ns")] = 1000.0
    flow_rate_cap_gbps: Annotated[float, between(0, 1e9, " Gbps")] = 0.0

    @property
    def ack_weight(self) -> float:
        """ACK wire bytes on the reverse route per wire byte of full data packets."""
        return self.ack_bytes / (self.ack_interval * (self.payload_bytes + self.header_bytes))


def load_config(config: Any) -> FlowConfig:
    """The config from None (defaults), a FlowConfig, a mapping or a TOML/YAML path.
    Raises ConfigError (one line per problem)."""
    return load_model(FlowConfig, config, "flow backend config")
