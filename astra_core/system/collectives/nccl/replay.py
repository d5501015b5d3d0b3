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
(:class:`~astra_core.backend.SymmetricTiming`).

Rank symmetry uses it (:mod:`astra_core.system.floor_fold`) for collectives
whose members play different parts (a tree's root and leaves): where every
member's messages are over before NCCL's predicted time has passed since it
started, that time alone decides when the collective ends on each member.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from astra_core.system.collectives.nccl.schedule import Schedule

#: One message: (src, dst, bytes, sent at ns, arrived at ns).
Message = tuple[int, int, int, float, float]

_START, _ARRIVE = 0, 1


@dataclass(frozen=True)
class Replay:
    """What :func:`replay` found: ``ends_ns[m]``, when member ``m``'s last send was
    delivered or last receive arrived (its start if it has neither), ns; ``messages``,
    every message the collective sent."""

    ends_ns: dict[int, float]
    messages: list[Message]


def replay(
    schedules: Mapping[int, Schedule],
    starts_ns: Mapping[int, float],
    message_ns: Callable[[int, int, int], float],
) -> Replay:
    """Replay one collective (module docstring). ``schedules`` and ``starts_ns`` map
    each member to its schedule and start time (ns). Raises ValueError when the
    schedules cannot finish (a receive no member sends, or a cycle of waits)."""
    return _Replayer(schedules, starts_ns, message_ns).run()


class _Replayer:
    """The state of one :func:`replay`: per member its lanes' next sends and deliveries,
    its receives, and the events to come. Its loops read their state into locals: a
    data-parallel reduce-scatter over 128 ranks is some 200,000 messages."""

    def __init__(
        self,
        schedules: Mapping[int, Schedule],
        starts_ns: Mapping[int, float],
        message_ns: Callable[[int, int, int], float],
    ) -> None:
        self.schedules, self.starts_ns, self.message_ns = schedules, starts_ns, message_ns
        members = list(schedules)
        # receives waiting for their message, by (src, lane, dst, bytes), in each member's order
        self.expected: dict[tuple[int, int, int, int], deque[int]] = defaultdict(deque)
        for m in members:
            for j, (src, size, lane) in enumerate(schedules[m].recvs):
                self.expected[(src, lane, m, size)].append(j)
        self.lanes = {m: [(lane.sends, lane.window) for lane in schedules[m].lanes] for m in members}
        self.next_send = {m: [0] * len(schedules[m].lanes) for m in members}
        self.delivered = {m: [0] * len(schedules[m].lanes) for m in members}
        self.arrived = {m: [False] * len(schedules[m].recvs) for m in members}
        self.waiters: dict[tuple[int, int], list[int]] = {}
        self.early: dict[int, list[int]] = defaultdict(list)  # arrived before their receiver started
        self.started: set[int] = set()
        self.ends = {m: float(starts_ns[m]) for m in members}
        self.messages: list[Message] = []
        self.heap: list[tuple[float, int, int, tuple]] = []
        self.seq = 0
        self.times: dict[tuple[int, int, int], float] = {}  # message_ns by (src, dst, bytes): a few kinds

    def push(self, time: float, kind: int, data: tuple) -> None:
        heapq.heappush(self.heap, (time, self.seq, kind, data))
        self.seq += 1

    def issue(self, m: int, i: int, now: float) -> None:
        """Send what lane ``i`` of ``m`` may send now: in order, each once the receives
        it forwards have arrived, while fewer than the lane's window are in flight."""
        sends, window = self.lanes[m][i]
        next_send, arrived = self.next_send[m], self.arrived[m]
        k = next_send[i]
        stop = min(len(sends), self.delivered[m][i] + window)
        heap, times, seq = self.heap, self.times, self.seq
        while k < stop:
            dst, size, needs = sends[k]
            missing = next((j for j in needs if not arrived[j]), None) if needs else None
            if missing is not None:
                lanes = self.waiters.setdefault((m, missing), [])
                if i not in lanes:  # a lane asked again while it waits is waiting already
                    lanes.append(i)
                break
            took = times.get((m, dst, size))
            if took is None:
                took = times[(m, dst, size)] = self.message_ns(m, dst, size)
            heapq.heappush(heap, (now + took, seq, _ARRIVE, (m, i, dst, size, now)))
            seq += 1
            k += 1
        self.seq = seq
        next_send[i] = k

    def receive(self, m: int, j: int, now: float) -> None:
        self.arrived[m][j] = True
        if now > self.ends[m]:
            self.ends[m] = now
        waiting = self.waiters.pop((m, j), None)
        if waiting:
            for i in waiting:
                self.issue(m, i, now)

    def arrive(self, now: float, src: int, i: int, dst: int, size: int, sent: float) -> None:
        """A message of lane ``i`` of ``src`` arrives at ``dst``."""
        self.messages.append((src, dst, size, sent, now))
        self.delivered[src][i] += 1
        if now > self.ends[src]:
            self.ends[src] = now
        self.issue(src, i, now)
        queue = self.expected.get((src, i, dst, size))
        if not queue:
            raise ValueError(f"rank {src} sends {size} B to rank {dst} on lane {i}, which no receive expects")
        j = queue.popleft()
        if dst in self.started:
            self.receive(dst, j, now)
        else:
            self.early[dst].append(j)

    def run(self) -> Replay:
        for m in self.schedules:
            self.push(float(self.starts_ns[m]), _START, (m,))
        heap, pop, arrive = self.heap, heapq.heappop, self.arrive
        while heap:
            now, _, kind, data = pop(heap)
            if kind == _ARRIVE:
                arrive(now, *data)
                continue
            m = data[0]
            self.started.add(m)
            for j in self.early.pop(m, ()):
                self.receive(m, j, now)
            for i in range(len(self.schedules[m].lanes)):
                self.issue(m, i, now)
        for m, schedule in self.schedules.items():
            unsent = any(self.next_send[m][i] < len(lane.sends) for i, lane in enumerate(schedule.lanes))
            if unsent or not all(self.arrived[m]):
                raise ValueError(
                    f"rank {m}'s part of the collective cannot finish: a send or receive waits forever"
                )
        return Replay(self.ends, self.messages)
