"""The ``flow`` network backend: messages as max-min fair flows over physical routes.

Queue pairs. Each ``send`` is a message on the queue pair of ``(src, dst,
tag)``, as on the ``ns3`` backend (an RDMA RC queue pair): the messages of
one queue pair go out one after the other, and a queue pair with messages to
send is one flow over the route :meth:`PhysicalTopology.route` gives for
``(src, dst, tag)`` (the same per-flow ECMP choice as the other backends).

Rates. Active flows share every link max-min fairly
(:mod:`astra_flow.maxmin`), re-solved once per instant at which flows start,
and after flows stop at the next multiple of ``reallocation_delay_ns`` (a
fixed clock; sooner where a flow starting on a link they shared reaches
them), only for the flows the change can affect: flows that share no link
do not move each other's re-solve times. A flow uses its
route's links at its rate and, if ``ack_bytes`` > 0, the links of the
reverse route ``(dst, src, tag)`` at ``ack_weight`` times its rate (its
ACKs). An optional ``flow_rate_cap_gbps`` caps every flow.

Timing of a message of ``B`` payload bytes in ``n = max(1, ceil(B / P))``
packets (``P`` = ``payload_bytes``, ``H`` = ``header_bytes``): its
``W = B + n H`` wire bytes drain from the queue pair at the flow's rate
(changing whenever the allocation does); the next message of the queue pair
starts draining then. The message is delivered a pipeline tail later: its
lone store-and-forward time over the route
(:mod:`astra_core.topology.pipeline`: latencies plus the packets' chain
through the links) less the ``W / r_b`` it would drain in at the
bottleneck ``b`` (the slowest link). A lone message therefore takes exactly
the packet-level pipeline time, as the ``ns3`` backend gives it.

Last rounds. Flows that share their bottleneck send there in rounds of one
packet each (NIC round-robin over queue pairs; a switch FIFO interleaves
senders at line rate alike), the flow that started its message sooner first
in every round. A message's last packet therefore leaves ``k (P + H) / c_b``
before its fluid drain ends, ``k`` the flows behind it in that round (those
bottlenecked at the same link ``b`` that started their messages later, or at
the same instant and sent after it; a flow at the level of several full links
is bottlenecked at the lowest numbered, :mod:`astra_flow.maxmin`), at most the time the message took beyond
its own ``W / c_b``; it is delivered that much sooner. Without it, flows that
collide step after step (a collective's rings) stay in lockstep, where
packets let the one ahead gain a packet per collision (docs/backends.md).

Statistics for ``--plots`` (:mod:`astra_core.report.links`): per directed
link, ``link_bytes`` (data and ACK wire bytes that crossed it),
``link_busy_ns`` (those bytes at the link's rate: the time it was busy) and
``peak_flows`` (the most flows crossing it at once).

The model is compiled C++ of this distribution (``cpp/flow.cc``, held by
:class:`astra_flow.links.FlowLinks`), built on the kernel's public interface
with the shared max-min solver of :mod:`astra_flow.maxmin`: the system layer's
matcher hands it each message without a Python call, and it asks Python only
for a route it has not seen. The flows the solver holds at one link at one
rate drain on their bundle's clock, with one drain event per bundle: a new
rate moves one event, not one per flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from astra.plugin import EventQueue, PhysicalTopology, Topology, set_kernel_links
from astra_flow.config import FlowConfig, load_config
from astra_flow.links import FlowLinks

#: Gbps (10^9 bit/s) in bytes/ns.
_BYTES_PER_NS_PER_GBPS = 0.125


class FlowNetwork:
    """:class:`~astra_core.backend.NetworkBackend` of max-min fair flows (module docstring).

    ``topology`` is the physical topology; ``config`` a :class:`FlowConfig`.
    After a run: ``link_bytes``, ``link_busy_ns``, ``peak_flows`` per link,
    ``messages``, and ``flows_solved`` (flows refilled by re-solves).
    """

    name = "flow"

    def __init__(self, physical: PhysicalTopology, config: FlowConfig | None = None):
        self.config = config = config or FlowConfig()
        self.topology = physical
        #: Flows share links max-min fairly (astra_core.backend.LinkSharing).
        self.shares_links = True
        self.events = EventQueue()
        self.schedule = self.events.schedule  # hot path: no wrapper call
        self._links = FlowLinks(
            self.events,
            physical.kernel_route,
            physical.link_bandwidth,
            physical.link_latency,
            physical.route_buckets,
            config.payload_bytes,
            config.header_bytes,
            config.ack_weight if config.ack_bytes else 0.0,
            config.flow_rate_cap_gbps * _BYTES_PER_NS_PER_GBPS,
            config.reallocation_delay_ns,
        )
        self._down: set[int] = set()  # links down now (change_links)
        self.send = self._links.send
        #: The model's send for the kernel's matcher (docs/plugins.md, "A compiled network
        #: model"): a message costs no Python call but its queue pair's route.
        self.native_send = self._links.native_send

    def now(self) -> float:
        return self.events.now

    def run(self) -> None:
        self.events.run()

    def change_links(self, bytes_per_ns: Mapping[int, float]) -> None:
        """Links change bandwidth now (:class:`~astra_core.backend.LinkChanges`; 0: down).

        Rates are re-solved at the end of the instant for every flow the change can
        reach (the flows linked to the changed links through shared links). When links
        go down or come back, every queue pair takes the path the routing over the links
        up gives it (switches rehash their flows over the next hops left, as ECMP
        without resilient hashing does); an active flow that moves keeps the bytes it
        drained and drains the rest on its new path, so no byte is lost or sent twice
        (RoCE would resend the packets in flight: at most a bandwidth-delay product,
        not modelled). A message that has drained keeps its pipeline tail. Raises
        IndexError for an unknown link, ValueError for a negative bandwidth or a pair of
        NPUs left without a path."""
        set_kernel_links(self._links, self.topology, self._down, bytes_per_ns)

    def lone_message_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> float:
        """A message alone on the idle network (:class:`~astra_core.backend.LoneMessageTime`):
        the route's latencies plus its packets' store-and-forward pipeline in this
        config's framing, less 1 ps, since the drain and the tail are each rounded to the
        nearest ps (at most 0.5 ps early each). 0 to itself."""
        return self._links.lone_message_ns(src, dst, size_bytes, tag)

    @property
    def messages(self) -> int:
        """Messages sent so far."""
        return self._links.messages

    @property
    def flows_solved(self) -> int:
        """Flows refilled over all re-solves (the solver's work)."""
        return self._links.flows_solved

    @property
    def link_bytes(self) -> list[float]:
        """Per link: data and ACK wire bytes that crossed it."""
        return self._links.link_bytes

    @property
    def peak_flows(self) -> list[int]:
        """Per link: the most flows that crossed it at once."""
        return self._links.peak_flows

    @property
    def link_busy_ns(self) -> list[float]:
        """Per link: ns it was busy (its wire bytes at its bandwidth when they were
        counted, as a flow went idle or moved)."""
        return self._links.link_busy_ns


def create(topology: Topology, config: Any = None) -> FlowNetwork:
    """Backend factory: ``config`` is None, a FlowConfig, a mapping or a TOML/YAML path.

    Uses ``topology.physical`` if given, else the links of network.yml's
    dimensions (:func:`astra_core.topology.logical.from_network`). Raises
    ConfigError for a bad config."""
    from astra.plugin import from_network

    physical = topology.physical if topology.physical is not None else from_network(topology.network)
    return FlowNetwork(physical, load_config(config))
