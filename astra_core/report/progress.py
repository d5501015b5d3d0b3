"""A live progress line for long runs: simulated time, events per second, ET nodes done
and an estimate of the time left (rich).

:class:`RunProgress` is a context manager and an observer plugin: register it
on the plugin manager a run uses and it attaches to the run through the
``astra_run_started`` hook. Backends that keep their events in an
:class:`~astra_core.events.EventQueue` named ``events`` report every
:data:`~astra_core.events.PROGRESS_EVERY` events; other backends show the
elapsed time only. The ET nodes done over those the simulated ranks have give
the fraction of the run behind, and the time left is estimated as elapsed x
(1 / fraction - 1): a step's nodes are not equally long, so the estimate is
rough early on. The line is drawn only when the console is a terminal and
removed when the run ends (``transient``), so redirected output stays clean.
"""

from __future__ import annotations

import time
from typing import Any, cast

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from astra_core.backend import event_queue
from astra_core.events import EventQueue
from astra_core.hookspecs import hookimpl
from astra_core.report.plots import time_unit


def format_seconds(seconds: float) -> str:
    """A wall-clock duration as ``42 s``, ``3 min 20 s`` or ``1 h 05 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def format_sim_time(ns: float) -> str:
    divisor, unit = time_unit(ns)
    return f"{ns / divisor:,.3f} {unit}"


class RunProgress:
    """Progress display of one simulation on ``console`` (default: stderr).

    ``enabled`` defaults to whether the console is a terminal. ``updates``
    counts the progress reports received (tests use it).
    """

    def __init__(self, console: Console | None = None, *, enabled: bool | None = None):
        self.console = console or Console(stderr=True)
        self.enabled = self.console.is_terminal if enabled is None else enabled
        self.updates = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._queue: EventQueue | None = None
        self._started = 0.0
        self._first_events = 0
        self._engines: list[Any] = []
        self._total_nodes = 0

    # -- context manager -------------------------------------------------------------
    def __enter__(self) -> RunProgress:
        if self.enabled:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]simulating"),
                TextColumn("{task.fields[simulated]}"),
                TextColumn("{task.fields[events]}"),
                TextColumn("{task.fields[rate]}"),
                TextColumn("{task.fields[nodes]}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[eta]}"),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(
                "run", total=None, simulated="t = 0 ns", events="", rate="", nodes="", eta=""
            )
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._queue is not None:
            self._queue.progress = None
            self._queue = None
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # -- observer hooks --------------------------------------------------------------
    @hookimpl
    def astra_run_started(self, run) -> None:
        self._engines = list(run.engines)
        self._total_nodes = sum(len(engine.graph) for engine in self._engines)
        queue = event_queue(run.backend)
        if queue is not None and self._progress is not None:
            self._queue = queue
            self._first_events = queue.events_processed
            queue.progress = self.update
        self._started = time.perf_counter()

    @hookimpl
    def astra_run_finished(self, run, report) -> None:
        if self._queue is not None:
            self.update(self._queue.now, self._queue.events_processed)
            self._queue.progress = None
            self._queue = None

    # -- reports -----------------------------------------------------------------------
    def update(self, now_ns: float, events_processed: int) -> None:
        """Show simulated time ``now_ns`` and the event rate so far."""
        self.updates += 1
        if self._progress is None:
            return
        events = events_processed - self._first_events
        wall = max(time.perf_counter() - self._started, 1e-9)
        done, total = self.nodes_done()
        eta = ""
        if total and 0 < done < total:
            eta = f"~{format_seconds(wall * (total / done - 1))} left"
        self._progress.update(
            cast(TaskID, self._task),  # added with self._progress
            simulated=f"t = {format_sim_time(now_ns)}",
            events=f"{events:,} events",
            rate=f"{events / wall:,.0f} events/s",
            nodes=f"{done:,}/{total:,} ET nodes" if total else "",
            eta=eta,
        )

    def nodes_done(self) -> tuple[int, int]:
        """(ET nodes completed, ET nodes) over the simulated ranks."""
        return sum(engine.done for engine in self._engines), self._total_nodes
