"""The per-rank tables printed in the terminal (rich).

:func:`rank_table`: finish, GPU compute, communication in flight and finish −
compute (upstream ASTRA-sim's "exposed communication": waits and idle time
included) per rank (µs).
:func:`breakdown_table`: the six disjoint parts of
:mod:`astra_core.report.breakdown` per rank and their mean over all ranks,
which is what ``breakdown.png``'s legend prints.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from astra_core.report.breakdown import (
    PART_LABELS,
    PARTS,
    breakdown_unit,
    breakdowns,
    format_time,
    format_us,
    mean_parts,
)
from astra_core.results import RunResult
from astra_core.workload.generators.llm_memory import memory_line

_MAX_ROWS = 16
_us = format_us

RANK_HEADERS = (
    "rank",
    "finish (µs)",
    "compute (µs)",
    "comm in flight (µs)",
    "finish − compute (µs)",
)


def _shown(items: Sequence) -> list:
    """All rows, or the first and last ``_MAX_ROWS / 2`` with None between them."""
    if len(items) <= _MAX_ROWS:
        return list(items)
    return [*items[: _MAX_ROWS // 2], None, *items[-_MAX_ROWS // 2 :]]


def rank_table(result: RunResult, title: str = "") -> Table:
    """Per rank: finish, GPU compute, comm in flight, finish − compute (µs; see
    :class:`~astra_core.results.RankResult`)."""
    table = Table(title=title or f"astra — backend {result.backend}", title_justify="left")
    for column in RANK_HEADERS:
        table.add_column(column, justify="right")
    ranks = result.ranks
    for r in _shown(ranks):
        if r is None:
            table.add_row("…", f"({len(ranks) - _MAX_ROWS} ranks not shown)", *[""] * (len(RANK_HEADERS) - 2))
            continue
        table.add_row(
            str(r.rank),
            _us(r.finish_ns),
            _us(r.compute_ns),
            _us(r.comm_ns),
            _us(r.exposed_comm_ns),
        )
    return table


def breakdown_table(result: RunResult) -> Table:
    """Per rank the six disjoint parts (adding up to the finish time), and a last row
    ``mean`` over every rank: the numbers ``breakdown.png``'s legend shows. In the unit
    of :func:`~astra_core.report.breakdown.breakdown_unit`."""
    parts = breakdowns(result)
    divisor, unit = breakdown_unit(result.step_ns)
    table = Table(
        title=f"where the time goes ({unit}; the six parts of a rank add up to its finish time)",
        title_justify="left",
    )
    table.add_column("rank", justify="right")
    for part in PARTS:
        table.add_column(PART_LABELS[part], justify="right")
    for b in _shown(parts):
        if b is None:
            table.add_row("…", *[""] * len(PARTS))
            continue
        table.add_row(str(b.rank), *(format_time(getattr(b, part), divisor) for part in PARTS))
    mean = mean_parts(parts)
    table.add_row("mean", *(format_time(mean[part], divisor) for part in PARTS))
    return table


def print_summary(result: RunResult, console: Console | None = None, title: str = "") -> None:
    """Print :func:`rank_table`, :func:`breakdown_table` (when the run kept its traces)
    and the step's totals.

    Runs with many ranks show the first and last ranks and say how many are
    elided; identical rows are the rule in data-parallel runs.
    """
    console = console or Console()
    ranks = result.ranks
    console.print(rank_table(result, title))
    if result.traces:
        console.print(breakdown_table(result))
    console.print(
        f"step time: [bold]{_us(result.step_ns)} µs[/bold] ({len(ranks)} NPUs, {result.messages:,} messages)"
    )
    llm = result.llm()
    if llm:
        console.print(
            f"LLM step: model FLOPs {llm['model_flops']:.3e}, hardware FLOPs "
            f"{llm['hardware_flops']:.3e} (recomputation included); "
            f"{llm['tflops_per_gpu']:.1f} TFLOP/s per GPU, MFU {llm['mfu']:.1%}, HFU {llm['hfu']:.1%}"
        )
        if "memory_bytes" in llm:
            console.print(memory_line(llm["memory_bytes"], llm["hbm_bytes"]))
    if result.symmetric:
        folded = (
            f"; {result.folded:,} NCCL collectives whose members play different parts (a tree's root and leaves) "
            "folded: each ends at NCCL's predicted time on every rank (checked), its messages replayed"
            if result.folded
            else ""
        )
        console.print(
            f"rank symmetry: {len(result.traces)} of {len(ranks)} ranks simulated, "
            f"each standing for its class{folded}"
        )
    elif result.symmetry_off and len(ranks) > 1:
        console.print(f"rank symmetry: off, every rank simulated ({result.symmetry_off})")
