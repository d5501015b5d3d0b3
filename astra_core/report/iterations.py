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

__all__ = ["measure_iterations"]


def measure_iterations(result: RunResult, count: int) -> IterationTimes:
    """Each rank's iteration ends in ``result``, a run of traces repeated ``count``
    times. Raises AstraError if a simulated rank's records miss an iteration end (a
    run that finished always has them)."""
    timelines = {t.rank: t for t in result.traces}
    per_simulated: dict[int, tuple[float, ...]] = {}
    for rank, timeline in timelines.items():
        per_iteration = len(timeline.nodes) // count - 1
        ends = iteration_ends(timeline.records, iteration_end_positions(per_iteration, count))
        if any(e is None for e in ends):
            raise AstraError(f"rank {rank}: an iteration end is missing from its records")
        per_simulated[rank] = tuple(float(e) for e in ends if e is not None)
    stand_in = result.representative or list(range(len(result.ranks)))
    return IterationTimes(tuple(per_simulated[stand_in[r.rank]] for r in result.ranks))
