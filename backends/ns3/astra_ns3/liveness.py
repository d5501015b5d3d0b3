"""Reading the ns-3 worker's heartbeats: advancing, heavy work, livelock or stuck.

A busy worker beats every ``ASTRA_NS3_BEAT_S`` (:mod:`astra_ns3.worker`).
Inside the C++ event loop a beat carries a :class:`Beat`: the simulated time
(``astra_ns3_now``, which counts any time the model skipped ahead), the
events ns-3 has executed and the messages started and completed in the
fabric. :class:`Watchdog` tells apart, from consecutive beats:

* **advancing**: the simulated time moves;
* **heavy work at one instant**: the time stands still but messages complete
  (or start): thousands of messages ending at one instant, each handled in
  turn. This is progress: the watchdog keeps waiting and says so;
* **livelock**: events keep running at one instant and no message starts or
  completes (events re-firing at the same time forever, e.g. a timer that
  rounds to 0 ps and re-arms itself);
* **stuck in one event**: beats arrive but neither the time nor the event
  count moves (a loop inside one event handler).

Outside the event loop (loading the model, setting up the fabric, starting a
step's messages, collecting results) a beat is ``("busy", n)`` with n
counting up: Python work in the worker, which counts as progress. No beat at
all means the worker is stopped or wedged.

Livelock, stuck and silent last ``limit_s`` wall seconds before
:meth:`Watchdog.expired` is true; the caller then kills the worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple


class Beat(NamedTuple):
    """One heartbeat from inside the event loop (all counts of the current fabric)."""

    now_ps: int  #: simulated time, ps (astra_ns3_now)
    events: int  #: events ns-3 has executed
    started: int  #: messages started
    completed: int  #: messages completed (taken by the caller or waiting)


#: Watchdog states (``Watchdog.state``).
ADVANCING, HEAVY, LIVELOCK, STUCK, BUSY, SILENT = "advancing", "heavy", "livelock", "stuck", "busy", "silent"


class Watchdog:
    """Decides from beats whether a busy worker makes progress (module docstring).

    ``limit_s``: wall seconds without progress before :meth:`expired`;
    ``clock``: wall seconds (monotonic; tests pass a fake one).
    """

    def __init__(self, limit_s: float, clock: Callable[[], float] = time.monotonic):
        self.limit_s = limit_s
        self.clock = clock
        now = clock()
        #: Wall time of the last progress (time, messages or Python work moved).
        self.progress_at = now
        #: The latest beat from inside the event loop, or None.
        self.last: Beat | None = None
        #: Beats received (of either kind).
        self.beats = 0
        self.state = SILENT
        # The current instant: since when (wall) the simulated time stands at last.now_ps,
        # and the events and completions counted when it began.
        self._instant_at = now
        self._instant_events = 0
        self._instant_completed = 0
        self._busy_mark: object = None
        self._last_beat_at = now

    def beat(self, mark: tuple) -> None:
        """Take one heartbeat mark: ``("run", now_ps, events, started, completed)`` or
        ``("busy", n)``."""
        now = self.clock()
        self.beats += 1
        self._last_beat_at = now
        if mark[0] != "run":
            if mark != self._busy_mark:
                self._busy_mark = mark
                self.progress_at = now
            self.state = BUSY
            return
        beat = Beat(*mark[1:5])
        last, self.last = self.last, beat
        if last is None or beat.now_ps != last.now_ps or beat.events < last.events:
            # A new instant (or a new fabric: its counts start again).
            self.progress_at = self._instant_at = now
            self._instant_events, self._instant_completed = beat.events, beat.completed
            self.state = ADVANCING
        elif beat.completed != last.completed or beat.started != last.started:
            self.progress_at = now
            self.state = HEAVY
        elif beat.events != last.events:
            self.state = LIVELOCK
        else:
            self.state = STUCK

    def left_s(self) -> float:
        """Wall seconds until :meth:`expired` (may be negative)."""
        return self.limit_s - (self.clock() - self.progress_at)

    def expired(self) -> bool:
        """No progress for ``limit_s`` wall seconds."""
        return self.left_s() <= 0

    def instant_s(self) -> float:
        """Wall seconds the simulated time has stood at its current value."""
        return self.clock() - self._instant_at

    def instant_events(self) -> int:
        """Events executed at the current instant so far."""
        return self.last.events - self._instant_events if self.last else 0

    def instant_completed(self) -> int:
        """Messages completed at the current instant so far."""
        return self.last.completed - self._instant_completed if self.last else 0

    def silent_s(self) -> float:
        """Wall seconds since the last beat."""
        return self.clock() - self._last_beat_at

    def note(self) -> str:
        """A few words for the progress line while the time stands still ('' otherwise)."""
        if self.last is None or self.state not in (HEAVY, LIVELOCK, STUCK):
            return ""
        seconds = self.instant_s()
        if seconds < 1:
            return ""
        what = {
            HEAVY: f"heavy instant: {self.instant_completed():,} messages completed at it",
            LIVELOCK: "no message progress at it",
            STUCK: "inside one event",
        }[self.state]
        return f"t stands still for {seconds:.0f} s, {self.instant_events():,} events at it; {what}"

    def diagnosis(self, offset_ns: float = 0.0) -> str:
        """Why the worker made no progress, in one clause (for the error); the
        fabric's clock starts at ``offset_ns`` of the caller's."""
        last = self.last
        if last is not None:
            t = f"t = {offset_ns + last.now_ps / 1000:.3f} ns"
        if self.state == LIVELOCK and last is not None:
            return (
                f"livelock at {t}: {self.instant_events():,} events ran at "
                f"that instant and no message started or completed ({last.started:,} messages "
                f"started, {last.completed:,} completed in this fabric)"
            )
        if self.state == STUCK and last is not None:
            return f"it is busy inside one event at {t} (no event completed; {last.events:,} events so far)"
        return "it answers nothing"
