"""What a run produced, as frozen plain data (all times in ns).

The system layer fills these when a run ends
(:meth:`astra_core.system.simulation.Simulation.run`) by copying what its
engines and backend measured: no live backend, no mutable system objects stay
in a result. :mod:`astra_core.report` is functions over this data (tables,
frames, plots, timelines); :class:`astra_core.report.Report` is a RunResult
with those views as methods.

In Python the times keep the backend's resolution (fractions of a ns from the
flow and ns3 backends); what is written out (``to_dict``, ``--json``, the
CSV and Parquet tables) gives every ``*_ns`` field as a whole number of ns
(:func:`whole_ns`), so that a field has one type whatever the backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from astra_core.backend import counters, link_statistics
from astra_core.topology.physical import PhysicalTopology
from astra_core.workload.chakra_types import COLLECTIVE_NAMES
from astra_core.workload.flops import llm_utilization


def whole_ns(time_ns: float) -> int:
    """A time for output: the nearest whole ns (ties to even), as an int."""
    return round(time_ns)


@dataclass(frozen=True)
class RankResult:
    """What one NPU did.

    ``finish_ns``: when its last node finished. ``compute_ns``: GPU compute
    time (sum of kernel durations). ``cpu_ns``: CPU op time. ``comm_ns``: time
    during which at least one of this rank's messages (sent or received) was
    on the network, or a remote-memory access ran: communication *in flight*.
    ``comm_wait_ns``: time during which a communication node (collective,
    send, receive) was open but nothing of this rank was in flight: *waiting*
    (a posted receive whose sender has not sent, a collective blocked on a
    peer), with or without compute beside it.
    ``exposed_comm_ns``: ``finish_ns - compute_ns``, upstream's definition
    (communication not hidden behind compute, idle time included).
    See :mod:`astra_core.report.breakdown` for the disjoint split.
    """

    rank: int
    finish_ns: float
    compute_ns: float
    cpu_ns: float
    comm_ns: float
    exposed_comm_ns: float
    comm_wait_ns: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "finish_ns": whole_ns(self.finish_ns),
            "compute_ns": whole_ns(self.compute_ns),
            "cpu_ns": whole_ns(self.cpu_ns),
            "comm_ns": whole_ns(self.comm_ns),
            "comm_wait_ns": whole_ns(self.comm_wait_ns),
            "exposed_comm_ns": whole_ns(self.exposed_comm_ns),
        }


@dataclass(frozen=True)
class RankTimeline:
    """The ET nodes one simulated rank ran and when.

    ``records`` yields ``(position, start_ns, end_ns)`` per finished node, in
    finishing order (``len`` and indexing work too); ``nodes[position]`` is
    the ET node (a list, or a streamed view of a large trace that reads a
    node back from the file). ``in_flight``: ``start, end, start, end, ...``
    (ns), the disjoint time-ordered intervals in which at least one message
    this rank sends or receives was on the network
    (:class:`~astra_core.system.p2p.MessageMatcher`).
    """

    rank: int
    records: Iterable[tuple[int, float, float]]
    nodes: Sequence[Any]
    in_flight: Sequence[float] = ()


#: ``(dim, type label, start_ns, end_ns)``: one phase of one chunk of a collective.
PhaseSpan = tuple[int, str, float, float]


@dataclass(frozen=True, slots=True)
class CollectiveRecord:
    """One collective on one rank: its ET ``node`` (size, group, type), when it
    started and finished (``finish_ns`` None: it never did), ``phase_times``
    ``(dim, type label, start_ns, end_ns)`` per phase of every chunk, and
    ``chunks`` (the streams it was split into), and ``nccl_choice`` (the NCCL
    model's algorithm, protocol and channels, a
    :class:`~astra_core.system.collectives.nccl.phase.NcclChoice`; None when
    another algorithm ran it)."""

    rank: int
    node: Any
    start_ns: float
    finish_ns: float | None
    phase_times: Sequence[PhaseSpan] = ()
    chunks: int = 1
    nccl_choice: Any = None

    def to_dict(self) -> dict[str, Any]:
        node = self.node
        return {
            "rank": self.rank,
            "node_id": node.id,
            "name": node.name,
            "type": COLLECTIVE_NAMES.get(node.comm_type, str(node.comm_type)),
            "bytes": node.comm_size,
            "group": node.pg_name or "",
            "start_ns": whole_ns(self.start_ns),
            "end_ns": None if self.finish_ns is None else whole_ns(self.finish_ns),
            "phases": [
                {"dim": d, "type": t, "start_ns": whole_ns(s), "end_ns": whole_ns(e)}
                for d, t, s, e in self.phase_times
            ],
        }


@dataclass(frozen=True)
class LinkSnapshot:
    """Per directed link of ``topology`` when the run ended (the backend's
    :class:`~astra_core.backend.LinkStatistics`): ``link_bytes`` (bytes that crossed
    it), ``link_busy_ns`` (time it was sending), and where the backend keeps them
    ``max_queue`` (most messages waiting) and ``peak_flows`` (most flows at once)."""

    topology: PhysicalTopology
    link_bytes: tuple[float, ...]
    link_busy_ns: tuple[float, ...]
    max_queue: tuple[int, ...] | None = None
    peak_flows: tuple[int, ...] | None = None

    @classmethod
    def of(cls, backend: Any) -> LinkSnapshot | None:
        """A copy of ``backend``'s link statistics now, or None if it keeps none."""
        stats = link_statistics(backend)
        if stats is None:
            return None
        queues = getattr(stats, "max_queue", None)  # optional (LinkStatistics)
        flows = getattr(stats, "peak_flows", None)
        return cls(
            stats.topology,
            tuple(stats.link_bytes),
            tuple(stats.link_busy_ns),
            None if queues is None else tuple(queues),
            None if flows is None else tuple(flows),
        )


@dataclass(frozen=True)
class IterationTimes:
    """The iterations of a run of ``--iterations N`` (:mod:`astra_core.workload.iterations`).

    ``rank_end_ns[r][i]``: when iteration ``i`` ended on rank ``r`` [ns];
    ``end_ns[i]``: on its slowest rank; ``step_ns[i]``: ``end_ns[i] - end_ns[i - 1]``
    (iteration 0 from the start), so the step times add up to the run's finish.
    """

    rank_end_ns: tuple[tuple[float, ...], ...]

    @property
    def count(self) -> int:
        return len(self.rank_end_ns[0]) if self.rank_end_ns else 0

    @property
    def end_ns(self) -> tuple[float, ...]:
        return tuple(max(ends[i] for ends in self.rank_end_ns) for i in range(self.count))

    @property
    def step_ns(self) -> tuple[float, ...]:
        ends = self.end_ns
        return tuple(e - (ends[i - 1] if i else 0.0) for i, e in enumerate(ends))

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "step_ns": [whole_ns(t) for t in self.step_ns],
            "end_ns": [whole_ns(t) for t in self.end_ns],
        }


@dataclass(frozen=True)
class RunResult:
    """Everything a run produced. ``step_ns`` is the slowest rank's finish time (with
    ``iterations``, when the last iteration ended: the whole run).

    ``ranks`` and ``graphs`` have every rank; ``traces`` and ``collectives``
    only the ranks that were simulated: when ``symmetric``, the
    representatives, ``representative[r]`` standing for rank ``r``. ``links``:
    the backend's per-link statistics (None: it keeps none); ``counters``: its
    whole-run counters by name (:class:`~astra_core.backend.Counters`; None:
    none). ``background``: the flows run beside the step
    (:class:`astra_core.flows.run.FlowResult`), if any. ``iterations``: each
    iteration's times in a run of several (:class:`IterationTimes`).
    ``folded``: NCCL collectives (one per communicator and call) that rank symmetry
    ran at NCCL's predicted time and replayed (:mod:`astra_core.system.floor_fold`);
    ``symmetry_off``: why every rank was simulated ("" when symmetric or turned off).
    """

    backend: str
    ranks: list[RankResult]
    collectives: list[CollectiveRecord] = field(default_factory=list)
    traces: list[RankTimeline] = field(default_factory=list, repr=False)
    links: LinkSnapshot | None = field(default=None, repr=False)
    counters: Mapping[str, float] | None = field(default=None, repr=False)
    messages: int = 0
    message_bytes: int = 0
    symmetric: bool = False  # representatives stood for classes of identical ranks
    representative: list[int] | None = None  # rank -> the simulated rank standing for it
    graphs: Sequence[Any] = field(default=(), repr=False)  # every rank's dependency graph
    background: list[Any] | None = None
    iterations: IterationTimes | None = None  # a run of several iterations (--iterations)
    folded: int = 0
    symmetry_off: str = ""
    #: the degraded and failed cables the run had (:class:`~astra_core.topology.faults.LinkFault`)
    faults: tuple[Any, ...] = field(default=(), repr=False)

    @property
    def step_ns(self) -> float:
        return max((r.finish_ns for r in self.ranks), default=0)

    def llm(self) -> dict | None:
        """The LLM step's FLOPs and utilization (:func:`~astra_core.workload.flops.llm_utilization`)
        over one step: with ``iterations``, the mean of their step times (the FLOPs the
        trace records are one step's); None when the traces are not a generated step."""
        count = self.iterations.count if self.iterations is not None else 1
        return llm_utilization(self.graphs, self.step_ns / max(count, 1))

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document: step and per-rank times, message counts, and where
        they apply the LLM FLOP utilization, the NCCL model's choices and the
        background flows."""
        out: dict[str, Any] = {
            "backend": self.backend,
            "step_ns": whole_ns(self.step_ns),
            "ranks": [r.to_dict() for r in self.ranks],
            "messages": self.messages,
            "message_bytes": self.message_bytes,
        }
        llm = self.llm()
        if llm:
            out["llm"] = llm
        if self.iterations is not None:
            out["iterations"] = self.iterations.to_dict()
        nccl = nccl_choice_entries(self.collectives)
        if nccl:  # what the NCCL model chose, per communicator and size
            out["nccl"] = nccl
        if self.background is not None:
            out["background_flows"] = [
                {
                    "src": f.src,
                    "dst": f.dst,
                    "size_bytes": f.size_bytes,
                    "start_ns": whole_ns(f.start_ns),
                    "fct_ns": whole_ns(f.fct_ns),
                    "ideal_fct_ns": whole_ns(f.ideal_fct_ns),
                    "slowdown": f.slowdown,
                }
                for f in self.background
            ]
        return out


def backend_counters(backend: Any) -> dict[str, float] | None:
    """A copy of ``backend``'s :class:`~astra_core.backend.Counters` now, or None."""
    stats = counters(backend)
    return None if stats is None else dict(stats)


def nccl_choice_entries(collectives: Iterable[CollectiveRecord]) -> list[dict[str, Any]]:
    """One entry per distinct (communicator, collective, size, choice) the NCCL
    model ran, in first-issue order: ``type`` (Chakra name), ``group`` (""
    for all NPUs), ``ranks``, ``bytes`` (the trace's size), ``algorithm``,
    ``protocol``, ``channels``, ``nccl_predicted_ns`` and ``calls`` (how many
    such collectives the lowest simulated rank that ran one issued). Empty when
    no collective ran on the NCCL model."""
    entries: dict[tuple, dict[str, Any]] = {}
    first_rank: dict[tuple, int] = {}
    for record in sorted(collectives, key=lambda r: (r.rank, r.start_ns)):
        choice = record.nccl_choice
        if choice is None:
            continue
        node = record.node
        kind = COLLECTIVE_NAMES.get(node.comm_type, str(node.comm_type))
        key = (node.pg_name or "", kind, node.comm_size, choice)
        entry = entries.get(key)
        if entry is None:
            first_rank[key] = record.rank
            entries[key] = {
                "type": kind,
                "group": node.pg_name or "",
                "ranks": choice.ranks,
                "bytes": node.comm_size,
                "algorithm": choice.algorithm,
                "protocol": choice.protocol,
                "channels": choice.channels,
                "nccl_predicted_ns": choice.predicted_ns,
                "calls": 1,
            }
        elif first_rank[key] == record.rank:
            entry["calls"] += 1
    return list(entries.values())
