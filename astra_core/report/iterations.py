"""When each iteration of a run of ``--iterations N`` ended, rank by rank.

The iteration end nodes (:mod:`astra_core.workload.iterations`) sit at known
positions of every rank's repeated trace; their finishing times, read from the
simulated ranks' node records (a representative's for the ranks of its class),
are :class:`~astra_core.results.IterationTimes`.
"""

from __future__ import annotations

from astra_core.errors import AstraError
from astra_core.results import IterationTimes, RunResult
from astra_core.workload.iterations import iteration_end_positions, iteration_ends

__all__ = ["ends_on_rank", "measure_iterations", "timelines_by_rank"]


def timelines_by_rank(result: RunResult) -> list:
    """Per rank, the node records that stand for it: its own, or its class representative's."""
    own = {t.rank: t for t in result.traces}
    stand_in = result.representative or list(range(len(result.ranks)))
    return [own[stand_in[r.rank]] for r in result.ranks]


def ends_on_rank(timeline, per_iteration: int, count: int) -> tuple[float, ...]:
    """When each of ``count`` iterations ended in ``timeline`` (a rank repeated from
    ``per_iteration`` nodes). Raises AstraError if its records miss an iteration end
    (a run that finished always has them)."""
    ends = iteration_ends(timeline.records, iteration_end_positions(per_iteration, count))
    if any(e is None for e in ends):
        raise AstraError(f"rank {timeline.rank}: an iteration end is missing from its records")
    return tuple(float(e) for e in ends if e is not None)


def measure_iterations(result: RunResult, count: int) -> IterationTimes:
    """Each rank's iteration ends in ``result``, a run of traces repeated ``count``
    times (:func:`ends_on_rank`, once per simulated rank)."""
    per_simulated = {t.rank: ends_on_rank(t, len(t.nodes) // count - 1, count) for t in result.traces}
    return IterationTimes(tuple(per_simulated[t.rank] for t in timelines_by_rank(result)))
