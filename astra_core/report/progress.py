"""A live progress line for long runs: simulated time, the messages delivered, events
per second, ET nodes done and an estimate of the time left (rich).

:class:`RunProgress` is a context manager and an observer plugin: register it
on the plugin manager a run uses and it attaches to the run through the
``astra_run_started`` hook, and installs its :meth:`RunProgress.update` as the
backend's progress hook (:func:`astra_core.backend.set_progress`, a
:class:`~astra_core.events.ProgressHook`): backends that keep their events in
an :class:`~astra_core.events.EventQueue` named ``events`` (analytical, flow)
report every :data:`~astra_core.events.PROGRESS_EVERY` events; garnetlike
does the same from its ps clock, and ns3 on each heartbeat of its worker
while a step runs, with a note when its simulated time stands still. Other
backends show the elapsed time only. The messages delivered are those of the run's matcher (sent so
far; the fraction reaches 1 when the run ends). The ET nodes done over those
the simulated ranks have give the fraction of the run behind, and the time
left is estimated as elapsed x (1 / fraction - 1): a step's nodes are not
equally long, so the estimate is rough early on. The line is drawn only when
the console is a terminal and removed when the run ends (``transient``), so
redirected output stays clean.
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple, cast

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from astra_core.backend import report_progress, set_progress
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


def format_percent(part: int, whole: int) -> str:
    """``part / whole`` as a percentage rounded down to 0.1 %, so that only a whole
    reads ``100.0%`` (``99.9%`` for 1,835,776 of 1,836,032)."""
    return f"{math.floor(1000 * part / whole) / 10:.1f}%"


def format_sim_time(ns: float) -> str:
    divisor, unit = time_unit(ns)
    return f"{ns / divisor:,.3f} {unit}"


class ProgressSample(NamedTuple):
    """One progress report as the line shows it."""

    now_ns: float  #: simulated time, ns
    events: int  #: events the backend executed since the run started
    delivered: int  #: messages delivered so far
    sent: int  #: messages sent so far
    note: str  #: what the backend says while its time stands still ('' mostly)

    @property
    def delivered_fraction(self) -> float:
        """Messages delivered over messages sent (1 before the first send)."""
        return self.delivered / self.sent if self.sent else 1.0


class RunProgress:
    """Progress display of one simulation on ``console`` (default: stderr).

    ``enabled`` defaults to whether the console is a terminal. ``updates``
    counts the progress reports received and ``last`` holds the latest
    (:class:`ProgressSample`; tests read both).
    """

    def __init__(self, console: Console | None = None, *, enabled: bool | None = None):
        self.console = console or Console(stderr=True)
        self.enabled = self.console.is_terminal if enabled is None else enabled
        self.updates = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._backend: Any = None  # the backend the hook is attached to
        self._started = 0.0
        self._engines: list[Any] = []
        self._total_nodes = 0
        self._run: Any = None
        self.last: ProgressSample | None = None

    # -- context manager -------------------------------------------------------------
    def __enter__(self) -> RunProgress:
        if self.enabled:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]simulating"),
                TextColumn("{task.fields[simulated]}"),
                TextColumn("{task.fields[messages]}"),
                TextColumn("{task.fields[events]}"),
                TextColumn("{task.fields[rate]}"),
                TextColumn("{task.fields[nodes]}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[eta]}"),
                TextColumn("{task.fields[note]}"),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(
                "run",
                total=None,
                simulated="t = 0 ns",
                messages="",
                events="",
                rate="",
                nodes="",
                eta="",
                note="",
            )
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._detach()
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _detach(self) -> None:
        if self._backend is not None:
            set_progress(self._backend, None)
            self._backend = None

    # -- observer hooks --------------------------------------------------------------
    @hookimpl
    def astra_run_started(self, run) -> None:
        self._run = run
        self._engines = list(run.engines)
        self._total_nodes = sum(len(engine.graph) for engine in self._engines)
        if self._progress is not None and set_progress(run.backend, self.update):
            self._backend = run.backend
        self._started = time.perf_counter()

    @hookimpl
    def astra_run_finished(self, run, report) -> None:
        if self._backend is not None:
            # the run may have moved to a fresh backend (a symmetric run's fall-back)
            self._backend = run.backend
            report_progress(run.backend)
            self._detach()

    # -- reports -----------------------------------------------------------------------
    def update(self, now_ns: float, events_processed: int, note: str = "") -> None:
        """Show simulated time ``now_ns`` (ns), the messages delivered, the event rate so
        far and ``note`` (a :class:`~astra_core.events.ProgressHook`)."""
        self.updates += 1
        if self._progress is None:
            return
        events = events_processed
        sent, delivered = self.messages()
        self.last = ProgressSample(now_ns, events, delivered, sent, note)
        wall = max(time.perf_counter() - self._started, 1e-9)
        done, total = self.nodes_done()
        eta = ""
        if total and 0 < done < total:
            eta = f"~{format_seconds(wall * (total / done - 1))} left"
        self._progress.update(
            cast(TaskID, self._task),  # added with self._progress
            simulated=f"t = {format_sim_time(now_ns)}",
            messages=f"{delivered:,}/{sent:,} messages ({format_percent(delivered, sent)})" if sent else "",
            events=f"{events:,} events",
            rate=f"{events / wall:,.0f} events/s",
            nodes=f"{done:,}/{total:,} ET nodes" if total else "",
            eta=eta,
            note=f"[yellow]{note}" if note else "",
        )

    def messages(self) -> tuple[int, int]:
        """(messages sent, messages delivered) so far by the run's matcher ((0, 0) before
        the run starts)."""
        matcher = getattr(self._run, "matcher", None)
        if matcher is None:
            return 0, 0
        return matcher.messages, matcher.delivered

    def nodes_done(self) -> tuple[int, int]:
        """(ET nodes completed, ET nodes) over the simulated ranks."""
        return sum(engine.done for engine in self._engines), self._total_nodes
