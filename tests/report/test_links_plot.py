"""links.png read on the figure matplotlib builds: every bar labelled or the labelled
ones counted in plain English, bars busiest first, every kind of link visible, and the
faulty cables of the run marked and named in the legend."""

from __future__ import annotations

import pytest

from astra_core.report.plots import links_figure, ordinal
from astra_core.results import LinkSnapshot, RankResult, RunResult
from astra_core.topology.generators import leaf_spine

STEP_NS = 1000.0


def snapshot_result(topology, busy_ns, **changes) -> RunResult:
    """A run of one 1000 ns step whose link ``i`` was busy ``busy_ns[i]`` ns."""
    links = LinkSnapshot(topology, tuple(b * 10 for b in busy_ns), tuple(busy_ns))
    rank = RankResult(rank=0, finish_ns=STEP_NS, compute_ns=0.0, cpu_ns=0.0, comm_ns=0.0, exposed_comm_ns=0.0)
    return RunResult(backend="flow", ranks=[rank], links=links, **changes)


@pytest.mark.parametrize(
    "n, text",
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (101, "101st"),
        (111, "111th"),
        (112, "112th"),
    ],
)
def test_ordinal(n, text):
    assert ordinal(n) == text


def test_links_axis_counts_the_labelled_links_in_english():
    topology = leaf_spine(32, 4, 2)  # 64 host links + 16 leaf-spine links: every 2nd labelled
    result = snapshot_result(topology, [float(i % 7) for i in range(len(topology.link_src))])
    (ax,) = links_figure(result).axes
    assert "every 2nd link labelled" in ax.get_xlabel()
    assert "2th" not in ax.get_xlabel()
