"""A live progress line for long runs: simulated time, the messages delivered, events
per second, ET nodes done and an estimate of the time left (rich).

:class:`RunProgress` is a context manager and an observer plugin, written
against the documented observer hooks alone (:mod:`astra_core.hookspecs`):
register it on the plugin manager a run uses and it draws each
``astra_run_progress`` report (a :class:`~astra_core.system.view.ProgressSample`).
Backends that keep their events in an :class:`~astra_core.events.EventQueue`
named ``events`` (analytical, flow) report every
:data:`~astra_core.events.PROGRESS_EVERY` events; garnetlike does the same
from its ps clock, and ns3 on each heartbeat of its worker while a step runs,
with a note when its simulated time stands still. Other backends report once,
at the end. The messages delivered are those of the run's simulated ranks
(sent so far; the fraction reaches 1 when the run ends). The ET nodes done
over those the simulated ranks have give the fraction of the run behind, and
the time left is estimated as elapsed x (1 / fraction - 1): a step's nodes
are not equally long, so the estimate is rough early on. The line is drawn
only when the console is a terminal and removed when the run ends
(``transient``), so redirected output stays clean. It fits the terminal's
width (rich reads it as ``shutil.get_terminal_size`` does, ``COLUMNS`` first),
dropping whole fields, least important first (:data:`FIELDS`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, cast

from rich.cells import cell_len
from rich.console import Console
from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TaskID
from rich.table import Column
from rich.text import Text

from astra_core.hookspecs import hookimpl
from astra_core.report.plots import time_unit
from astra_core.system.view import ProgressSample, RunView


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


#: The progress line's fields in the order shown, each with its rank: when the line is
#: wider than the terminal, the field ranked last goes first. The simulated time stays;
#: the time left and the backend's note (a stalled clock) are what a waiting user reads.
FIELDS = (
    ("label", 4),
    ("simulated", 0),
    ("messages", 6),
    ("events", 8),
    ("rate", 7),
    ("nodes", 3),
    ("elapsed", 5),
    ("eta", 1),
    ("note", 2),
)
_STYLES = {"label": "bold", "elapsed": "progress.elapsed", "note": "yellow"}


def fit_line(fields: Mapping[str, str], width: int) -> Text:
    """The non-empty ``fields`` (by :data:`FIELDS` name) in :data:`FIELDS` order, joined by
    spaces, in at most ``width`` terminal cells: taken by rank, each field that still fits
    (so the lowest ranked are the ones left out); the first is cut with an ellipsis if it
    alone is too wide."""
    chosen: set[str] = set()
    used = -1  # no space before the first field
    for name, _ in sorted((f for f in FIELDS if fields.get(f[0])), key=lambda f: f[1]):
        cells = 1 + cell_len(fields[name])
        if not chosen or used + cells <= width:
            chosen.add(name)
            used += cells
    kept = [name for name, _ in FIELDS if name in chosen]
    line = Text(" ").join(Text(fields[name], style=_STYLES.get(name, "")) for name in kept)
    line.truncate(max(width, 1), overflow="ellipsis")
    return line


class _FittedLine(ProgressColumn):
    """Every field of the progress line in one column, fitted to the console's width at
    each refresh (the spinner and its space take two cells)."""

    def __init__(self, console: Console):
        super().__init__(table_column=Column(no_wrap=True))
        self.console = console

    def render(self, task: Task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        fields = {
            "label": "simulating",
            **task.fields,
            "elapsed": str(timedelta(seconds=max(0, int(elapsed or 0)))),
        }
        return fit_line(fields, self.console.width - 2)


class RunProgress:
    """Progress display of one simulation on ``console`` (default: stderr).

    ``enabled`` defaults to whether the console is a terminal. ``updates``
    counts the progress reports received and ``last`` holds the latest
    (:class:`~astra_core.system.view.ProgressSample`; tests read both).
    """

    def __init__(self, console: Console | None = None, *, enabled: bool | None = None):
        self.console = console or Console(stderr=True)
        self.enabled = self.console.is_terminal if enabled is None else enabled
        self.updates = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._started = 0.0
        self.last: ProgressSample | None = None

    # -- context manager -------------------------------------------------------------
    def __enter__(self) -> RunProgress:
        if self.enabled:
            self._progress = Progress(
                SpinnerColumn(),
                _FittedLine(self.console),
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
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # -- observer hooks --------------------------------------------------------------
    @hookimpl
    def astra_run_started(self, run: RunView) -> None:
        self._started = time.perf_counter()

    @hookimpl
    def astra_run_progress(self, run: RunView, progress: ProgressSample) -> None:
        self.update(progress)

    def update(self, progress: ProgressSample) -> None:
        """Show ``progress``: simulated time, messages delivered, the event rate so far,
        ET nodes done, the time left and the backend's note."""
        self.updates += 1
        if self._progress is None:
            return
        self.last = progress
        wall = max(time.perf_counter() - self._started, 1e-9)
        done, total = progress.nodes_done, progress.nodes_total
        sent, delivered, events, note = progress.sent, progress.delivered, progress.events, progress.note
        eta = ""
        if total and 0 < done < total:
            eta = f"~{format_seconds(wall * (total / done - 1))} left"
        self._progress.update(
            cast(TaskID, self._task),  # added with self._progress
            simulated=f"t = {format_sim_time(progress.now_ns)}",
            messages=f"{delivered:,}/{sent:,} messages ({format_percent(delivered, sent)})" if sent else "",
            events=f"{events:,} events",
            rate=f"{events / wall:,.0f} events/s",
            nodes=f"{done:,}/{total:,} ET nodes" if total else "",
            eta=eta,
            note=note or "",
        )
