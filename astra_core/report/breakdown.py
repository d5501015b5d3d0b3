"""Where each rank's time goes: compute, exposed and overlapped communication,
point-to-point waits (pipeline bubbles), idle.

Every ET node a rank ran is an interval ``[start, end)`` (ns). Compute nodes
(GPU kernels and CPU ops) form the *compute* set; collectives, sends,
receives and remote-memory accesses form the *communication* set, of which
sends and receives are the *point-to-point* set. Over ``[0, finish)`` each
instant is in exactly one of five disjoint parts:

=====================  =================================================
``compute_only_ns``    compute running, no communication in flight
``overlapped_comm_ns`` communication in flight while compute runs
                       (hidden behind compute)
``comm_only_ns``       a collective or memory access in flight, no
                       compute: the *exposed* communication, strictly
``p2p_only_ns``        only sends and receives in flight: with pipeline
                       parallelism, a stage waiting for its neighbour's
                       activations or gradients (the pipeline *bubble*)
``idle_ns``            none of these (waiting on dependencies, nothing issued)
=====================  =================================================

so the five add up to the rank's finish time. Upstream ASTRA-sim reports
"exposed communication" as ``finish - compute`` (``RankResult.exposed_comm_ns``),
which is ``comm_only_ns + p2p_only_ns + idle_ns`` here; the split tells
waiting on collectives, waiting on a pipeline neighbour and waiting on
nothing apart.

A symmetric run (:mod:`astra_core.system.symmetry`) simulated rank 0 only;
every rank then has rank 0's intervals (see :func:`rank_tracks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from astra_core.report.results import RankTrace, RunResult
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
_P2P_TYPES = frozenset((_COMM_SEND, _COMM_RECV))

Interval = tuple[float, float]


def rank_tracks(result: RunResult) -> list[RankTrace]:
    """The :class:`RankTrace` of every rank of the run, in rank order.

    In a symmetric run every rank gets its
    representative's records with its own nodes (same positions) when the run
    kept every rank's graph, else the representative's nodes.
    """
    if result.symmetric and result.traces:
        traces = {t.rank: t for t in result.traces}
        graphs = result.graphs
        tracks = []
        for r in result.ranks:
            trace = traces[_representative(result, r.rank)]
            nodes = graphs[r.rank].nodes if r.rank < len(graphs) else trace.nodes
            tracks.append(RankTrace(r.rank, trace.records, nodes))
        return tracks
    return sorted(result.traces, key=lambda t: t.rank)


def _representative(result: RunResult, rank: int) -> int:
    mapping = result.representative
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


def node_intervals(records, nodes) -> tuple[list[Interval], list[Interval], list[Interval]]:
    """(compute, collective and memory, point-to-point) intervals of one rank's nodes,
    each list in record order (not merged).

    A communication node flagged ``is_cpu_op`` (PyTorch's host-side ``c10d::``
    launch, replayed on the CPU) counts as compute, as the engine runs it.
    """
    compute: list[Interval] = []
    collective: list[Interval] = []
    p2p: list[Interval] = []
    for pos, start, end in records:
        node = nodes[pos]
        kind = node.type
        if kind == _COMP or node.is_cpu_op:
            compute.append((start, end))
        elif kind in _P2P_TYPES:
            p2p.append((start, end))
        elif kind in _COMM_TYPES:
            collective.append((start, end))
    return compute, collective, p2p


def busy_intervals(records, nodes) -> tuple[list[Interval], list[Interval]]:
    """(compute, communication) unions of one rank's node intervals (see
    :func:`node_intervals`; communication includes sends and receives)."""
    compute, collective, p2p = node_intervals(records, nodes)
    return union(compute), union(collective + p2p)


#: The five disjoint parts of a rank's time, in the order tables show them.
PARTS = ("compute_only_ns", "overlapped_comm_ns", "comm_only_ns", "p2p_only_ns", "idle_ns")


@dataclass(frozen=True)
class Breakdown:
    """One rank's time split into five disjoint parts (ns) that add up to ``finish_ns``
    (module docstring)."""

    rank: int
    finish_ns: float
    compute_only_ns: float
    overlapped_comm_ns: float
    comm_only_ns: float
    p2p_only_ns: float
    idle_ns: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rank_breakdown(rank: int, finish_ns: float, records, nodes) -> Breakdown:
    """The :class:`Breakdown` of one rank from its engine records."""
    compute_iv, collective_iv, p2p_iv = node_intervals(records, nodes)
    compute, collective, p2p = union(compute_iv), union(collective_iv), union(p2p_iv)
    comm = union(collective_iv + p2p_iv)
    hidden = overlap(compute, comm)  # communication behind compute
    compute_ns = total(compute)
    comm_only = total(collective) - overlap(collective, compute)
    p2p_only = total(p2p) - overlap(p2p, union(compute_iv + collective_iv))
    busy = compute_ns + comm_only + p2p_only
    return Breakdown(
        rank=rank,
        finish_ns=finish_ns,
        compute_only_ns=compute_ns - hidden,
        overlapped_comm_ns=hidden,
        comm_only_ns=comm_only,
        p2p_only_ns=p2p_only,
        idle_ns=max(finish_ns - busy, 0.0),
    )


def breakdowns(result: RunResult) -> list[Breakdown]:
    """The :class:`Breakdown` of every rank, in rank order."""
    finish = {r.rank: r.finish_ns for r in result.ranks}
    cache: dict[int, Breakdown] = {}
    out = []
    for trace in rank_tracks(result):
        rank = trace.rank
        key = id(trace.records)  # symmetric runs share rank 0's records: compute once
        base = cache.get(key)
        if base is None or base.finish_ns != finish[rank]:
            base = cache[key] = rank_breakdown(rank, finish[rank], trace.records, trace.nodes)
        out.append(base if base.rank == rank else replace(base, rank=rank))
    return sorted(out, key=lambda b: b.rank)
