"""``astra sweep SPEC.yaml``: run a grid or list of design points (see astra_core.sweep)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from astra_core.cli.common import fail as _fail
from astra_core.cli.common import ray_option
from astra_core.errors import AstraError

_MAX_ROWS = 40


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False),
    help="results directory (default: the spec's 'output', else <spec name>-results beside the spec)",
)
@click.option(
    "--workers",
    "-j",
    type=click.IntRange(min=1),
    help="local worker processes (default: one per CPU; 1 runs in this process)",
)
@ray_option(" Put it after SPEC or write --ray=ADDRESS.")
@click.option("--fresh", is_flag=True, help="ignore results of earlier runs of this sweep")
def sweep(spec, output, workers, ray_address, fresh) -> None:
    """Run every design point of SPEC (YAML) and collect one results table.

    Points already finished in the output directory are skipped (a sweep
    resumes where it stopped); a point that fails is recorded with its error
    and the others go on. Writes results.parquet, results.csv and a plot of
    the swept metric. Exits 1 if any point failed (after writing the table),
    130 / 143 on Ctrl-C / SIGTERM (finished points are kept).
    """
    from astra_core.sweep import load_spec, run_sweep
    from astra_core.sweep.table import LOG_NAME

    console = Console()
    try:
        parsed = load_spec(spec)
    except AstraError as exc:
        _fail(exc)
    shown = _Progress(console, Console(stderr=True), len(parsed.points), _where(ray_address, workers))
    try:
        outcome = run_sweep(
            parsed,
            output=output,
            workers=workers,
            fresh=fresh,
            ray=(True if ray_address == "local" else ray_address),
            on_start=shown.on_start,
            on_row=shown.on_row,
        )
    except AstraError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (pool.Interrupted)
        shown.stop()
        log = (Path(output).resolve() if output is not None else parsed.output) / LOG_NAME
        _exit_interrupted(getattr(exc, "signum", signal.SIGINT), shown.finished, log)
    finally:
        shown.stop()
    _print_table(console, parsed, outcome.frame)
    for path in outcome.files:
        console.print(f"wrote {path}")
    summary = outcome.failure_summary()
    if summary:
        click.echo(f"error: {summary}", err=True)
        sys.exit(1)


def _where(ray_address: str | None, workers: int | None) -> str:
    """Where the points run, as the first line says."""
    if ray_address:
        return f"Ray ({ray_address})"
    return "this process" if workers == 1 else f"{workers or 'one per CPU'} worker processes"


class _Progress:
    """The sweep's first line, then a progress bar on stderr while it is a terminal
    (``run_sweep``'s ``on_start`` and ``on_row``), counting finished and failed points."""

    def __init__(self, console: Console, err: Console, points: int, where: str):
        self.console = console
        self.points = points
        self.where = where
        self.finished = 0
        self.failed = 0
        self.task: Any = None
        self.bar = (
            Progress(
                TextColumn("[bold]sweep"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]}"),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            )
            if err.is_terminal
            else None
        )

    def on_start(self, to_run: int, skipped: int) -> None:
        self.console.print(
            f"{self.points} points: {to_run} to run on {self.where}, {skipped} finished before"
        )
        if self.bar is not None:
            self.bar.start()
            self.task = self.bar.add_task("points", total=to_run, failed="")

    def on_row(self, row: dict) -> None:
        self.finished += 1
        if row["status"] != "ok":
            self.failed += 1
        if self.bar is not None:
            failed = f"{self.failed} failed" if self.failed else ""
            self.bar.update(self.task, advance=1, failed=failed)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _exit_interrupted(signum: int, finished: int, log: Path) -> NoReturn:
    """Say how far an interrupted sweep got, and exit 128 + the signal number."""
    click.echo(
        f"error: sweep interrupted by {signal.Signals(signum).name}: "
        f"{finished} points finished (kept in {log}; run again to resume)",
        err=True,
    )
    sys.exit(128 + signum)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _print_table(console: Console, spec, frame) -> None:
    from astra_core.sweep.axes import parameter_label

    table = Table(title=f"sweep {spec.source}", title_justify="left")
    columns = ["point", *spec.parameters, "status", spec.metric]
    for name in columns:
        header = name
        if name in spec.parameters and name in frame:  # its unit, as the plot's axis says it
            header = parameter_label(name, all(_is_number(v) for v in frame[name]))
        table.add_column(header, justify="right" if name != "status" else "left")
    shown = frame if len(frame) <= _MAX_ROWS else frame.head(_MAX_ROWS)
    for _, row in shown.iterrows():
        cells = [str(row[c]) if c in row else "" for c in columns]
        if row["status"] != "ok":
            cells[-1] = str(row["error"])[:60]
        table.add_row(*cells)
    if len(frame) > _MAX_ROWS:
        table.add_row(
            "…", f"({len(frame) - _MAX_ROWS} more in the results table)", *[""] * (len(columns) - 2)
        )
    console.print(table)
