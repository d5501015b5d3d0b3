"""One simulation: every rank's engine on one network backend.

Builds a :class:`~astra_core.system.engine.RankEngine` per NPU, starts them all
at time 0, lets the backend drain its events, and turns what happened into a
:class:`~astra_core.results.RunResult`. If the events run out while a
rank still has unfinished nodes, the run is a deadlock and
:class:`~astra_core.errors.SimulationDeadlock` says which ranks wait on what;
a run that finishes with sends no receive matched warns
(:mod:`astra_core.system.wait_report`).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from astra_core.backend import lone_message_time, report_progress, set_progress
from astra_core.collector import few_passes, paused
from astra_core.config.memory import MemoryConfig
from astra_core.config.network import NetworkConfig, TopologyKind
from astra_core.config.system import SystemConfig
from astra_core.intervals import flat_covered, flight_pairs, subtract, total, union
from astra_core.results import (
    CollectiveRecord,
    LinkSnapshot,
    RankResult,
    RankTimeline,
    RunResult,
    backend_counters,
)
from astra_core.system.attempt import GUARD_EVERY_ENGINES, build_attempt
from astra_core.system.collectives.registry import Collective
from astra_core.system.context import build_context
from astra_core.system.engine import EngineListener, RankEngine, TieOrderMatters
from astra_core.system.fallback import announce_fallback, full_run
from astra_core.system.floor_fold import NO_INTERVALS, FloorFold, FoldedTraffic, merged_log, with_traffic
from astra_core.system.memory_guard import check_memory_building, check_memory_left
from astra_core.system.p2p import MessageMatcher
from astra_core.system.records import PhaseTimes
from astra_core.system.stream import DataSet
from astra_core.system.symmetry import Symmetry, find_symmetry
from astra_core.system.view import ProgressSample, RunView
from astra_core.system.wait_report import describe_wait, raise_deadlock, warn_unreceived_sends
from astra_core.workload.chakra import ETNode
from astra_core.workload.graph import RankGraph


class Simulation:
    """All ranks of one run. ``graphs[r]`` is rank r's dependency graph.

    ``symmetry``: simulate one rank per class of identical ranks where that is
    exact (:mod:`astra_core.system.symmetry`); it needs ``fresh_backend``, a
    function building another backend like ``backend``, to run every rank
    instead if the classes turn out not to hold (see :meth:`run`).
    ``view``: a read-only :class:`~astra_core.system.view.RunView` of the run
    (what observer plugins get). ``on_progress(view, sample)``: called with the view
    and a :class:`~astra_core.system.view.ProgressSample` whenever the backend reports
    progress (:func:`astra_core.backend.set_progress`) and once when it has run
    (the same reports guard the machine's memory,
    :mod:`astra_core.system.memory_guard`). Raises what
    :func:`~astra_core.system.context.build_context` raises for inputs that cannot run.
    """

    @few_passes()  # setting up allocates as much as a run: rank symmetry's tables
    @paused()
    def __init__(
        self,
        graphs: Sequence[RankGraph],
        network: NetworkConfig,
        system: SystemConfig,
        backend,
        *,
        memory: MemoryConfig | None = None,
        comm_groups: dict[str, tuple[int, ...]] | None = None,
        backend_name: str = "?",
        symmetry: bool = True,
        algorithms: Mapping[str, Collective] | None = None,
        fresh_backend: Callable[[], Any] | None = None,
        on_progress: Callable[[RunView, ProgressSample], None] | None = None,
    ):
        self.context = context = build_context(
            graphs,
            network,
            system,
            memory=memory,
            comm_groups=comm_groups,
            algorithms=algorithms,
        )
        self.backend_name = backend_name
        self.npus_count = network.npus_count
        self.on_progress = on_progress
        # per collective issued: (rank, node, its DataSet) while it runs, its frozen
        # CollectiveRecord once it finished (the DataSet is then let go)
        self.collectives: list[tuple[int, ETNode, DataSet] | CollectiveRecord] = []
        self._finished = 0
        classes: Symmetry | None
        if symmetry and context.custom:
            classes, self.symmetry_reason = None, "custom collectives give ranks their own programs"
        elif symmetry:
            classes, self.symmetry_reason = find_symmetry(
                context.graphs,
                context.dim_sizes,
                context.implementations,
                context.comm_groups,
                context.memory.config.memory_type,
                backend,
                context.nccl,
                [d.kind is not TopologyKind.RING for d in network.dims],
            )
        else:
            classes, self.symmetry_reason = None, "turned off"
        # The full run to fall back on if the ranks of a class part ways
        # (engine.TieOrderMatters) needs a backend no event has touched.
        self._fresh_backend = fresh_backend
        if classes is not None and fresh_backend is None:
            classes, self.symmetry_reason = None, "no fresh backend to fall back on"
        self.attempt = build_attempt(context, backend, classes, self._listener())
        self._fold = self._start_folding(classes, backend)
        self._folded: FoldedTraffic | None = None

    def _listener(self) -> EngineListener:
        """This run as its engines' listener, without a reference back to it: the run
        owns its engines, and a cycle would keep every trace and graph of it alive after
        it ends, for the cyclic collector's next full pass to find (a third of a second
        on a 1,024-rank step)."""
        return cast("EngineListener", weakref.proxy(self))

    def _start_folding(self, classes: Symmetry | None, backend) -> FloorFold | None:
        """The record of the folded NCCL collectives' starts (:mod:`.floor_fold`),
        if the classes fold some; the NCCL model then builds them folded."""
        nccl = self.context.nccl
        lone = lone_message_time(backend)
        if classes is None or not classes.folded or nccl is None or lone is None:
            return None
        fold = FloorFold(classes, nccl, lambda src, dst, size: lone(src, dst, size, 0))
        nccl.folding = (classes.folded, fold.started)
        return fold

    @property
    def view(self) -> RunView:
        """A read-only view of this run (a new one each time: the simulation keeps
        no reference to it, so that it makes no reference cycle)."""
        return RunView(self)

    @property
    def graphs(self) -> tuple[RankGraph, ...]:
        return self.context.graphs

    # the attempt's parts, read-only
    @property
    def backend(self) -> Any:
        return self.attempt.backend

    @property
    def matcher(self) -> MessageMatcher:
        return self.attempt.matcher

    @property
    def symmetry(self) -> Symmetry | None:
        return self.attempt.symmetry

    @property
    def engines(self) -> list[RankEngine]:
        return self.attempt.engines

    # -- callbacks from the engines (engine.EngineListener) ---------------------------
    def rank_finished(self, rank: int) -> None:
        self._finished += 1

    def record_collective(self, rank: int, node: ETNode, dataset: DataSet) -> None:
        collectives, i = self.collectives, len(self.collectives)
        if dataset.finish_ns is not None:  # finished as it was issued
            collectives.append(_collective_record(rank, node, dataset))
            return
        collectives.append((rank, node, dataset))
        done = dataset.on_finished

        def finished(dataset: DataSet) -> None:
            collectives[i] = _collective_record(rank, node, dataset)  # its DataSet goes
            if done is not None:
                done(dataset)

        dataset.on_finished = finished

    def describe_wait(self, engine: RankEngine, rank: int, node: ETNode) -> str:
        """What ``node`` of ``rank`` waits on; ``engine`` runs ``rank`` or, under
        rank symmetry, its representative (see :mod:`astra_core.system.wait_report`)."""
        return describe_wait(self.attempt, engine, rank, node)

    # -- running ----------------------------------------------------------------
    def run(self) -> RunResult:
        """Run to completion; raises SimulationDeadlock if some rank cannot finish.

        A rank-symmetric run in which a rank's choice hangs on the order of
        same-time events (which differs between the ranks of a class in the
        full run) is abandoned and run again without symmetry, on a fresh
        backend.
        """
        with few_passes():
            started = time.perf_counter()
            try:
                self._start_and_drain()
                why = self._settle_folded()
            except TieOrderMatters as tie:
                why = str(tie)
            if why:
                self._fall_back(f"ranks of a class part ways: {why}", time.perf_counter() - started)
                self._start_and_drain()
        return self._result()

    def _settle_folded(self) -> str:
        """Check the folded collectives (:meth:`.floor_fold.FloorFold.settle`): why the
        symmetric run is not the full run's, or "" (their messages then kept)."""
        if self._fold is None:
            return ""
        settled = self._fold.settle()
        if isinstance(settled, str):
            return settled
        self._folded = settled
        return ""

    def _start_and_drain(self) -> None:
        # Progress reports also guard the machine's memory (memory_guard), so every
        # backend that can report is asked to.
        progress = set_progress(self.backend, self._progress)
        for i, engine in enumerate(self.engines, 1):
            engine.start()
            if i % GUARD_EVERY_ENGINES == 0:
                check_memory_building(len(self.engines))
        try:
            self.backend.run()
            if progress:
                report_progress(self.backend)  # the run's last report
        finally:
            if progress:
                set_progress(self.backend, None)

    def _progress(self, now_ns: float, events: int, note: str = "") -> None:
        """The backend's :class:`~astra_core.events.ProgressHook`: stop a run the machine's
        memory cannot hold (:func:`~astra_core.system.memory_guard.check_memory_left`),
        and give ``on_progress`` a sample."""
        view = self.view
        sample = view.sample(events, note, now_ns)
        check_memory_left(now_ns, sample.nodes_done, sample.nodes_total)
        if self.on_progress is not None:
            self.on_progress(view, sample)

    def _fall_back(self, reason: str, attempt_wall_s: float) -> None:
        """Drop the symmetric attempt: every rank runs, on the spare backend. Announced
        with what the full run will take (:mod:`astra_core.system.fallback`); raises
        RunTooLarge when it cannot fit the machine."""
        done = sum(engine.done for engine in self.engines)
        nodes = sum(len(graph) for graph in self.context.graphs)
        announce_fallback(reason, full_run(self.npus_count, nodes, done, attempt_wall_s))
        # a symmetric run has a fresh backend (__init__ turns symmetry off without one)
        backend = cast("Callable[[], Any]", self._fresh_backend)()
        self.symmetry_reason = reason
        if self._fold is not None:
            self._fold.nccl.folding = None
            self._fold = None
        self.collectives = []
        self._finished = 0
        self.attempt = build_attempt(self.context, backend, None, self._listener())

    def _result(self) -> RunResult:
        if self._finished < len(self.engines):
            raise_deadlock(self.attempt)
        warn_unreceived_sends(self.attempt)
        flights: Mapping[int, Sequence[float]] = self.matcher.in_flight  # built once: a dict over every rank
        ranks = [self._rank_result(e, flights.get(e.rank, ())) for e in self.engines]
        messages, message_bytes = self.matcher.messages, self.matcher.bytes
        folded = self._folded
        representative = None
        if self.symmetry is not None:
            by_rank = {result.rank: result for result in ranks}
            representative = (
                [0] * self.npus_count
                if len(self.engines) == 1
                else [self.symmetry.representative(r) for r in range(self.npus_count)]
            )
            ranks = [replace(by_rank[rep], rank=r) for r, rep in enumerate(representative)]
            class_size = self.npus_count // len(self.engines)
            messages *= class_size
            message_bytes *= class_size
            if folded is not None:
                ranks = self._with_folded(ranks, representative, flights, folded)
                messages += folded.messages
                message_bytes += folded.message_bytes
                flights = {
                    e.rank: merged_log(flights.get(e.rank, ()), folded.in_flight.get(e.rank, NO_INTERVALS))
                    for e in self.engines
                }
        return RunResult(
            backend=self.backend_name,
            ranks=ranks,
            collectives=self._collective_records(),
            traces=[RankTimeline(e.rank, e.records, e.nodes, flights.get(e.rank, ())) for e in self.engines],
            links=LinkSnapshot.of(self.backend),
            counters=backend_counters(self.backend),
            graphs=self.context.graphs,
            messages=messages,
            message_bytes=message_bytes,
            symmetric=self.symmetry is not None,
            representative=representative,
            folded=folded.collectives if folded is not None else 0,
            symmetry_off=""
            if self.symmetry is not None or self.symmetry_reason == "turned off"
            else self.symmetry_reason,
        )

    def _with_folded(
        self, ranks: list[RankResult], representative: list[int], flights, folded: FoldedTraffic
    ) -> list[RankResult]:
        """Every rank's result with the folded collectives' messages in flight
        (remote memory, which changes how the in-flight time is summed, turns rank
        symmetry off)."""
        comm = {e.rank: union(flight_pairs(e.comm_intervals)) for e in self.engines}
        return [
            with_traffic(r, flights.get(rep, ()), comm[rep], folded.in_flight[r.rank])
            if r.rank in folded.in_flight
            else r
            for r, rep in zip(ranks, representative)
        ]

    def _collective_records(self) -> list[CollectiveRecord]:
        """The collectives' frozen records: made as each finished (its DataSet then
        let go, so that a run holds no DataSet of a finished collective), and now for
        those that never did."""
        entries, self.collectives = self.collectives, []
        return [e if isinstance(e, CollectiveRecord) else _collective_record(*e) for e in entries]

    @staticmethod
    def _rank_result(engine: RankEngine, log: Sequence[float]) -> RankResult:
        """``engine``'s times; ``log``: its in-flight intervals (``MessageMatcher.in_flight``)."""
        finish = engine.finish_ns or 0
        comm = union(flight_pairs(engine.comm_intervals))
        if engine.memory_intervals:  # remote-memory accesses count as in flight too
            flight = [
                (s, min(e, finish))
                for s, e in union(flight_pairs(log) + engine.memory_intervals)
                if s < finish
            ]
            comm_ns = total(flight)
            waiting = total(subtract(comm, flight))
        else:  # the matcher's intervals are sorted and disjoint already
            comm_ns = flat_covered(log, 0.0, finish)
            waiting = sum(e - s - flat_covered(log, s, e) for s, e in comm)
        return RankResult(
            rank=engine.rank,
            finish_ns=finish,
            compute_ns=engine.gpu_compute_ns,
            cpu_ns=engine.cpu_compute_ns,
            comm_ns=comm_ns,
            comm_wait_ns=waiting,
            exposed_comm_ns=finish - engine.gpu_compute_ns,
        )


def _collective_record(rank: int, node: ETNode, dataset: DataSet) -> CollectiveRecord:
    """What ``dataset`` measured of collective ``node`` on ``rank``, copied."""
    return CollectiveRecord(
        rank,
        node,
        dataset.start_ns,
        dataset.finish_ns,
        PhaseTimes(bytes(dataset.phase_times)),
        dataset.total_streams,
        dataset.nccl_choice,
    )
