"""Giving up rank symmetry, out loud: what the full run will cost, and whether it fits.

A rank-symmetric attempt whose ranks part ways
(:class:`~astra_core.system.engine.TieOrderMatters`) is replaced by a run of
every rank. That run can be thousands of times larger than the attempt (an
8,192-GPU step simulated through 16 representatives), so before it starts
:func:`announce_fallback` says why and what it will take, one warning line on
stderr, and raises :class:`RunTooLarge` when its memory estimate exceeds what
the machine has available, instead of letting the kernel's OOM killer end the
process without a word.

The memory estimate is :data:`FULL_RUN_BYTES_PER_NODE` per ET node of every
rank plus what the process holds now; the time estimate scales the symmetric
attempt's own rate (wall seconds per ET node done) to every rank's nodes, when
the attempt did enough nodes to measure it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from astra_core.backend import wall_time_text
from astra_core.system.memory_guard import RunTooLarge, available_bytes, gib_text, resident_bytes

#: Memory a run without symmetry holds per ET node of all its ranks (engine state,
#: node records, matched messages, collective records): measured with
#: ``astra run --no-symmetry`` of the 128-GPU Llama-3-8B step
#: (``astra gen llm --model llama3-8b --tp 8 --dp 16 --micro-batch 1 --global-batch 64
#: --seq-len 8192 --sequence-parallel --zero 1 --gpu H100 --dims 8x16``), 333,824 ET
#: nodes: 141,720 KB peak against 49,168 KB with symmetry, 284 bytes a node.
FULL_RUN_BYTES_PER_NODE = 284
#: The symmetric attempt must have completed this many ET nodes for its rate to
#: project the full run's time.
MIN_MEASURED_NODES = 1000


class SymmetryFallbackWarning(UserWarning):
    """Rank symmetry was given up: every rank is simulated from here."""


@dataclass(frozen=True)
class FullRun:
    """What simulating every rank will take: ``ranks``, ``nodes`` (ET nodes of all
    ranks), ``memory_bytes`` (estimated peak) and ``wall_s`` (None: not measurable)."""

    ranks: int
    nodes: int
    memory_bytes: int
    wall_s: float | None


def full_run(ranks: int, nodes: int, attempt_nodes_done: int, attempt_wall_s: float) -> FullRun:
    """The :class:`FullRun` estimate of ``nodes`` ET nodes on ``ranks`` ranks, from the
    symmetric attempt's ``attempt_nodes_done`` nodes in ``attempt_wall_s`` seconds."""
    memory = (resident_bytes() or 0) + FULL_RUN_BYTES_PER_NODE * nodes
    wall = None
    if attempt_nodes_done >= MIN_MEASURED_NODES and attempt_wall_s > 0:
        wall = attempt_wall_s / attempt_nodes_done * nodes
    return FullRun(ranks, nodes, memory, wall)


def announce_fallback(reason: str, run: FullRun) -> None:
    """Warn (:class:`SymmetryFallbackWarning`, one line) that every rank is simulated
    from now on, why, and what it will take. Raises :class:`RunTooLarge` (one line)
    when ``run.memory_bytes`` exceeds :func:`available_bytes` (unknown: never refused)."""
    available = available_bytes()
    need = gib_text(run.memory_bytes)
    if available is not None and run.memory_bytes > available:
        raise RunTooLarge(
            f"rank symmetry cannot hold ({reason}), and simulating all {run.ranks:,} ranks "
            f"({run.nodes:,} ET nodes) needs about {need} of memory, more than the "
            f"{gib_text(available)} available; simulate fewer ranks, or change what makes the ranks "
            "of a class part ways (ties between same-time events)"
        )
    took = f", about {wall_time_text(run.wall_s)}" if run.wall_s is not None else ""
    warnings.warn(
        f"rank symmetry given up ({reason}): simulating all {run.ranks:,} ranks "
        f"({run.nodes:,} ET nodes; about {need}{took})",
        SymmetryFallbackWarning,
        stacklevel=2,
    )
