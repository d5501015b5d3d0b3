"""What every collective algorithm shares: the phase interface and packet bundles.

A collective *phase* runs one algorithm on one logical topology (a network
dimension or a communicator group) for one chunk. The system layer drives it
with three events, exactly as upstream ASTRA-sim's ``Algorithm::run``:

* ``STREAM_INIT``: the phase became active (its stream got a slot on the queue);
* ``PACKET_RECEIVED``: a message this phase posted a receive for has arrived;
* ``GENERAL``: a packet bundle finished its local NPU<->memory transfer (and
  reduction, if any), so one more packet may be sent.

A :class:`PacketBundle` models upstream's ``PacketBundle`` + ``MemBus`` without
a shared-bus model: the transfer between the NPU and its memory takes the
system's ``endpoint-delay`` (10 ns for a communicator-group ring, upstream's
``Transmition::Fast``); a bundle that needs processing then takes
``mem_write + 2 * mem_read`` of its size (read two operands, write the sum;
upstream ``PacketBundle::call``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from astra_core.system.stream import Stream

STREAM_INIT = 0
PACKET_RECEIVED = 1
GENERAL = 2

# Upstream's Transmition::Fast (communicator-group rings): a fixed 10 ns
# NPU<->memory hop, whatever endpoint-delay says (MemBus.cc).
FAST_TRANSMISSION_NS = 10


class CollectiveAlgorithm:
    """Base class of one collective phase of one chunk on one rank.

    Subclasses set ``comm_type`` (a :class:`~astra_core.system.comm_types.CommType`),
    ``data_size`` and ``final_data_size`` (bytes entering and leaving the phase)
    and implement :meth:`run`. ``stream`` is bound by the system layer before
    the first event.
    """

    name = "?"
    __slots__ = ("comm_type", "rank", "data_size", "final_data_size", "stream")

    def __init__(self, comm_type, rank: int, data_size: int):
        self.comm_type = comm_type
        self.rank = rank
        self.data_size = data_size
        self.final_data_size = data_size
        self.stream: Stream | None = None

    def run(self, event: int, data: Any = None) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def waiting_for(self) -> str:
        """One-line description of what the phase waits on (for deadlock reports)."""
        return f"{self.name} phase"

    # -- helpers shared by the algorithms ---------------------------------
    def send_bundle(self, size: int, needs_processing: bool, fast: bool) -> None:
        """Move ``size`` bytes between NPU and memory, then signal GENERAL."""
        PacketBundle(self.stream, size, needs_processing).start(fast)

    def exit(self) -> None:
        """The phase is done on this rank: hand the stream to its next phase."""
        self.stream.owner.proceed_to_next_phase(self.stream)


class PacketBundle:
    """Packets on their way between NPU and local memory (upstream PacketBundle)."""

    __slots__ = ("stream", "size", "needs_processing")

    def __init__(self, stream: "Stream", size: int, needs_processing: bool):
        self.stream = stream
        self.size = size
        self.needs_processing = needs_processing

    def start(self, fast: bool) -> None:
        owner = self.stream.owner
        delay = FAST_TRANSMISSION_NS if fast else owner.endpoint_delay_ns
        owner.register_event(delay, self._arrived)

    def _arrived(self, _arg: Any = None) -> None:
        owner = self.stream.owner
        if self.needs_processing:
            self.needs_processing = False
            owner.register_event(owner.reduction_delay_ns(self.size), self._arrived)
            return
        self.stream.algorithm.run(GENERAL)
