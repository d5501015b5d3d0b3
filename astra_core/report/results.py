"""Results of a run: per-rank times and per-collective records (all times in ns).

In Python the times keep the backend's resolution (fractions of a ns from the
flow and ns3 backends); what is written out (``to_dict``, ``--json``, the
CSV and Parquet tables) gives every ``*_ns`` field as a whole number of ns
(:func:`whole_ns`), so that a field has one type whatever the backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from astra_core.system.comm_types import CHAKRA_COLLECTIVE_NAMES


def whole_ns(time_ns: float) -> int:
    """A time for output: the nearest whole ns (ties to even), as an int."""
    return round(time_ns)


@dataclass
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


class CollectiveRecord:
    """One collective on one rank: its node, size, group and timing."""

    __slots__ = ("rank", "node", "dataset")

    def __init__(self, rank: int, node, dataset):
        self.rank = rank
        self.node = node
        self.dataset = dataset

    def to_dict(self) -> dict[str, Any]:
        node, ds = self.node, self.dataset
        return {
            "rank": self.rank,
            "node_id": node.id,
            "name": node.name,
            "type": CHAKRA_COLLECTIVE_NAMES.get(node.comm_type, str(node.comm_type)),
            "bytes": node.comm_size,
            "group": node.pg_name or "",
            "start_ns": whole_ns(ds.start_ns),
            "end_ns": None if ds.finish_ns is None else whole_ns(ds.finish_ns),
            "phases": [
                {"dim": d, "type": t, "start_ns": whole_ns(s), "end_ns": whole_ns(e)}
                for d, t, s, e in ds.phase_times
            ],
        }


@dataclass
class RunResult:
    """Everything a run produced. ``step_ns`` is the slowest rank's finish time.

    ``ranks`` and ``graphs`` have every rank; ``traces`` and ``collectives``
    only the ranks that were simulated: when ``symmetric``, the
    representatives, ``representative[r]`` standing for rank ``r``.
    """

    backend: str
    ranks: list[RankResult]
    collectives: list[CollectiveRecord] = field(default_factory=list)
    traces: list[RankTimeline] = field(default_factory=list, repr=False)
    network: Any = field(default=None, repr=False)  # the backend, for its own statistics
    messages: int = 0
    message_bytes: int = 0
    symmetric: bool = False  # representatives stood for classes of identical ranks
    representative: list[int] | None = None  # rank -> the simulated rank standing for it
    graphs: list[Any] = field(default_factory=list, repr=False)  # every rank's dependency graph
    #: Background flows run beside the step (astra_core.flows.run.FlowResult), if any.
    background: list[Any] | None = None

    @property
    def step_ns(self) -> float:
        return max((r.finish_ns for r in self.ranks), default=0)

    def to_dict(self) -> dict[str, Any]:
        from astra_core.report.flops import llm_utilization

        out = {
            "backend": self.backend,
            "step_ns": whole_ns(self.step_ns),
            "ranks": [r.to_dict() for r in self.ranks],
            "messages": self.messages,
            "message_bytes": self.message_bytes,
        }
        llm = llm_utilization(self)
        if llm:
            out["llm"] = llm
        from astra_core.report.nccl import nccl_choices

        nccl = nccl_choices(self)
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

    # -- views and outputs (astra_core.report.*; pandas/matplotlib load on first use) -------
    def breakdown(self) -> list:
        """Per rank: compute, overlapped comm, exposed comm, idle (ns), adding up to
        the finish time (:mod:`astra_core.report.breakdown`)."""
        from astra_core.report.breakdown import breakdowns

        return breakdowns(self)

    def rank_frame(self):
        """pandas DataFrame, one row per rank (:func:`astra_core.report.frames.rank_frame`)."""
        from astra_core.report.frames import rank_frame

        return rank_frame(self)

    def collective_frame(self):
        """pandas DataFrame, one row per collective per rank, with per-phase times."""
        from astra_core.report.frames import collective_frame

        return collective_frame(self)

    def phase_frame(self):
        """pandas DataFrame, one row per phase of every chunk of every collective."""
        from astra_core.report.frames import phase_frame

        return phase_frame(self)

    def link_frame(self):
        """pandas DataFrame of per-link statistics, or None if the backend keeps none."""
        from astra_core.report.frames import link_frame

        return link_frame(self)

    def write_csv(self, path) -> None:
        """Write the per-collective records as CSV."""
        from astra_core.report.frames import write_collectives

        write_collectives(self, path, "csv")

    def write_parquet(self, path) -> None:
        """Write the per-collective records as Parquet."""
        from astra_core.report.frames import write_collectives

        write_collectives(self, path, "parquet")

    def write_plots(self, directory) -> list:
        """Write breakdown.png, timeline.png (and links.png) into ``directory``; their paths."""
        from astra_core.report.plots import write_plots

        return write_plots(self, directory)

    def write_timeline(self, path) -> None:
        """Write a Chrome/Perfetto trace (:mod:`astra_core.report.timeline`)."""
        from astra_core.report.timeline import write_timeline

        write_timeline(self, path)
