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

from collections import deque
from collections.abc import Callable
from typing import Any

from astra_core.backend import Topology
from astra_core.events import EventQueue
from astra_core.topology.logical import from_network
from astra_core.topology.physical import PhysicalTopology


class CongestionAwareNetwork:
    """:class:`~astra_core.backend.NetworkBackend` where messages queue on shared links.

    After a run, ``link_bytes[i]`` and ``link_busy_ns[i]`` give each link's
    traffic and busy time, ``max_queue[i]`` the most messages that waited for it.
    """

    name = "analytical-congestion"

    def __init__(self, physical: PhysicalTopology):
        self.events = EventQueue()
        self.schedule = self.events.schedule  # hot path: no wrapper call
        self.topology = physical
        #: Messages queue on shared links (astra_core.backend.LinkSharing).
        self.shares_links = True
        links = physical.links_count
        self._bandwidth = physical.link_bandwidth
        self._latency = physical.link_latency
        self._busy = [False] * links
        self._queues: list[deque | None] = [None] * links
        self.link_bytes = [0] * links
        self.link_busy_ns = [0] * links
        self.max_queue = [0] * links
        self.messages = 0

    def now(self) -> float:
        return self.events.now

    def send(
        self,
        src: int,
        dst: int,
        size_bytes: int,
        on_delivered: Callable[[Any], None],
        arg: Any = None,
        *,
        tag: int = 0,
    ) -> None:
        self.messages += 1
        route = self.topology.route(src, dst, tag)
        if not route:
            self.events.schedule(0, on_delivered, arg)
            return
        # [route, next hop index, bytes, callback, arg]
        self._enqueue(route[0], [route, 0, size_bytes, on_delivered, arg])

    def run(self) -> None:
        self.events.run()

    def lone_message_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> float:
        """A message alone on the idle network (:class:`~astra_core.backend.LoneMessageTime`):
        the whole message store-and-forwarded, ``int(latency + B / bandwidth)`` ns per link
        of its route (0 from an NPU to itself)."""
        bandwidth, latency = self._bandwidth, self._latency
        route = self.topology.route(src, dst, tag) if src != dst else ()
        return sum(int(latency[link] + size_bytes / bandwidth[link]) for link in route)

    # -- links ---------------------------------------------------------------------
    def _enqueue(self, link: int, message: list) -> None:
        if self._busy[link]:
            queue = self._queues[link]
            if queue is None:
                queue = self._queues[link] = deque()
            queue.append(message)
            if len(queue) > self.max_queue[link]:
                self.max_queue[link] = len(queue)
        else:
            self._transmit(link, message)

    def _transmit(self, link: int, message: list) -> None:
        self._busy[link] = True
        size = message[2]
        serialization = size / self._bandwidth[link]
        self.link_bytes[link] += size
        busy = int(serialization)
        self.link_busy_ns[link] += busy
        schedule = self.events.schedule
        # Arrival first, then link free: upstream's order for same-time events.
        schedule(int(self._latency[link] + serialization), self._arrived, message)
        schedule(busy, self._free, link)

    def _arrived(self, message: list) -> None:
        message[1] += 1
        route = message[0]
        if message[1] == len(route):
            message[3](message[4])
        else:
            self._enqueue(route[message[1]], message)

    def _free(self, link: int) -> None:
        self._busy[link] = False
        queue = self._queues[link]
        if queue:
            self._transmit(link, queue.popleft())


def create(topology: Topology, config: Any = None) -> CongestionAwareNetwork:
    """Backend factory: the physical topology if given, else network.yml's dimensions."""
    physical = topology.physical if topology.physical is not None else from_network(topology.network)
    return CongestionAwareNetwork(physical)
