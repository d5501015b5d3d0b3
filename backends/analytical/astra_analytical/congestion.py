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

from array import array
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from astra.plugin import (
    KERNEL_HEADERS,
    EventQueue,
    PhysicalTopology,
    Topology,
    from_network,
    kernel,
    kernel_api_address,
    link_changes,
    load,
    native_send_capsule,
    set_kernel_links,
)

#: The model's source (C++ on the kernel's public interface) and its functions.
SOURCE = Path(__file__).resolve().parent / "cpp" / "congestion.cc"
_SIGNATURES = {
    "astra_congestion_new": ("int64", ("int64", "object", "object", "int64", "int64", "int64", "int64")),
    "astra_congestion_native_send": ("int64", ("int64",)),
    "astra_congestion_messages": ("int64", ("int64",)),
    "astra_congestion_counters": ("void", ("int64", "int", "int64")),
    "astra_congestion_set_links": ("int", ("int64", "int64", "int64", "int64", "object", "int")),
}


class CongestionLinks:
    """Upstream's congestion-aware links on the kernel's event queue ``events``
    (store and forward, one message at a time per link, FIFO): the compiled model of
    ``cpp/congestion.cc``, built on first use (:func:`astra.plugin.load`).

    ``route(src, dst, tag)`` (the kernel's ``ShortestPaths`` or a Python callable)
    gives a message's link ids; with ``route_buckets > 0``, ``route(src, dst,
    bucket)`` gives those of flow bucket ``flow_hash(src, dst, tag) % route_buckets``,
    asked for once. ``bytes_per_ns[i]`` and ``latency_ns[i]`` describe link ``i``.
    The model belongs to ``events`` (freed with it). Raises ValueError when they
    differ in length; NativeUnavailable when the model cannot be built.
    """

    def __init__(
        self,
        events: EventQueue,
        route: Callable[[int, int, int], Sequence[int]],
        bytes_per_ns: Sequence[float],
        latency_ns: Sequence[float],
        route_buckets: int = 0,
    ):
        if len(bytes_per_ns) != len(latency_ns):
            raise ValueError("one bandwidth and one latency per link")
        self._lib = load("astra_congestion", [SOURCE], _SIGNATURES, KERNEL_HEADERS)
        self._links = len(bytes_per_ns)
        self._events = events  # which owns the model, and keeps route
        bandwidth, latency = array("d", bytes_per_ns), array("d", latency_ns)
        self._handle = self._lib.astra_congestion_new(
            kernel_api_address(), events, route, route_buckets, self._links,
            bandwidth.buffer_info()[0], latency.buffer_info()[0],
        )  # fmt: skip
        #: The model's send for the kernel's matcher (a capsule ``astra.native_send``).
        self.native_send = native_send_capsule(self._lib.astra_congestion_native_send(self._handle))
        #: ``send(src, dst, size_bytes, on_delivered, arg=None, tag=0)``: a message from
        #: Python; ``on_delivered(arg)`` when it has crossed its route.
        self.send = partial(kernel().native_send, self.native_send)

    @property
    def messages(self) -> int:
        """Messages sent so far."""
        return self._lib.astra_congestion_messages(self._handle)

    def _counter(self, which: int) -> list[int]:
        out = array("q", bytes(8 * self._links))
        self._lib.astra_congestion_counters(self._handle, which, out.buffer_info()[0])
        return out.tolist()

    @property
    def link_bytes(self) -> list[int]:
        """Bytes that crossed each link."""
        return self._counter(0)

    @property
    def link_busy_ns(self) -> list[int]:
        """ns during which each link was transmitting."""
        return self._counter(1)

    @property
    def max_queue(self) -> list[int]:
        """The most messages that waited for each link."""
        return self._counter(2)

    def set_links(self, links: Sequence[int], bytes_per_ns: Sequence[float], route: Any = None) -> None:
        """Links change bandwidth now (``bytes_per_ns[i]`` for link ``links[i]``; 0: down);
        with ``route``, the routing over the links up, which messages sent from now take
        (those whose route ahead went down are sent again). Raises IndexError for an
        unknown link, ValueError for a bandwidth that is negative or not finite or for
        sequences of different lengths."""
        changed, bandwidth = link_changes(self._links, links, bytes_per_ns)
        self._lib.astra_congestion_set_links(
            self._handle, len(changed), changed.buffer_info()[0], bandwidth.buffer_info()[0],
            route, route is not None,
        )  # fmt: skip


class CongestionAwareNetwork:
    """:class:`~astra_core.backend.NetworkBackend` where messages queue on shared links.

    The links are a compiled model (:class:`CongestionLinks`): the system layer's
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
        self._links = CongestionLinks(
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
