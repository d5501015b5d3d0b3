"""The per-rank table printed in the terminal (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from astra_core.report.flops import llm_utilization
from astra_core.report.results import RunResult

_MAX_ROWS = 16


def _us(ns: float) -> str:
    return f"{ns / 1000:,.3f}"


def print_summary(result: RunResult, console: Console | None = None, title: str = "") -> None:
    """Print finish, compute, communication and exposed communication per rank (µs).

    Runs with many ranks show the first and last ranks and say how many are
    elided; identical rows are the rule in data-parallel runs.
    """
    console = console or Console()
    table = Table(title=title or f"astra — backend {result.backend}", title_justify="left")
    for column in ("rank", "finish (µs)", "compute (µs)", "comm (µs)", "exposed comm (µs)"):
        table.add_column(column, justify="right")
    ranks = result.ranks
    shown = ranks if len(ranks) <= _MAX_ROWS else ranks[: _MAX_ROWS // 2] + ranks[-_MAX_ROWS // 2 :]
    for i, r in enumerate(shown):
        if len(ranks) > _MAX_ROWS and i == _MAX_ROWS // 2:
            table.add_row("…", f"({len(ranks) - _MAX_ROWS} ranks not shown)", "", "", "")
        table.add_row(
            str(r.rank), _us(r.finish_ns), _us(r.compute_ns), _us(r.comm_ns), _us(r.exposed_comm_ns)
        )
    console.print(table)
    console.print(
        f"step time: [bold]{_us(result.step_ns)} µs[/bold] ({len(ranks)} NPUs, {result.messages:,} messages)"
    )
    llm = llm_utilization(result)
    if llm:
        console.print(
            f"LLM step: model FLOPs {llm['model_flops']:.3e}, hardware FLOPs "
            f"{llm['hardware_flops']:.3e} (recomputation included); "
            f"{llm['tflops_per_gpu']:.1f} TFLOP/s per GPU, MFU {llm['mfu']:.1%}, HFU {llm['hfu']:.1%}"
        )
    if result.symmetric:
        console.print(
            f"rank symmetry: {len(result.traces)} of {len(ranks)} ranks simulated, "
            "each standing for its class"
        )
