"""One NCCL collective replayed alone, every member at once, on a network whose
message times depend on nothing else.

:func:`replay` runs the members' :class:`~.schedule.Schedule` the way the
kernel's ``NcclPhase`` does (``astra_core/cpp/kernel/nccl_phase.h``): a
member posts its receives and issues its lanes when it starts; a lane sends in
order, each send once the receives it forwards have arrived and with fewer
than the lane's window in flight; a message arrives ``message_ns(src, dst,
bytes)`` after it is sent and is matched to the first receive of the same
sender, lane and size (a message that arrives before its receiver started
waits for it). It needs a congestion-unaware network: there a message's time
is that function of its ends and size alone, whatever else is in flight
(:class:`~astra_core.backend.SymmetricTiming`). The kernel runs it
(``astra_core/cpp/kernel/nccl_replay.h``) with the ``NcclPhase``'s own lanes.

Rank symmetry uses it (:mod:`astra_core.system.floor_fold`) for collectives
whose members play different parts (a tree's root and leaves): where every
member's messages are over before NCCL's predicted time has passed since it
started, that time alone decides when the collective ends on each member.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from astra_core.events import kernel
from astra_core.intervals import Interval

#: One message: (src, dst, bytes, sent at ns, arrived at ns).
Message = tuple[int, int, int, float, float]


@dataclass(frozen=True)
class Replay:
    """What :func:`replay` found: per member ``m``, ``ends_ns[m]``, when its last send was
    delivered or its last receive arrived (its start if it has neither), ns, and
    ``flights[m]``, the sorted disjoint intervals (ns) in which one of its messages was in
    flight; ``messages`` and ``message_bytes``, the messages the collective sent and
    their bytes; ``sent``, every message, when :func:`replay` was asked to keep them."""

    ends_ns: dict[int, float]
    messages: int
    message_bytes: int
    flights: dict[int, list[Interval]]
    sent: list[Message] | None = None

    def relabelled(self, to: Mapping[int, int]) -> Replay:
        """The same replay for the members ``to`` maps these onto (a translation of the
        collective: the messages' count and bytes are kept, not their ranks)."""
        return Replay(
            {to[m]: end for m, end in self.ends_ns.items()},
            self.messages,
            self.message_bytes,
            {to[m]: spans for m, spans in self.flights.items()},
        )


def replay(
    schedules: Mapping[int, tuple[tuple, tuple]],
    starts_ns: Mapping[int, float],
    message_ns: Callable[[int, int, int], float],
    keep_messages: bool = False,
) -> Replay:
    """Replay one collective (module docstring) in the kernel (``nccl_replay``, which runs
    each member's lanes as the kernel's ``NcclPhase`` does). ``schedules`` and
    ``starts_ns`` map each member to its schedule, frozen (lanes and receives as
    :meth:`~.schedule.Schedule.frozen` gives them), and its start time (ns); ``keep_messages``
    keeps every message in :attr:`Replay.sent`. Raises ValueError when the schedules
    cannot finish (a send to no member or that no receive expects, or a cycle of waits)."""
    members = list(schedules)
    parts = tuple((m, *schedules[m]) for m in members)
    starts = tuple(float(starts_ns[m]) for m in members)
    ends, messages, message_bytes, flights, sent = kernel().nccl_replay(
        parts, starts, message_ns, keep_messages
    )
    return Replay(dict(zip(members, ends)), messages, message_bytes, dict(zip(members, flights)), sent)
