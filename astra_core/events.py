"""A lean discrete-event kernel for pure-Python network backends.

Events are kept in a binary heap of ``(time_ns, sequence, callback, arg)``.
The sequence number makes events at the same time run in the order they were
scheduled, including events scheduled *at the current time while it is being
processed*: they run in the same time step, after everything already queued
for it. This is exactly the ordering of ASTRA-sim's analytical event queue
(``EventList::invoke_events`` drains a FIFO list per time), which several
collective algorithms depend on to reproduce upstream's timings.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Protocol

Callback = Callable[[Any], None]


class ProgressHook(Protocol):
    """What ``EventQueue.progress`` holds: called with the simulated time ``now_ns``
    (ns), the events the backend has executed so far, and a short ``note`` on what the
    backend is doing when its time stands still ('' otherwise). Backends that run
    their work elsewhere (ns3's worker) call it too, from their own heartbeat."""

    def __call__(self, now_ns: float, events: int, note: str = "", /) -> None: ...


#: Events between two calls of ``EventQueue.progress`` (a power of two: a mask test).
PROGRESS_EVERY = 1 << 16
_INF = float("inf")


class EventQueue:
    """Heap-based event queue owning the simulated clock (ns).

    ``schedule(delay_ns, fn, arg)`` runs ``fn(arg)`` at ``now + delay_ns``;
    ``run()`` drains the queue. Times are whatever numbers the caller uses
    (ints for the analytical models, which truncate delays to whole ns like
    upstream).

    ``progress``, if set to a callable, is called as ``progress(now_ns,
    events_processed)`` every :data:`PROGRESS_EVERY` events while ``run()``
    drains the queue (progress bars); left None it costs nothing.

    ``step_end``, if set to a callable, is called with no argument when
    ``step_pending`` is true and the clock is about to move past the current
    time (or the queue has run dry); ``step_pending`` is cleared first. A
    model that batches the changes of one instant (a flow model re-solving
    its rates once per time step) sets ``step_pending`` when it has work
    waiting; ``step_end`` may schedule events, also at the current time.
    """

    __slots__ = ("_heap", "_seq", "now", "events_processed", "progress", "step_end", "step_pending")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callback, Any]] = []
        self._seq = 0
        self.now: float = 0
        self.events_processed = 0
        self.progress: ProgressHook | None = None
        self.step_end: Callable[[], None] | None = None
        self.step_pending = False

    def schedule(self, delay_ns: float, callback: Callback, arg: Any = None) -> None:
        """Run ``callback(arg)`` after ``delay_ns`` (finite, >= 0) nanoseconds.

        Raises ValueError for a negative, infinite or NaN delay (a NaN time
        would silently break the heap's order; an infinite one would stop the
        clock at infinity)."""
        if not 0 <= delay_ns < _INF:  # one chained test: NaN fails both sides
            raise ValueError(f"cannot schedule with a delay of {delay_ns} ns (must be finite and >= 0)")
        self._seq += 1
        heapq.heappush(self._heap, (self.now + delay_ns, self._seq, callback, arg))

    def schedule_at(self, time_ns: float, callback: Callback, arg: Any = None) -> None:
        """Run ``callback(arg)`` at absolute time ``time_ns`` (finite, >= now); raises
        ValueError otherwise."""
        if not self.now <= time_ns < _INF:
            raise ValueError(f"cannot schedule at {time_ns} ns, clock is at {self.now} ns")
        self._seq += 1
        heapq.heappush(self._heap, (time_ns, self._seq, callback, arg))

    def __len__(self) -> int:
        return len(self._heap)

    def next_time(self) -> float | None:
        """The time of the earliest queued event, or None if none is queued."""
        return self._heap[0][0] if self._heap else None

    def run(self, until_ns: float | None = None) -> None:
        """Process events in time order until none remain (or ``until_ns``)."""
        if self.progress is not None or self.step_end is not None:
            self._run_general(until_ns)
            return
        heap = self._heap
        pop = heapq.heappop
        processed = 0
        # Hot loop: locals only, one pop per event.
        while heap:
            if until_ns is not None and heap[0][0] > until_ns:
                break
            time_ns, _, callback, arg = pop(heap)
            self.now = time_ns
            callback(arg)
            processed += 1
        self.events_processed += processed

    def _run_general(self, until_ns: float | None) -> None:
        """``run()`` with the ``progress`` and ``step_end`` hooks (either may be None)."""
        heap, pop, progress, step_end = self._heap, heapq.heappop, self.progress, self.step_end
        mask = PROGRESS_EVERY - 1
        processed = self.events_processed
        try:
            while True:
                if self.step_pending and (not heap or heap[0][0] > self.now):
                    self.step_pending = False
                    step_end()  # type: ignore[misc]  # step_pending is only set with a step_end
                    continue
                if not heap or (until_ns is not None and heap[0][0] > until_ns):
                    break
                time_ns, _, callback, arg = pop(heap)
                self.now = time_ns
                callback(arg)
                processed += 1
                if progress is not None and not processed & mask:
                    progress(self.now, processed)
        finally:
            self.events_processed = processed
