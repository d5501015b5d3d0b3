"""The breakdown of a rank costs the same few operations however many intervals its
messages were in flight in, and the plots compute only the ranks they draw.

A rank of a full-rank LLM run has tens of thousands of in-flight intervals; walking
them one at a time in Python made the breakdown table take 31 of a 39 s run. Time is
not measured here (the machine is shared): the Python calls are counted.
"""

from __future__ import annotations

import sys
from array import array
from types import SimpleNamespace

import numpy as np
import pytest

from astra_core import interval_sets
from astra_core.report import breakdown, plots
from astra_core.results import RankResult, RankTimeline, RunResult
from astra_core.workload.chakra_types import COMM_COLL, COMM_RECV, COMP

NODES = [
    SimpleNamespace(type=COMP, is_cpu_op=False),
    SimpleNamespace(type=COMM_COLL, is_cpu_op=False),
    SimpleNamespace(type=COMM_RECV, is_cpu_op=False),
]
FINISH = 4_000_000.0


def _trace(messages: int, rank: int = 0) -> RankTimeline:
    """Compute [0, 1 ms), a collective open [1, 3 ms), a receive open [0, 4 ms), and
    ``messages`` intervals of 100 ns in flight, one every 1000 ns from t = 500 ns."""
    flight = array("d")
    for i in range(messages):
        flight.extend((500.0 + 1000 * i, 600.0 + 1000 * i))
    records = [(0, 0.0, 1e6), (1, 1e6, 3e6), (2, 0.0, FINISH)]
    return RankTimeline(rank, records, NODES, flight)


def _calls(function, *args) -> int:
    """How many Python and C functions ``function(*args)`` calls."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        function(*args)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize("function", [breakdown.rank_breakdown, breakdown.rank_activity])
def test_a_ranks_breakdown_calls_as_many_functions_for_4000_intervals_as_for_40(function):
    function(_trace(4), FINISH)  # first-use work (imports, caches) is not the rank's
    assert _calls(function, _trace(4000), FINISH) == _calls(function, _trace(40), FINISH)


def test_breakdown_of_many_intervals_is_the_closed_form():
    # 4000 intervals of 100 ns, one per µs: 1000 under the compute [0, 1 ms), 2000 in the
    # collective [1, 3 ms), 1000 under the receive alone [3, 4 ms)
    b = breakdown.rank_breakdown(_trace(4000), FINISH)
    assert b.to_dict() == {
        "rank": 0,
        "finish_ns": FINISH,
        "compute_only_ns": 1e6 - 1000 * 100,
        "overlapped_comm_ns": 1000 * 100,
        "comm_only_ns": 3000 * 100,
        "collective_wait_ns": 2e6 - 2000 * 100,
        "p2p_wait_ns": 1e6 - 1000 * 100,
        "idle_ns": 0.0,
    }
    act = breakdown.rank_activity(_trace(4000), FINISH)
    assert interval_sets.length(act.collective_wait) == b.collective_wait_ns
    assert interval_sets.length(act.p2p_wait) == b.p2p_wait_ns
    assert interval_sets.length(act.waiting) == FINISH - 4000 * 100  # the receive is open throughout


def _result(ranks: int) -> RunResult:
    traces = [_trace(10, rank) for rank in range(ranks)]
    rows = [RankResult(r, FINISH, 1e6, 0.0, 1000.0, FINISH - 1e6) for r in range(ranks)]
    return RunResult(backend="analytical", ranks=rows, traces=traces)


def test_timeline_png_computes_the_activity_of_the_ranks_it_draws_only(monkeypatch):
    computed = []
    real = breakdown.rank_activity

    def counting(trace, finish_ns):
        computed.append(trace.rank)
        return real(trace, finish_ns)

    monkeypatch.setattr(breakdown, "rank_activity", counting)
    result = _result(plots.MAX_TIMELINE_RANKS * 4)
    fig = plots.timeline_figure(result)
    plots.pyplot().close(fig)
    drawn = breakdown.shown_ranks(result, plots.MAX_TIMELINE_RANKS).ranks
    assert computed == list(drawn) and len(drawn) <= plots.MAX_TIMELINE_RANKS


def test_an_empty_set_measures_nothing_within_any_other():
    """A rank with no message in flight (it only computes) has an empty in-flight set:
    its overlap with its compute is 0, not an IndexError (a compute-only run's --json)."""
    from astra_core.interval_sets import Measure

    empty = Measure(np.array([], dtype=float))
    assert empty.within(np.array([0.0, 3000.0, 5000.0, 9000.0])) == 0.0
    assert list(empty.before(np.array([0.0, 10.0]))) == [0.0, 0.0]
