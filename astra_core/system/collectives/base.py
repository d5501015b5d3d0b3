"""What every collective algorithm shares: the phase interface and packet bundles.

A collective *phase* runs one algorithm on one logical topology (a network
dimension or a communicator group) for one chunk. The system layer drives it
with three events, exactly as upstream ASTRA-sim's ``Algorithm::run``:

* ``STREAM_INIT``: the phase became active (its stream got a slot on the queue);
* ``PACKET_RECEIVED``: a message this phase posted a receive for has arrived;
* ``GENERAL``: a packet bundle finished its local NPU<->memory transfer (and
  reduction, if any), so one more packet may be sent.

:meth:`CollectivePhase.send_bundle` models upstream's ``PacketBundle`` +
``MemBus`` without a shared-bus model: the transfer between the NPU and its
memory takes the system's ``endpoint-delay`` (10 ns for a communicator-group
ring, upstream's ``Transmition::Fast``); a bundle that needs processing then
takes ``mem_write + 2 * mem_read`` of its size (read two operands, write the
sum; upstream ``PacketBundle::call``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from astra_core.events import kernel

if TYPE_CHECKING:
    from astra_core.system.p2p import MessageMatcher
    from astra_core.system.stream import Stream

STREAM_INIT = 0
PACKET_RECEIVED = 1
GENERAL = 2

#: Upstream's Transmition::Fast (communicator-group rings): a fixed 10 ns NPU<->memory
#: hop, whatever endpoint-delay says (MemBus.cc); the kernel's, which its windowed
#: phases use.
FAST_TRANSMISSION_NS: int = kernel().FAST_TRANSMISSION_NS


class PhasePort(Protocol):
    """All a phase may use of the rank that runs it (its stream's ``owner``, a
    :class:`~astra_core.system.rank.RankSystem`): the rank's ``id``, its kernel
    ``events`` (tick buckets and local-memory timing, which the kernel's windowed
    phases use), the run's message ``matcher`` (``send`` and ``recv``, the hot
    path) or the
    ``send_collective`` / ``recv_collective`` shorthands, the rank's clock (``now``,
    ``register_event``, batched per tick as upstream's ``Sys``), the local-memory
    model (``endpoint_delay_ns``, ``reduction_delay_ns``) and the hand-over of the
    stream to its next phase. Nothing else of the run is in a phase's reach."""

    id: int
    events: Any
    matcher: MessageMatcher
    endpoint_delay_ns: int

    def now(self) -> float: ...

    def register_event(self, delay_ns: int, callback: Callable[[Any], None], arg: Any = None) -> None: ...

    def reduction_delay_ns(self, size: int) -> int: ...

    def send_collective(self, dst: int, size: int, tag: int) -> None: ...

    def recv_collective(self, src: int, size: int, tag: int, on_received: Callable[[Any], None]) -> None: ...

    def proceed_to_next_phase(self, stream: Stream) -> None: ...


class PhaseAlgorithm(Protocol):
    """What the system layer uses of a phase: a :class:`CollectivePhase` (the
    Python base of NCCL, custom, double-binary-tree and plugin phases), or the
    kernel's :class:`~astra_core.system.collectives.plan.WindowedPhase`."""

    stream: Stream

    @property
    def comm_type(self) -> Any: ...

    @property
    def final_data_size(self) -> int: ...

    def start(self) -> None: ...

    def waiting_for(self) -> str: ...


class CollectivePhase:
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
        # None until the Stream binds itself, before the first event (every use is after)
        self.stream: Stream = cast("Stream", None)

    def run(self, event: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # The three events as methods (the system layer calls these). Algorithms
    # written as one state table implement run(); fast ones override these.
    def start(self) -> None:
        """STREAM_INIT: the phase got its queue slot."""
        self.run(STREAM_INIT)

    def received(self, _arg: Any = None) -> None:
        """PACKET_RECEIVED: a message this phase posted a receive for arrived."""
        self.run(PACKET_RECEIVED)

    def general(self, _arg: Any = None) -> None:
        """GENERAL: a packet bundle is through local memory."""
        self.run(GENERAL)

    def waiting_for(self) -> str:
        """One-line description of what the phase waits on (for deadlock reports)."""
        return f"{self.name} phase"

    # -- helpers shared by the algorithms ---------------------------------
    def send_bundle(self, size: int, needs_processing: bool, fast: bool) -> None:
        """Move ``size`` bytes between NPU and memory (and reduce them if
        ``needs_processing``), then signal GENERAL (upstream PacketBundle)."""
        owner = self.stream.owner
        delay = FAST_TRANSMISSION_NS if fast else owner.endpoint_delay_ns
        owner.register_event(delay, self._reduce if needs_processing else self.general, size)

    def _reduce(self, size: int) -> None:
        owner = self.stream.owner
        owner.register_event(owner.reduction_delay_ns(size), self.general)

    def send(self, dst: int, size: int) -> None:
        """Send ``size`` bytes of this chunk to rank ``dst``."""
        stream = self.stream
        stream.owner.send_collective(dst, size, stream.stream_id)

    def recv(self, src: int, size: int) -> None:
        """Post a receive of ``size`` bytes from rank ``src`` for this phase."""
        stream = self.stream
        stream.owner.recv_collective(src, size, stream.stream_id, self.received)

    def exit(self) -> None:
        """The phase is done on this rank: hand the stream to its next phase."""
        self.stream.owner.proceed_to_next_phase(self.stream)
