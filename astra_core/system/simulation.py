"""One simulation: every rank's engine on one network backend.

Builds a :class:`~astra_core.system.engine.RankEngine` per NPU, starts them all
at time 0, lets the backend drain its events, and turns what happened into a
:class:`~astra_core.report.results.RunResult`. If the events run out while a
rank still has unfinished nodes, the run is a deadlock and
:class:`~astra_core.errors.SimulationDeadlock` says which ranks wait on what;
a run that finishes with sends no receive matched warns
(:mod:`astra_core.system.wait_report`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from astra_core.backend import progress_hook, set_progress
from astra_core.config.memory import MemoryConfig, MemoryType
from astra_core.config.network import NetworkConfig, TopologyKind
from astra_core.config.system import SystemConfig
from astra_core.errors import ConfigError
from astra_core.report.breakdown import flat_covered, flight_pairs, subtract, total, union
from astra_core.report.results import CollectiveRecord, RankResult, RankTimeline, RunResult
from astra_core.system.collectives.custom import custom_sources
from astra_core.system.collectives.nccl.model import NcclModel
from astra_core.system.comm_types import CommType
from astra_core.system.engine import RankEngine, TieOrderMatters
from astra_core.system.memory import RemoteMemory
from astra_core.system.p2p import MessageMatcher, MirroredMatcher
from astra_core.system.symmetry import find_symmetry
from astra_core.system.wait_report import describe_wait, raise_deadlock, warn_unreceived_sends
from astra_core.workload.chakra import ETNode
from astra_core.workload.graph import RankGraph
from astra_core.workload.network_fit import check_network_fit

if TYPE_CHECKING:
    from astra_core.config.nccl import NcclConfig


class Simulation:
    """All ranks of one run. ``graphs[r]`` is rank r's dependency graph.

    ``symmetry``: simulate one rank per class of identical ranks where that is
    exact (:mod:`astra_core.system.symmetry`); it needs ``fresh_backend``, a
    function building another backend like ``backend``, to run every rank
    instead if the classes turn out not to hold (see :meth:`run`).
    """

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
        collective_plugins: dict | None = None,
        fresh_backend: Callable[[], Any] | None = None,
    ):
        self.network = network
        self.system = system
        self.backend = backend
        self.backend_name = backend_name
        self.npus_count = network.npus_count
        self.memory = RemoteMemory(memory or MemoryConfig(MemoryType.NO_MEMORY_EXPANSION))
        self.comm_groups = dict(comm_groups or {})
        self.implementations = {
            CommType.ALL_REDUCE: system.algorithms("all-reduce"),
            CommType.ALL_GATHER: system.algorithms("all-gather"),
            CommType.REDUCE_SCATTER: system.algorithms("reduce-scatter"),
            CommType.ALL_TO_ALL: system.algorithms("all-to-all"),
        }
        self.collective_plugins = dict(collective_plugins or {})
        self._check_plugin_algorithms()
        self.custom = custom_sources(system)
        self.nccl: NcclModel | None = None
        if any(str(a) == "nccl" for algorithms in self.implementations.values() for a in algorithms):
            # the config's validation requires the nccl section when an implementation is "nccl"
            self.nccl = NcclModel(cast("NcclConfig", system.nccl), network, system.source)
        # the trace's own sends and receives at NCCL's cost (nccl.p2p, on by default)
        self.nccl_p2p = self.nccl if self.nccl is not None and self.nccl.config.p2p else None
        check_network_fit(graphs, network.npus_per_dim, roofline=system.roofline_enabled)
        self.collectives: list[CollectiveRecord] = []
        self._finished = 0
        if symmetry and self.custom:
            self.symmetry, self.symmetry_reason = None, "custom collectives give ranks their own programs"
        elif symmetry:
            self.symmetry, self.symmetry_reason = find_symmetry(
                graphs,
                [d.npus for d in network.dims],
                self.implementations,
                self.comm_groups,
                self.memory.config.memory_type,
                backend,
                self.nccl,
                [d.kind is not TopologyKind.RING for d in network.dims],
            )
        else:
            self.symmetry, self.symmetry_reason = None, "turned off"
        self.graphs = list(graphs)
        # The full run to fall back on if the ranks of a class part ways
        # (engine.TieOrderMatters) needs a backend no event has touched.
        self._fresh_backend = fresh_backend
        if self.symmetry is not None and fresh_backend is None:
            self.symmetry, self.symmetry_reason = None, "no fresh backend to fall back on"
        self._build_engines()

    def _build_engines(self) -> None:
        """One engine per rank, or per class representative under rank symmetry."""
        if self.symmetry is not None:
            # Representatives stand for their classes (astra_core.system.symmetry).
            self.matcher: MessageMatcher = MirroredMatcher(self.backend, self.symmetry, self.npus_count)
            self.engines = [RankEngine(r, self.graphs[r], self) for r in self.symmetry.representatives()]
        else:
            self.matcher = MessageMatcher(self.backend, self.npus_count)
            self.engines = [RankEngine(rank, graph, self) for rank, graph in enumerate(self.graphs)]

    def _check_plugin_algorithms(self) -> None:
        """Every ``plugin:NAME`` in system.json must be registered (ConfigError)."""
        for comm_type, algorithms in self.implementations.items():
            for index, name in enumerate(algorithms):
                plugin = name.plugin_name
                if plugin is not None and plugin not in self.collective_plugins:
                    known = ", ".join(sorted(self.collective_plugins)) or "none"
                    raise ConfigError(
                        f"{self.system.source}: {comm_type.label}-implementation"
                        f"[{index}]: no plugin registered collective algorithm "
                        f"'{plugin}' (registered: {known})"
                    )

    # -- callbacks from the engines ------------------------------------------
    def rank_finished(self, rank: int) -> None:
        self._finished += 1

    def record_collective(self, rank: int, node: ETNode, dataset) -> None:
        self.collectives.append(CollectiveRecord(rank, node, dataset))

    # -- running ----------------------------------------------------------------
    def run(self) -> RunResult:
        """Run to completion; raises SimulationDeadlock if some rank cannot finish.

        A rank-symmetric run in which a rank's choice hangs on the order of
        same-time events (which differs between the ranks of a class in the
        full run) is abandoned and run again without symmetry, on a fresh
        backend.
        """
        with _rare_collections():
            try:
                self._start_and_drain()
            except TieOrderMatters as why:
                self._fall_back(f"ranks of a class part ways ({why})")
                self._start_and_drain()
        return self._result()

    def _start_and_drain(self) -> None:
        for engine in self.engines:
            engine.start()
        self.backend.run()

    def _fall_back(self, reason: str) -> None:
        """Drop the symmetric attempt: every rank runs, on the spare backend."""
        # a symmetric run has a fresh backend (__init__ turns symmetry off without one)
        old, self.backend = self.backend, cast("Callable[[], Any]", self._fresh_backend)()
        # A progress observer hooked the first backend: move it over.
        hook = progress_hook(old)
        if hook is not None:
            set_progress(old, None)
            set_progress(self.backend, hook)
        self.symmetry, self.symmetry_reason = None, reason
        self.collectives = []
        self._finished = 0
        self._build_engines()

    def _result(self) -> RunResult:
        if self._finished < len(self.engines):
            raise_deadlock(self)
        warn_unreceived_sends(self)
        flights = self.matcher.in_flight  # built once: a dict over every rank
        ranks = [self._rank_result(e, flights.get(e.rank, ())) for e in self.engines]
        messages, message_bytes = self.matcher.messages, self.matcher.bytes
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
        return RunResult(
            backend=self.backend_name,
            ranks=ranks,
            collectives=self.collectives,
            traces=[RankTimeline(e.rank, e.records, e.nodes, flights.get(e.rank, ())) for e in self.engines],
            network=self.backend,
            graphs=self.graphs,
            messages=messages,
            message_bytes=message_bytes,
            symmetric=self.symmetry is not None,
            representative=representative,
        )

    @staticmethod
    def _rank_result(engine: RankEngine, log: Sequence[float]) -> RankResult:
        """``engine``'s times; ``log``: its in-flight intervals (``MessageMatcher.in_flight``)."""
        finish = engine.finish_ns or 0
        comm = union(engine.comm_intervals)
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

    # -- what a run left undone -------------------------------------------------------
    def describe_wait(self, engine: RankEngine, rank: int, node: ETNode) -> str:
        """What ``node`` of ``rank`` waits on; ``engine`` runs ``rank`` or, under
        rank symmetry, its representative (see :mod:`astra_core.system.wait_report`)."""
        return describe_wait(self, engine, rank, node)


#: Allocations between two young-generation passes of the cyclic garbage collector
#: during a run (CPython's default: 700).
RUN_GC_THRESHOLD = 1_000_000


@contextmanager
def _rare_collections():
    """Run with the cyclic GC's young-generation threshold raised to
    :data:`RUN_GC_THRESHOLD`, then restore it. A run allocates millions of
    short-lived objects (messages, events) and frees them by reference counting
    (it makes no reference cycles: ``tests/system/test_no_cycles.py``); at the
    default threshold the collector's passes took half the time of a message-heavy
    run (a k = 12 fat-tree all-to-all: 25.3 s, 13.3 s with this). Cycles a
    plugin makes are still collected, in passes a million allocations apart."""
    before = gc.get_threshold()
    gc.set_threshold(RUN_GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
