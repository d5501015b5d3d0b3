"""SimPy's Environment as the clock, driven by callbacks instead of processes.

The model's routers and links are state machines: each output port is woken
when something it waits for can have changed, and nothing runs per cycle.
A SimPy process per flit would cost several events per flit-hop (a Timeout
per stage and the process resumption); here a flit-hop costs about one
wake-up. Events are pushed with SimPy's own ``Environment.schedule`` and run by
``Environment.run``, so SimPy's ordering rule holds: events due at the same
time run in the order they were scheduled.

Wake-ups of output ports due at the same time share one SimPy event (a
*bucket*): in a clocked network most ports wake on the same cycle boundaries,
so the cost of an event (heap push and pop, SimPy's step) is paid once per
time step rather than once per port. A bucket runs its ports in the order
their wake-ups were requested, including ports woken for the same time while
it runs.

Time is an integer count of picoseconds: cycle times, link latencies and
serialization are exact sums, so "is this flit ready yet" never depends on
floating-point rounding. The backend API converts to ns at its edge.

The event objects here are SimPy events reduced to what
``Environment.step`` reads (``callbacks`` and ``_ok``): constructing a full
``simpy.Event`` per wake-up would cost a third of the model's time.
"""

from __future__ import annotations

from typing import Any, Callable

import simpy
from simpy.core import NORMAL

__all__ = ["INF", "NORMAL", "PS_PER_NS", "Call", "Clock", "Wake", "ns_to_ps"]

PS_PER_NS = 1000
#: "Never", for wake-up and free times.
INF = float("inf")


class Wake:
    """A triggered, successful event whose callbacks run when it is popped.

    ``callbacks`` is a list shared by every wake-up of one port (SimPy reads
    it and never mutates it)."""

    __slots__ = ("callbacks",)
    _ok = True

    def __init__(self, callbacks: list):
        self.callbacks = callbacks


class Call:
    """An event that runs ``fn(arg)``."""

    __slots__ = ("callbacks", "fn", "arg")
    _ok = True

    def __init__(self, fn: Callable[[Any], None], arg: Any):
        self.callbacks = _RUN_CALL
        self.fn = fn
        self.arg = arg


def _run_call(event: Call) -> None:
    event.fn(event.arg)


_RUN_CALL = [_run_call]


class Clock:
    """A SimPy Environment counting ps, with the two ways the model schedules work.

    ``buckets`` maps a time (ps) to the ports to wake then; each bucket is one
    SimPy event whose callbacks are :attr:`bucket_callbacks`.
    """

    def __init__(self) -> None:
        self.env = simpy.Environment(initial_time=0)
        self._schedule = self.env.schedule
        self.buckets: dict[int, list] = {}
        self.bucket_callbacks = [self._run_bucket]

    def wake(self, port, time_ps: int) -> None:
        """Call ``port.fire(time_ps)`` at ``time_ps`` (>= now), after the wake-ups already due then."""
        bucket = self.buckets.get(time_ps)
        if bucket is None:
            self.buckets[time_ps] = [port]
            self._schedule(Wake(self.bucket_callbacks), NORMAL, time_ps - self.env._now)
        else:
            bucket.append(port)

    def _run_bucket(self, _event) -> None:
        now = self.env._now
        ports = self.buckets[now]
        for port in ports:  # grows while it runs: zero-delay wake-ups join this time step
            port.fire(now)
        del self.buckets[now]

    @property
    def now_ps(self) -> int:
        return self.env.now

    def call_in(self, delay_ps: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``fn(arg)`` after ``delay_ps`` (an int >= 0)."""
        self._schedule(Call(fn, arg), NORMAL, delay_ps)

    def run(self) -> None:
        """Process events until none remain."""
        self.env.run()

    def run_until(self, time_ps: int) -> None:
        """Process events due before ``time_ps``; the clock then reads ``time_ps``."""
        if time_ps > self.env.now:
            self.env.run(until=time_ps)


def ns_to_ps(delay_ns: float) -> int:
    """A delay in ns as whole ps (rounded to nearest); raises ValueError if negative,
    infinite or NaN."""
    if not 0 <= delay_ns < INF:
        raise ValueError(f"cannot schedule with a delay of {delay_ns} ns (must be finite "
                         "and >= 0)")
    return int(round(delay_ns * PS_PER_NS))
