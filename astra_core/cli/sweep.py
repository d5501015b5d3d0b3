"""``astra sweep SPEC.yaml``: run a grid or list of design points (see astra_core.sweep)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from astra_core.cli.common import fail as _fail
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
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    help="run on Ray: alone, a local Ray instance; or a cluster address "
    "(auto, ray://host:10001). Put it after SPEC or write --ray=ADDRESS.",
)
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
    err = Console(stderr=True)
    try:
        parsed = load_spec(spec)
    except AstraError as exc:
        _fail(exc)
    progress = (
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
    state: dict[str, Any] = {"task": None, "failed": 0, "finished": 0}

    def on_start(to_run: int, skipped: int) -> None:
        where = (
            f"Ray ({ray_address})"
            if ray_address
            else ("this process" if workers == 1 else f"{workers or 'one per CPU'} worker processes")
        )
        console.print(f"{len(parsed.points)} points: {to_run} to run on {where}, {skipped} finished before")
        if progress is not None:
            progress.start()
            state["task"] = progress.add_task("points", total=to_run, failed="")

    def on_row(row: dict) -> None:
        state["finished"] += 1
        if row["status"] != "ok":
            state["failed"] += 1
        if progress is not None:
            failed = f"{state['failed']} failed" if state["failed"] else ""
            progress.update(state["task"], advance=1, failed=failed)

    try:
        outcome = run_sweep(
            parsed,
            output=output,
            workers=workers,
            fresh=fresh,
            ray=(True if ray_address == "local" else ray_address),
            on_start=on_start,
            on_row=on_row,
        )
    except AstraError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (pool.Interrupted)
        signum = getattr(exc, "signum", signal.SIGINT)
        if progress is not None:
            progress.stop()
        log = (Path(output).resolve() if output is not None else parsed.output) / LOG_NAME
        click.echo(
            f"error: sweep interrupted by {signal.Signals(signum).name}: "
            f"{state['finished']} points finished (kept in {log}; run again to resume)",
            err=True,
        )
        sys.exit(128 + signum)
    finally:
        if progress is not None:
            progress.stop()
    _print_table(console, parsed, outcome.frame)
    for path in outcome.files:
        console.print(f"wrote {path}")
    summary = outcome.failure_summary()
    if summary:
        click.echo(f"error: {summary}", err=True)
        sys.exit(1)


def _print_table(console: Console, spec, frame) -> None:
    table = Table(title=f"sweep {spec.source}", title_justify="left")
    columns = ["point", *spec.parameters, "status", spec.metric]
    for name in columns:
        table.add_column(name, justify="right" if name != "status" else "left")
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
