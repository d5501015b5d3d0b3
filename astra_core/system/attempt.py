"""One attempt at a run: the backend, the message matcher and the engines that run it.

A run is first attempted with rank symmetry where that is exact (one engine per
class of identical ranks, :mod:`astra_core.system.symmetry`); if the ranks of a
class part ways (:class:`~astra_core.system.engine.TieOrderMatters`) the
:class:`~astra_core.system.simulation.Simulation` replaces the attempt with one
that runs every rank on a fresh backend. The deadlock and unreceived-send
reports (:mod:`astra_core.system.wait_report`) read the attempt that ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from astra_core.system.engine import EngineListener, RankEngine
from astra_core.system.memory_guard import check_memory_building
from astra_core.system.p2p import MessageMatcher, MirroredMatcher

#: Engines built (or started) between two checks of the memory left.
GUARD_EVERY_ENGINES = 64

if TYPE_CHECKING:
    from astra_core.system.context import RunContext
    from astra_core.system.symmetry import Symmetry


@dataclass(frozen=True)
class RunAttempt:
    """``engines`` run ``context``'s ranks on ``backend`` through ``matcher``; under
    ``symmetry`` (None: every rank has an engine) one engine per class of ranks."""

    context: RunContext
    backend: Any
    matcher: MessageMatcher
    symmetry: Symmetry | None
    engines: list[RankEngine]


def build_attempt(
    context: RunContext, backend: Any, symmetry: Symmetry | None, listener: EngineListener
) -> RunAttempt:
    """The matcher and one engine per rank, or per class representative under
    ``symmetry``; the engines report to ``listener``."""
    npus = context.npus_count
    if symmetry is not None:
        # Representatives stand for their classes (astra_core.system.symmetry).
        matcher: MessageMatcher = MirroredMatcher(backend, symmetry, npus)
        ranks: Sequence[int] = symmetry.representatives()
    else:
        matcher = MessageMatcher(backend, npus)
        ranks = range(npus)
    symmetric = symmetry is not None
    engines = []
    for r in ranks:
        engines.append(
            RankEngine(r, context.graphs[r], context, backend, matcher, listener, symmetric=symmetric)
        )
        if len(engines) % GUARD_EVERY_ENGINES == 0:
            check_memory_building(len(ranks))  # thousands of engines can outgrow the machine
    return RunAttempt(context, backend, matcher, symmetry, engines)
