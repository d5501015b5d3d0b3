"""The core's built-in backend ``analytical``: upstream astra-network-analytical's
congestion-unaware model, which every run can use and the estimator runs on.

A message of ``B`` bytes between NPUs that differ first in dimension ``d``
takes ``hops * latency_d + B / bandwidth_d`` ns, truncated to whole ns (upstream
``BasicTopology::compute_communication_delay`` casts to an integer tick).
Hops by the dimension's topology: Ring, the shorter way round a bidirectional
ring; FullyConnected, 1; Switch, 2 (up to the switch and down). Links are never
shared: concurrent messages do not slow each other down.

NPU ids are numbered with dimension 0 fastest: the coordinate in dimension
``d`` is ``(id // prod(sizes[:d])) % sizes[d]``. Bandwidth in network.yml is
GB/s with 1 GB = 2^30 bytes.

On a physical topology (``--topology``) a message takes the sum over its
route of ``int(latency + B / bandwidth)`` per link: the same store-and-forward
hops as ``analytical-congestion`` but without any queueing, so the two
backends differ exactly where messages share links.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from astra_core.events import EventQueue, kernel

if TYPE_CHECKING:  # listing the backends must not load the config library (pydantic)
    from astra_core.backend import Topology
    from astra_core.config.network import NetworkConfig
    from astra_core.topology.physical import PhysicalTopology

#: The backend's name (the default backend's, unless settings choose another).
NAME = "analytical"


#: network.yml's topology names as the kernel's model numbers them.
_KINDS = {"Ring": 0, "Switch": 1, "FullyConnected": 2}


class AnalyticalNetwork:
    """:class:`~astra_core.backend.NetworkBackend` with upstream's closed-form delays."""

    name = NAME

    def __init__(self, network: NetworkConfig, physical: PhysicalTopology | None = None):
        self.events = EventQueue()
        self.physical = physical
        # Message times depend only on the offset between NPUs (not on a physical
        # route's shared state), so rank symmetry applies (astra_core.system.symmetry).
        self.symmetric = physical is None
        #: Links are never shared (astra_core.backend.LinkSharing): no flow studies here.
        self.shares_links = False
        # The hot path: bind the queue's method directly (saves a call per event).
        self.schedule = self.events.schedule
        dims = []
        stride = 1
        for dim in network.dims:
            dims.append((stride, dim.npus, _KINDS[str(dim.kind)], dim.latency_ns, dim.bandwidth_bytes_per_ns))
            stride *= dim.npus
        self.npus_count = stride
        #: The model in the kernel: the system layer's matcher times a message on it
        #: without a Python call, on the dimensions or on the physical routes.
        if physical is None:
            self._links = kernel().AnalyticalLinks(self.events, dims)
        else:
            self._links = kernel().AnalyticalLinks(
                self.events,
                dims,
                physical.kernel_route,
                physical.link_bandwidth,
                physical.link_latency,
                physical.route_buckets,
            )
        self.send = self._links.send
        #: The model's send for the kernel's matcher (docs/plugins.md, "A compiled
        #: network model"): a message costs no Python call (on a physical topology
        #: with its own router, a route's first one).
        self.native_send = self._links.native_send
        #: ``start_tally(check_every, on_check=None)`` and ``tally()``: the messages sent,
        #: counted by (src, dst, bytes) (what :mod:`astra_core.estimate` prices).
        self.start_tally = self._links.start_tally
        self.tally = self._links.tally

    # -- NetworkBackend ---------------------------------------------------------
    def now(self) -> float:
        return self.events.now

    @property
    def messages(self) -> int:
        """Messages sent so far."""
        return self._links.messages

    @property
    def bytes_sent(self) -> int:
        """Bytes sent so far."""
        return self._links.bytes_sent

    def run(self) -> None:
        self.events.run()

    # -- the model ------------------------------------------------------------------
    def delay_ns(self, src: int, dst: int, size_bytes: int) -> int:
        """Latency + serialization of one message, whole ns (0 if src == dst); on a
        physical topology, its route's (tag 0) store-and-forward hops, whole ns each."""
        return self._links.delay_ns(src, dst, size_bytes)

    def lone_message_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> float:
        """A message alone on the network (:class:`~astra_core.backend.LoneMessageTime`):
        :meth:`delay_ns`, which here is every message's time whatever else is in flight."""
        return self._links.delay_ns(src, dst, size_bytes)


def create(topology: Topology, config: Any = None) -> AnalyticalNetwork:
    """Backend factory (see :func:`astra_core.hookspecs.astra_register_backends`)."""
    return AnalyticalNetwork(topology.network, topology.physical)
