"""Congestion-aware analytical network (upstream astra-network-analytical congestion_aware).

A message (upstream: a chunk) crosses its route link by link, store and
forward. A link serves one message at a time, first come first served: a
message that finds it busy waits in the link's queue. Serving a message of
``B`` bytes on a link keeps the link busy ``int(B / bandwidth)`` ns, and the
message is at the link's far end ``int(latency + B / bandwidth)`` ns after it
started; then it queues for the next link of its route. Both delays truncate
to whole ns, as upstream's ``Link`` does.

Routes come from the physical topology: upstream's dimension-order routes for
network.yml dimensions, shortest paths with per-flow ECMP for topology files.
Unlike upstream (one-dimensional topologies only), any number of dimensions
and any physical topology work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from astra.plugin import EventQueue, PhysicalTopology, Topology, from_network, kernel, set_kernel_links


class CongestionAwareNetwork:
    """:class:`~astra_core.backend.NetworkBackend` where messages queue on shared links.

    The links are the simulation kernel's (``CongestionLinks``): the system layer's
    matcher hands a message to them without a Python call but the route's. After a
    run, ``link_bytes[i]`` and ``link_busy_ns[i]`` give each link's traffic and busy
    time, ``max_queue[i]`` the most messages that waited for it.
    """

    name = "analytical-congestion"

    def __init__(self, physical: PhysicalTopology):
        self.events = EventQueue()
        self.schedule = self.events.schedule  # hot path: no wrapper call
        self.topology = physical
        #: Messages queue on shared links (astra_core.backend.LinkSharing).
        self.shares_links = True
        self._bandwidth = physical.link_bandwidth
        self._latency = physical.link_latency
        self._links = kernel().CongestionLinks(
            self.events, physical.kernel_route, self._bandwidth, self._latency, physical.route_buckets
        )
        self._down: set[int] = set()  # links down now (change_links)
        self.send = self._links.send
        #: The model's send for the kernel's matcher (docs/plugins.md, "A compiled network
        #: model"): a message costs no Python call but its route's first one.
        self.native_send = self._links.native_send

    def now(self) -> float:
        return self.events.now

    def run(self) -> None:
        self.events.run()

    @property
    def messages(self) -> int:
        """Messages sent so far."""
        return self._links.messages

    @property
    def link_bytes(self) -> list[int]:
        """Bytes that crossed each link."""
        return self._links.link_bytes

    @property
    def link_busy_ns(self) -> list[int]:
        """ns during which each link was transmitting."""
        return self._links.link_busy_ns

    @property
    def max_queue(self) -> list[int]:
        """The most messages that waited for each link."""
        return self._links.max_queue

    def change_links(self, bytes_per_ns: Mapping[int, float]) -> None:
        """Links change bandwidth now (:class:`~astra_core.backend.LinkChanges`; 0: down).

        A message a link is serving keeps its times; the next it serves takes the new
        bandwidth. When links go down or come back, messages sent from now take the
        routing over the links up; a message whose route ahead crosses a link that went
        down is sent again from its source on its new route (go-back-N
        retransmission, as RoCE's): at once if it waits in a link's queue, else when its
        current hop ends (one on the failed link is lost there). Raises IndexError for
        an unknown link, ValueError for a negative bandwidth or a pair of NPUs left
        without a path."""
        set_kernel_links(self._links, self.topology, self._down, bytes_per_ns)

    def lone_message_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> float:
        """A message alone on the idle network (:class:`~astra_core.backend.LoneMessageTime`):
        the whole message store-and-forwarded, ``int(latency + B / bandwidth)`` ns per link
        of its route (0 from an NPU to itself)."""
        bandwidth, latency = self._bandwidth, self._latency
        route = self.topology.route(src, dst, tag) if src != dst else ()
        return sum(int(latency[link] + size_bytes / bandwidth[link]) for link in route)


def create(topology: Topology, config: Any = None) -> CongestionAwareNetwork:
    """Backend factory: the physical topology if given, else network.yml's dimensions."""
    physical = topology.physical if topology.physical is not None else from_network(topology.network)
    return CongestionAwareNetwork(physical)
