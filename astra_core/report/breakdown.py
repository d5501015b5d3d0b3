"""Where each rank's time goes: compute, communication in flight, waiting, idle.

Every ET node a rank ran is an interval ``[start, end)`` (ns): compute nodes
(GPU kernels and CPU ops), collectives, sends and receives (point-to-point),
remote-memory accesses. Beside them the system layer records when this rank's
messages were on the network (:attr:`RankTimeline.in_flight`, kept by
:class:`~astra_core.system.p2p.MessageMatcher`): a message is *in flight* for
its sender and its receiver from the moment it is handed to the network
until it arrives. A communication node that is open while none of this
rank's messages moves is *waiting*: a receive posted before its sender sent
(a pipeline stage waiting for its neighbour), a collective blocked on a peer
that has not reached it yet, a collective's local steps between messages
(reductions, endpoint delays).

Over ``[0, finish)`` each instant is in exactly one of six disjoint parts,
taken in this order of precedence:

======================  =================================================
``compute_only_ns``     compute running, none of this rank's messages in flight
``overlapped_comm_ns``  compute running while this rank's messages (or a
                        remote-memory access) are in flight: hidden communication
``comm_only_ns``        messages in flight (or a remote-memory access), no
                        compute: communication nothing hides (only part of
                        upstream's "exposed communication", below)
``collective_wait_ns``  a collective open, nothing in flight, no compute
``p2p_wait_ns``         only sends and receives open, nothing in flight, no
                        compute: with pipeline parallelism the pipeline *bubble*
``idle_ns``             none of these (waiting on dependencies, nothing issued)
======================  =================================================

so the six add up to the rank's finish time (the conservation law the tests
check on every backend). Upstream ASTRA-sim reports "exposed
communication" as ``finish - compute`` (``RankResult.exposed_comm_ns``),
which is ``comm_only_ns + collective_wait_ns + p2p_wait_ns + idle_ns`` here
(when CPU ops do not overlap GPU kernels).

A symmetric run (:mod:`astra_core.system.symmetry`) simulated rank 0 only;
every rank then has its representative's intervals (see :func:`rank_tracks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from astra_core import interval_sets as sets
from astra_core.interval_sets import FlatSet
from astra_core.intervals import Interval
from astra_core.results import RankTimeline, RunResult
from astra_core.workload.chakra_types import COMM_COLL, COMM_RECV, COMM_SEND, COMP, MEM_LOAD, MEM_STORE
from astra_core.workload.graph import peerless

_MEMORY_TYPES = frozenset((MEM_LOAD, MEM_STORE))
_P2P_TYPES = frozenset((COMM_SEND, COMM_RECV))


def rank_tracks(result: RunResult) -> list[RankTimeline]:
    """The :class:`RankTimeline` of every rank of the run, in rank order.

    In a symmetric run every rank gets its
    representative's records (and in-flight intervals) with its own nodes
    (same positions) when the run kept every rank's graph, else the
    representative's nodes.
    """
    if result.symmetric and result.traces:
        traces = {t.rank: t for t in result.traces}
        graphs = result.graphs
        tracks = []
        for r in result.ranks:
            trace = traces[_representative(result, r.rank)]
            nodes = graphs[r.rank].nodes if r.rank < len(graphs) else trace.nodes
            tracks.append(RankTimeline(r.rank, trace.records, nodes, trace.in_flight))
        return tracks
    return sorted(result.traces, key=lambda t: t.rank)


def _representative(result: RunResult, rank: int) -> int:
    mapping = result.representative
    return mapping[rank] if mapping else 0


@dataclass(frozen=True)
class NodeIntervals:
    """One rank's node intervals by kind (ns, each list in record order, not merged).

    A communication node flagged ``is_cpu_op`` (PyTorch's host-side ``c10d::``
    launch, replayed on the CPU) counts as compute, as the engine runs it.
    """

    compute: list[Interval]
    collective: list[Interval]
    memory: list[Interval]
    p2p: list[Interval]


def node_intervals(records, nodes) -> NodeIntervals:
    """The :class:`NodeIntervals` of one rank's ``(position, start, end)`` records."""
    out = NodeIntervals([], [], [], [])
    nodes = peerless(nodes)  # a node's kind does not depend on its peers
    for pos, start, end in records:
        node = nodes[pos]
        kind = node.type
        if kind == COMP or node.is_cpu_op:
            out.compute.append((start, end))
        elif kind in _P2P_TYPES:
            out.p2p.append((start, end))
        elif kind == COMM_COLL:
            out.collective.append((start, end))
        elif kind in _MEMORY_TYPES:
            out.memory.append((start, end))
    return out


@dataclass(frozen=True)
class Activity:
    """One rank's time as sets of instants clipped to ``[0, finish)``, each a flat
    ``start, end, ...`` array (ns; :mod:`astra_core.interval_sets`).

    ``compute``: compute running. ``in_flight``: this rank's messages on the
    network (or a remote-memory access), whether or not compute runs.
    ``waiting``: a communication node open with nothing of this rank in
    flight, whether or not compute runs. ``collective_wait`` and ``p2p_wait``:
    the parts of ``waiting`` without compute, a collective open or only
    sends/receives (module docstring).
    """

    compute: FlatSet
    in_flight: FlatSet
    waiting: FlatSet
    collective_wait: FlatSet
    p2p_wait: FlatSet


def _rank_sets(trace: RankTimeline, finish_ns: float) -> tuple[FlatSet, FlatSet, FlatSet, FlatSet]:
    """(compute, in flight, collectives open, sends/receives open) of one rank, each a set
    clipped to ``[0, finish)``."""
    iv = node_intervals(trace.records, trace.nodes)
    return (
        sets.clip(sets.from_pairs(iv.compute), 0.0, finish_ns),
        sets.clip(sets.from_flat(trace.in_flight, iv.memory), 0.0, finish_ns),
        sets.clip(sets.from_pairs(iv.collective), 0.0, finish_ns),
        sets.clip(sets.from_pairs(iv.p2p), 0.0, finish_ns),
    )


def rank_activity(trace: RankTimeline, finish_ns: float) -> Activity:
    """The :class:`Activity` of one rank from its records and in-flight intervals (a few
    numpy calls per set, however many intervals the rank's messages make)."""
    compute, flight, collective, p2p = _rank_sets(trace, finish_ns)
    waiting = sets.minus(sets.union(collective, p2p), flight)
    # the long in-flight set is walked once: the two waits are parts of ``waiting``
    collective_wait = sets.intersect(waiting, sets.minus(collective, compute))
    p2p_wait = sets.intersect(waiting, sets.minus(p2p, compute, collective))
    return Activity(compute, flight, waiting, collective_wait, p2p_wait)


@dataclass(frozen=True)
class ShownRanks:
    """The ranks a plot of at most a given number of rows draws (:func:`shown_ranks`):
    ``ranks`` in rank order, every ``stride``-th rank from rank 0 (1: every rank) plus
    ``slowest`` (the critical rank, the last to finish) and ``fastest`` (the first)."""

    ranks: tuple[int, ...]
    stride: int
    slowest: int
    fastest: int


def shown_ranks(result: RunResult, rows: int) -> ShownRanks:
    """Which ranks fit ``rows`` (at least 3) rows: every rank if they fit, else rank 0
    and every k-th rank after it (k the smallest stride leaving two rows free) plus the
    slowest and the fastest rank (the lowest-numbered one on a tie)."""
    by_finish = sorted(result.ranks, key=lambda r: (r.finish_ns, r.rank))
    slowest = max(result.ranks, key=lambda r: (r.finish_ns, -r.rank)).rank if by_finish else 0
    fastest = by_finish[0].rank if by_finish else 0
    count = len(result.ranks)
    stride = 1 if count <= rows else -(-count // max(rows - 2, 1))
    chosen = {r.rank for r in result.ranks if r.rank % stride == 0} | (
        {slowest, fastest} if by_finish else set()
    )
    return ShownRanks(tuple(sorted(chosen)), stride, slowest, fastest)


def activities(result: RunResult, shown: int | None = None) -> list[tuple[RankTimeline, Activity]]:
    """Every rank's trace and :class:`Activity`, in rank order (ranks that share their
    representative's records and finish time share one Activity); with ``shown``, only
    the ranks :func:`shown_ranks` picks for that many rows."""
    finish = {r.rank: r.finish_ns for r in result.ranks}
    cache: dict[tuple[int, float], Activity] = {}
    out = []
    tracks = rank_tracks(result)
    if shown is not None and len(tracks) > shown:
        keep = set(shown_ranks(result, shown).ranks)
        tracks = [t for t in tracks if t.rank in keep]
    for trace in tracks:
        key = (id(trace.records), finish[trace.rank])
        act = cache.get(key)
        if act is None:
            act = cache[key] = rank_activity(trace, finish[trace.rank])
        out.append((trace, act))
    return out


#: The six disjoint parts of a rank's time, in the order tables and plots show them.
PARTS = (
    "compute_only_ns",
    "overlapped_comm_ns",
    "comm_only_ns",
    "collective_wait_ns",
    "p2p_wait_ns",
    "idle_ns",
)

#: What each part is called in the terminal table and in the plots' legends.
PART_LABELS = {
    "compute_only_ns": "compute only",
    "overlapped_comm_ns": "comm in flight under compute",
    "comm_only_ns": "comm in flight, no compute",
    "collective_wait_ns": "waiting in a collective",
    "p2p_wait_ns": "waiting on send/recv",
    "idle_ns": "idle",
}


def format_us(ns: float) -> str:
    """A time in ns as µs with three decimals and thousands separators (``1,234.567``)."""
    return f"{ns / 1000:,.3f}"


def breakdown_unit(step_ns: float) -> tuple[float, str]:
    """(divisor, name) the breakdown table and ``breakdown.png``'s legend print times in:
    ms for a step of 1 ms or more, else µs (three decimals either way, so at most
    1 µs is rounded away and seven columns fit an 80-column terminal)."""
    return (1e6, "ms") if step_ns >= 1e6 else (1e3, "µs")


def format_time(ns: float, divisor: float) -> str:
    """``ns`` divided by ``divisor`` with three decimals and thousands separators."""
    return f"{ns / divisor:,.3f}"


@dataclass(frozen=True)
class Breakdown:
    """One rank's time split into six disjoint parts (ns) that add up to ``finish_ns``
    (module docstring)."""

    rank: int
    finish_ns: float
    compute_only_ns: float
    overlapped_comm_ns: float
    comm_only_ns: float
    collective_wait_ns: float
    p2p_wait_ns: float
    idle_ns: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rank_breakdown(trace: RankTimeline, finish_ns: float) -> Breakdown:
    """The :class:`Breakdown` of one rank: the lengths of :func:`rank_activity`'s sets.

    The in-flight set is by far the longest (a message's every interval); it is only
    measured against the node sets (:class:`~astra_core.interval_sets.Measure`),
    so a rank costs time linear in its nodes and logarithmic in its messages.
    """
    compute, in_flight, collective, p2p = _rank_sets(trace, finish_ns)
    flight = sets.Measure(in_flight)
    compute_ns = sets.length(compute)
    hidden = flight.within(compute)  # communication behind compute
    collective_open = sets.minus(collective, compute)
    p2p_open = sets.minus(p2p, compute, collective)
    collective_wait = sets.length(collective_open) - flight.within(collective_open)
    p2p_wait = sets.length(p2p_open) - flight.within(p2p_open)
    comm_only = flight.total - hidden
    busy = compute_ns + comm_only + collective_wait + p2p_wait
    return Breakdown(
        rank=trace.rank,
        finish_ns=finish_ns,
        compute_only_ns=compute_ns - hidden,
        overlapped_comm_ns=hidden,
        comm_only_ns=comm_only,
        collective_wait_ns=collective_wait,
        p2p_wait_ns=p2p_wait,
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
            base = cache[key] = rank_breakdown(trace, finish[rank])
        out.append(base if base.rank == rank else replace(base, rank=rank))
    return sorted(out, key=lambda b: b.rank)


def mean_parts(parts: Sequence[Breakdown]) -> dict[str, float]:
    """Each part's mean over ``parts`` (ns), and ``finish_ns``'s; zeros for no ranks."""
    n = len(parts) or 1
    return {attr: sum(getattr(b, attr) for b in parts) / n for attr in (*PARTS, "finish_ns")}
