"""What an observer plugin sees of a running simulation: a read-only view.

The ``astra_run_started``, ``astra_run_progress`` and ``astra_run_finished``
hooks (:mod:`astra_core.hookspecs`) get a :class:`RunView`, never the
simulation itself: it answers questions (the NPUs, the simulated ranks, the
clock, messages and ET nodes done so far) and has nothing to call that would
change the run. Progress comes as a :class:`ProgressSample` each time the
backend reports (every :data:`~astra_core.events.PROGRESS_EVERY` events of an
event queue, each heartbeat of the ns3 worker) and once when the run ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from astra_core.config.network import NetworkConfig
    from astra_core.config.system import SystemConfig
    from astra_core.system.simulation import Simulation


class ProgressSample(NamedTuple):
    """One progress report of a run."""

    now_ns: float  #: simulated time, ns
    events: int  #: events the backend executed since the run started
    delivered: int  #: messages delivered so far (of the simulated ranks)
    sent: int  #: messages sent so far (of the simulated ranks)
    nodes_done: int  #: ET nodes the simulated ranks completed
    nodes_total: int  #: ET nodes the simulated ranks have
    note: str = ""  #: what the backend says while its time stands still ('' mostly)

    @property
    def delivered_fraction(self) -> float:
        """Messages delivered over messages sent (1 before the first send)."""
        return self.delivered / self.sent if self.sent else 1.0

    @property
    def nodes_fraction(self) -> float:
        """ET nodes done over ET nodes (0 for a run without nodes)."""
        return self.nodes_done / self.nodes_total if self.nodes_total else 0.0


class RunView:
    """A read-only view of one :class:`~astra_core.system.simulation.Simulation`.

    Under rank symmetry the simulated ranks are the representatives of their
    classes (:mod:`astra_core.system.symmetry`); message and node counts are
    theirs. A run that falls back to every rank (``symmetric`` turns False)
    counts afresh from there.
    """

    __slots__ = ("_sim",)

    def __init__(self, sim: Simulation):
        self._sim = sim

    @property
    def backend_name(self) -> str:
        """The registered name of the network backend (``--backend``)."""
        return self._sim.backend_name

    @property
    def npus_count(self) -> int:
        return self._sim.npus_count

    @property
    def network(self) -> NetworkConfig:
        """The run's logical network dimensions (treat as read-only)."""
        return self._sim.context.network

    @property
    def system(self) -> SystemConfig:
        """The run's system configuration (treat as read-only)."""
        return self._sim.context.system

    @property
    def symmetric(self) -> bool:
        """Whether representatives stand for classes of identical ranks."""
        return self._sim.symmetry is not None

    @property
    def symmetry_reason(self) -> str | None:
        """Why rank symmetry is off (None while it is on)."""
        return self._sim.symmetry_reason

    @property
    def simulated_ranks(self) -> tuple[int, ...]:
        """The ranks that run an engine."""
        return tuple(engine.rank for engine in self._sim.engines)

    @property
    def now_ns(self) -> float:
        """The simulated time (ns)."""
        return self._sim.backend.now()

    def sample(self, events: int, note: str = "", now_ns: float | None = None) -> ProgressSample:
        """A :class:`ProgressSample` of the run now (``events``: the backend's count)."""
        sim = self._sim
        matcher = sim.matcher
        engines = sim.engines
        return ProgressSample(
            self.now_ns if now_ns is None else now_ns,
            events,
            matcher.delivered,
            matcher.messages,
            sum(engine.done for engine in engines),
            sum(len(engine.graph) for engine in engines),
            note,
        )
