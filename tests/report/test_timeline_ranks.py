"""timeline.png on more ranks than it has rows: it draws rank 0, every k-th rank from it,
the slowest (critical) rank and the fastest, and its title and row labels say so."""

from __future__ import annotations

import astra
from astra_core.report.breakdown import shown_ranks
from astra_core.report.plots import timeline_figure
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node, write_rank_trace
from tests.report.test_breakdown_parts import SYSTEM

NPUS = 40
SLOWEST, FASTEST = 13, 27
RING = {"topology": ["Ring"], "npus_count": [NPUS], "bandwidth": [50.0], "latency": [500.0]}


def _duration_us(rank: int) -> int:
    return {SLOWEST: 50, FASTEST: 5}.get(rank, 20)


def test_timeline_draws_rank_0_every_kth_the_slowest_and_the_fastest(tmp_path):
    prefix = tmp_path / "compute"
    for rank in range(NPUS):
        node = make_node(1, "gemm", pb.COMP_NODE, duration_micros=_duration_us(rank))
        write_rank_trace(f"{prefix}.{rank}.et", [node])
    result = astra.simulate(str(prefix), SYSTEM, RING)
    assert [r.finish_ns for r in result.ranks][SLOWEST] == 50_000

    chosen = shown_ranks(result, 32)  # 40 ranks, 30 rows for the stride: every 2nd
    assert (chosen.stride, chosen.slowest, chosen.fastest) == (2, SLOWEST, FASTEST)
    evens = list(range(0, NPUS, 2))
    assert chosen.ranks == tuple(sorted([*evens, SLOWEST, FASTEST]))

    (ax,) = timeline_figure(result).axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [
        {SLOWEST: f"{SLOWEST} slowest", FASTEST: f"{FASTEST} fastest"}.get(r, str(r)) for r in chosen.ranks
    ]
    assert ax.get_title() == (
        "Timeline — backend analytical (22 of 40 ranks: every 2nd from rank 0, "
        f"the slowest {SLOWEST} (critical) and the fastest {FASTEST})"
    )
    # as many rows as ranks: every rank, and no choice to explain
    assert shown_ranks(result, NPUS).ranks == tuple(range(NPUS))
