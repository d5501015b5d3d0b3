"""The last line of a run: where its wall time went, in figures a stopwatch agrees with.

:class:`Stopwatch` takes ``time.perf_counter()`` readings at the marks of a
command (the simulation starts, it ends, the outputs are written) and
:meth:`Stopwatch.line` prints each stretch and the wall time from the start of
the process, so that ``time astra run ...`` and the line tell one story: the
interpreter's start and the imports (``startup``), the simulation, and the
tables, plots and files after it (``report``).
"""

from __future__ import annotations

import math
import os
import time

#: Read when this module is imported (with the CLI, before any command runs): the start
#: of the process where the operating system does not say (:func:`process_started`).
_IMPORTED = time.perf_counter()


def process_started() -> float:
    """The ``time.perf_counter()`` reading at which this process started (s): from Linux's
    ``/proc/self/stat`` (field 22, clock ticks after boot, against ``CLOCK_BOOTTIME``;
    to 1/``SC_CLK_TCK`` s), else when this module was imported."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22; fields[0] is field 3
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started_s
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED
    now = time.perf_counter()
    return min(now - max(age, 0.0), _IMPORTED)


#: Hundredths within this of a whole one count as it: a difference of readings such as
#: 106.6 - 106.09 is 0.50999... and prints 0.51. Three parts each off by this cannot
#: push their sum a whole hundredth past the wall time.
_SLACK = 1e-6


def _down(seconds: float) -> str:
    return f"{math.floor(max(seconds, 0.0) * 100 + _SLACK) / 100:.2f}"


def _up(seconds: float) -> str:
    return f"{math.ceil(max(seconds, 0.0) * 100 - _SLACK) / 100:.2f}"


class Stopwatch:
    """Readings of ``time.perf_counter()`` (s) at a command's marks, from the process start."""

    def __init__(self, started: float | None = None):
        self.started = process_started() if started is None else started
        self.simulating: float | None = None
        self.simulated: float | None = None

    def start_simulation(self) -> None:
        """Mark the start of the simulation (inputs checked, nothing simulated yet)."""
        self.simulating = time.perf_counter()

    def end_simulation(self) -> None:
        """Mark the end of the simulation (its result in hand, nothing printed yet)."""
        self.simulated = time.perf_counter()

    def line(self, now: float | None = None) -> str:
        """``simulated in S s; report R s; startup U s; W s wall``: the simulation, what
        came after it up to ``now`` (default: this instant), what came before it since the
        process started, and all of it. The parts are rounded down and the wall time up
        (to 0.01 s), so the printed parts never add up past the printed wall time.
        Raises ValueError when a simulation mark is missing."""
        if self.simulating is None or self.simulated is None:
            raise ValueError("Stopwatch.line needs start_simulation() and end_simulation() first")
        now = time.perf_counter() if now is None else now
        simulate = self.simulated - self.simulating
        report = now - self.simulated
        startup = self.simulating - self.started
        wall = now - self.started
        return (
            f"simulated in {_down(simulate)} s; report {_down(report)} s; "
            f"startup {_down(startup)} s; {_up(wall)} s wall"
        )
