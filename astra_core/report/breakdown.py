"""Where each rank's time goes: compute, exposed and overlapped communication, idle.

Every ET node a rank ran is an interval ``[start, end)`` (ns). Compute nodes
(GPU kernels and CPU ops) form the *compute* set; collectives, sends,
receives and remote-memory accesses form the *communication* set. Over
``[0, finish)`` each instant is in exactly one of four disjoint parts:

=====================  =================================================
``compute_only_ns``    compute running, no communication in flight
``overlapped_comm_ns`` communication in flight while compute runs
                       (hidden behind compute)
``comm_only_ns``       communication in flight, no compute: the
                       *exposed* communication, strictly
``idle_ns``            neither (waiting on dependencies, nothing issued)
=====================  =================================================

so the four add up to the rank's finish time. Upstream ASTRA-sim reports
"exposed communication" as ``finish - compute`` (``RankResult.exposed_comm_ns``),
which is ``comm_only_ns + idle_ns`` here; the split tells waiting on the
network apart from waiting on nothing.

A symmetric run (:mod:`astra_core.system.symmetry`) simulated rank 0 only;
every rank then has rank 0's intervals (see :func:`rank_tracks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from astra_core.report.results import RunResult
from astra_core.workload.chakra_types import NodeType

_MEM_LOAD, _MEM_STORE, _COMP, _COMM_SEND, _COMM_RECV, _COMM_COLL = (
    int(t)
    for t in (
        NodeType.MEM_LOAD_NODE,
        NodeType.MEM_STORE_NODE,
        NodeType.COMP_NODE,
        NodeType.COMM_SEND_NODE,
        NodeType.COMM_RECV_NODE,
        NodeType.COMM_COLL_NODE,
    )
)
_COMM_TYPES = frozenset((_MEM_LOAD, _MEM_STORE, _COMM_SEND, _COMM_RECV, _COMM_COLL))

Interval = tuple[float, float]


def rank_tracks(result: RunResult) -> list[tuple[int, list[tuple[int, float, float]], Sequence[Any]]]:
    """``(rank, records, nodes)`` per rank, every rank of the run.

    ``records`` are the engine's ``(node position, start_ns, end_ns)``;
    ``nodes[position]`` is the ET node. In a symmetric run every rank gets its
    representative's records with its own nodes (same positions) when the run
    kept every rank's graph, else the representative's nodes.
    """
    if getattr(result, "symmetric", False) and result.engines:
        engines = {e.rank: e for e in result.engines}
        graphs = getattr(result, "graphs", None) or []
        tracks = []
        for r in result.ranks:
            engine = engines[_representative(result, r.rank)]
            tracks.append(
                (r.rank, engine.records, graphs[r.rank].nodes if r.rank < len(graphs) else engine.nodes)
            )
        return tracks
    return [(e.rank, e.records, e.nodes) for e in result.engines]


def _representative(result: RunResult, rank: int) -> int:
    mapping = getattr(result, "representative", None)
    return mapping[rank] if mapping else 0


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same instants (empty ones dropped)."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1][1] = end
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def total(intervals: Sequence[Interval]) -> float:
    """Summed length of disjoint intervals (ns)."""
    return sum(e - s for s, e in intervals)


def overlap(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    """Length of the intersection of two sorted disjoint interval lists (ns)."""
    i = j = 0
    length = 0.0
    while i < len(a) and j < len(b):
        start = max(a[i][0], b[j][0])
        end = min(a[i][1], b[j][1])
        if end > start:
            length += end - start
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return length


def busy_intervals(records, nodes) -> tuple[list[Interval], list[Interval]]:
    """(compute, communication) unions of one rank's node intervals.

    A communication node flagged ``is_cpu_op`` (PyTorch's host-side ``c10d::``
    launch, replayed on the CPU) counts as compute, as the engine runs it.
    """
    compute, comm = [], []
    for pos, start, end in records:
        node = nodes[pos]
        if node.type == _COMP or node.is_cpu_op:
            compute.append((start, end))
        elif node.type in _COMM_TYPES:
            comm.append((start, end))
    return union(compute), union(comm)


@dataclass(frozen=True)
class Breakdown:
    """One rank's time split into four disjoint parts (ns) that add up to ``finish_ns``."""

    rank: int
    finish_ns: float
    compute_only_ns: float
    overlapped_comm_ns: float
    comm_only_ns: float
    idle_ns: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rank_breakdown(rank: int, finish_ns: float, records, nodes) -> Breakdown:
    """The :class:`Breakdown` of one rank from its engine records."""
    compute, comm = busy_intervals(records, nodes)
    both = overlap(compute, comm)
    compute_ns, comm_ns = total(compute), total(comm)
    busy = compute_ns + comm_ns - both
    return Breakdown(
        rank=rank,
        finish_ns=finish_ns,
        compute_only_ns=compute_ns - both,
        overlapped_comm_ns=both,
        comm_only_ns=comm_ns - both,
        idle_ns=max(finish_ns - busy, 0.0),
    )


def breakdowns(result: RunResult) -> list[Breakdown]:
    """The :class:`Breakdown` of every rank, in rank order."""
    finish = {r.rank: r.finish_ns for r in result.ranks}
    cache: dict[int, Breakdown] = {}
    out = []
    for rank, records, nodes in rank_tracks(result):
        key = id(records)  # symmetric runs share rank 0's records: compute once
        base = cache.get(key)
        if base is None or base.finish_ns != finish[rank]:
            base = cache[key] = rank_breakdown(rank, finish[rank], records, nodes)
        out.append(
            base
            if base.rank == rank
            else Breakdown(
                rank,
                base.finish_ns,
                base.compute_only_ns,
                base.overlapped_comm_ns,
                base.comm_only_ns,
                base.idle_ns,
            )
        )
    return sorted(out, key=lambda b: b.rank)
