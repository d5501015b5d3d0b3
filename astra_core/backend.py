"""The contract between the system layer and a network backend.

The system layer (``astra_core.system``) knows a network only through
:class:`NetworkBackend`. A backend owns the simulated clock, times messages
between NPUs, and calls ``on_delivered`` when the last byte of a message has
arrived at its destination. Send/receive matching, chunking and collective state
live in the system layer, never in a backend.

Units: time in ns, sizes in bytes, bandwidth in GB/s only where an input file
says so (1 GB = 2^30 bytes, as upstream ASTRA-sim's network.yml).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from astra_core.errors import ConfigError
from astra_core.events import EventQueue, ProgressHook
from astra_core.topology.physical import PhysicalTopology

if TYPE_CHECKING:  # listing the backends must not load the config library (pydantic)
    from astra_core.config.network import NetworkConfig


@runtime_checkable
class NetworkBackend(Protocol):
    """What every network model offers to the system layer (the hot path).

    Calls are plain method calls (never pluggy hooks): a simulation makes
    millions of them.
    """

    def now(self) -> float:
        """Current simulated time in ns."""

    def schedule(self, delay_ns: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``callback(arg)`` at ``now() + delay_ns``; ``delay_ns`` >= 0.

        Callbacks scheduled for the same time run in the order they were
        scheduled, and ``schedule(0, f)`` runs ``f`` before time moves.
        """

    def send(
        self,
        src: int,
        dst: int,
        size_bytes: int,
        on_delivered: Callable[[Any], None],
        arg: Any = None,
        *,
        tag: int = 0,
    ) -> None:
        """Start moving ``size_bytes`` from NPU ``src`` to NPU ``dst`` now.

        ``on_delivered(arg)`` runs when the message has fully arrived. ``tag``
        identifies the stream for models that track flows. A backend finds
        the route (and the dimension it crosses) from ``src`` and ``dst``.
        """

    def run(self) -> None:
        """Process events until none remain."""


# -- optional capabilities ----------------------------------------------------------------------
# A backend may offer more than NetworkBackend. The host finds each capability
# through the function below it, never by probing attributes itself; the
# contract suite (tests/backends/test_contract.py) checks every backend that
# declares one.


@runtime_checkable
class SymmetricTiming(Protocol):
    """``symmetric`` True: a message's time depends only on the offset between its
    NPUs, never on other traffic or the absolute ids, so rank symmetry may let
    representatives stand for classes of ranks (:mod:`astra_core.system.symmetry`)."""

    symmetric: bool


@runtime_checkable
class OwnsEventQueue(Protocol):
    """``events``: the :class:`~astra_core.events.EventQueue` that owns the clock.
    Its ``progress`` hook drives progress lines; when ``schedule`` is
    ``events.schedule`` itself, the system layer schedules into it directly."""

    events: EventQueue


@runtime_checkable
class ReportsProgress(Protocol):
    """A backend that reports its own progress, for one whose clock is not an
    :class:`OwnsEventQueue` queue in ns (garnetlike counts ps) or whose work runs
    elsewhere (ns3's worker): it calls ``progress``, a
    :class:`~astra_core.events.ProgressHook` (None: off), while it runs, and
    ``report_progress()`` calls it once now (at the end of a run)."""

    progress: ProgressHook | None

    def report_progress(self) -> None: ...


@runtime_checkable
class LinkStatistics(Protocol):
    """Per directed link of ``topology`` after a run: ``link_bytes`` (bytes that
    crossed it) and ``link_busy_ns`` (time it was sending). Optionally
    ``max_queue`` (most messages waiting) and ``peak_flows`` (most flows at once),
    also per link. Read by :mod:`astra_core.report.links` for ``--plots``."""

    topology: PhysicalTopology
    link_bytes: Sequence[float]
    link_busy_ns: Sequence[float]


@runtime_checkable
class LinkSharing(Protocol):
    """``shares_links``: True when messages that cross a common link at the same time
    slow each other (the model divides or queues each link's capacity); False when
    every message sees an idle network whatever else is in flight (congestion-unaware
    models). Flow completion-time studies and background traffic need True."""

    shares_links: bool


@runtime_checkable
class LinkChanges(Protocol):
    """``change_links(bytes_per_ns)``: directed links of ``topology`` change now:
    ``bytes_per_ns[link]`` is link ``link``'s bandwidth from now on (0: down; routes
    then go round it over the links up, and a link given its bandwidth back carries
    routes again). The backend says in its ``change_links`` docstring what happens to
    messages in flight. Timed link faults (:mod:`astra_core.topology.faults`) need it."""

    def change_links(self, bytes_per_ns: Mapping[int, float]) -> None: ...


@runtime_checkable
class LoneMessageTime(Protocol):
    """``lone_message_ns(src, dst, size_bytes, tag)``: a lower bound (ns) on the time
    a message of ``size_bytes`` from NPU ``src`` to NPU ``dst`` on queue pair ``tag``
    takes on this model, reached when it is alone on the idle network, in the model's
    own framing (packet and header sizes, flits, rounding). Flow studies divide each
    flow's completion time by it (the FCT slowdown), so it must never exceed what
    the model gives."""

    def lone_message_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> float: ...


@runtime_checkable
class Counters(Protocol):
    """``stats``: whole-run counters by name (messages, packets, drops, ...)."""

    stats: Mapping[str, float]


def is_symmetric(backend: Any) -> bool:
    """Whether ``backend`` declares :class:`SymmetricTiming` and is symmetric now."""
    return isinstance(backend, SymmetricTiming) and backend.symmetric is True


def event_queue(backend: Any) -> EventQueue | None:
    """The backend's :class:`OwnsEventQueue` queue, or None."""
    if isinstance(backend, OwnsEventQueue) and isinstance(backend.events, EventQueue):
        return backend.events
    return None


def progress_hook(backend: Any) -> ProgressHook | None:
    """The progress hook installed on ``backend`` (:func:`set_progress`), or None."""
    if isinstance(backend, ReportsProgress):
        return backend.progress
    queue = event_queue(backend)
    return queue.progress if queue is not None else None


def set_progress(backend: Any, hook: ProgressHook | None) -> bool:
    """Have ``backend`` call ``hook`` as it runs (:class:`ReportsProgress`, else its
    :class:`OwnsEventQueue` queue every :data:`~astra_core.events.PROGRESS_EVERY`
    events); None detaches it. False when the backend cannot report progress."""
    if isinstance(backend, ReportsProgress):
        backend.progress = hook
        return True
    queue = event_queue(backend)
    if queue is None:
        return False
    queue.progress = hook
    return True


def report_progress(backend: Any) -> None:
    """Call ``backend``'s progress hook once now, if it has one (the run's last report)."""
    if isinstance(backend, ReportsProgress):
        backend.report_progress()
        return
    queue = event_queue(backend)
    if queue is not None and queue.progress is not None:
        queue.progress(queue.now, queue.events_processed)


def link_statistics(backend: Any) -> LinkStatistics | None:
    """The backend as :class:`LinkStatistics` if it keeps them on a physical topology,
    else None."""
    if isinstance(backend, LinkStatistics) and isinstance(backend.topology, PhysicalTopology):
        return backend
    return None


def shares_links(backend: Any) -> bool | None:
    """Whether ``backend`` models link sharing (:class:`LinkSharing`); None when it
    does not say."""
    if isinstance(backend, LinkSharing) and isinstance(backend.shares_links, bool):
        return backend.shares_links
    return None


def link_changes(backend: Any) -> Callable[[Mapping[int, float]], None] | None:
    """The backend's :meth:`LinkChanges.change_links`, or None."""
    if isinstance(backend, LinkChanges):
        return backend.change_links
    return None


def require_link_changes(backend: Any, name: str) -> Callable[[Mapping[int, float]], None]:
    """The backend's :meth:`LinkChanges.change_links`; ConfigError (one line naming the
    backend ``name``) when it has none, for timed link faults."""
    change = link_changes(backend)
    if change is None:
        raise ConfigError(
            f"faults: backend {name} cannot change links during a run (faults with at_us or until_us); "
            "use flow or analytical-congestion, or faults for the whole run"
        )
    return change


def lone_message_time(backend: Any) -> Callable[[int, int, int, int], float] | None:
    """The backend's :meth:`LoneMessageTime.lone_message_ns`, or None."""
    if isinstance(backend, LoneMessageTime):
        return backend.lone_message_ns
    return None


def counters(backend: Any) -> Mapping[str, float] | None:
    """The backend's :class:`Counters`, or None."""
    if isinstance(backend, Counters) and isinstance(backend.stats, Mapping):
        return backend.stats
    return None


@dataclass
class Topology:
    """What a backend factory is given to build its network.

    ``network`` holds the logical dimensions from network.yml (dimension 0
    varies fastest in an NPU id, as upstream). ``physical`` is a physical
    topology (from ``--topology``) for backends that model links; NPU rank
    ``r`` is its ``r``-th host.
    """

    network: NetworkConfig
    physical: PhysicalTopology | None = None

    @property
    def npus_count(self) -> int:
        return self.network.npus_count


# -- a budget for packet-level models --------------------------------------------------------


class WorkLimitExceeded(ConfigError):
    """A run would take a packet-level backend absurdly long (a limit its config sets)."""


def wall_time_text(seconds: float) -> str:
    """A projected wall time in words: ``"3.2 h"``, ``"1.4e+06 years"``."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            value = seconds / size
            if value < 100:
                return f"{value:.3g} {unit}"
            return f"{value:,.0f} {unit}" if value < 1e6 else f"{value:.2g} {unit}"
    return f"{seconds:.3g} s"


@runtime_checkable
class WorkModel(Protocol):
    """What a run would cost a backend, message by message, without simulating it.

    A backend offers one by registering ``work_model=`` (a function
    ``work_model(topology, config)``, see :mod:`astra_core.hookspecs`); :mod:`astra_core.estimate`
    runs the system layer on a cheap model and adds up, for every message,
    ``per_link(size)`` x ``hops(src, dst)``.

    ``unit`` names the work (``"packet-hops"``), ``rate`` is the model's
    measured speed in units per wall second and ``rate_source`` says where it
    was measured (a benchmark command). ``message_s``: wall seconds each
    message costs besides its units (set-up, completion, round trips with a
    worker; 0 where negligible). ``fast_forward``: the model skips most units
    of long steady flows (it then prices those it simulates as
    :class:`~astra_core.estimate.FastForwardWork`, or the units are an upper
    bound). ``limit``/``limit_key``: the config's work limit (None: none),
    against the budgeted units.
    """

    unit: str
    rate: float
    rate_source: str
    message_s: float
    fast_forward: bool
    limit: int | None
    limit_key: str

    def peak_memory_bytes(self, messages: int) -> int | None:
        """The run's peak resident memory (bytes) for ``messages`` messages, or None when
        the model cannot tell."""
        ...

    def per_link(self, size_bytes: int) -> tuple[int, int]:
        """(units the backend's :class:`WorkBudget` counts, units the model moves in all,
        e.g. data packets and data + ACK packets) per link a message of ``size_bytes``
        crosses."""
        ...

    def hops(self, src: int, dst: int) -> int:
        """Links a message from NPU ``src`` to NPU ``dst`` crosses (0 to itself); the same
        for every tag (every ECMP choice of a pair is equally long)."""
        ...


def work_model(make: Callable[..., Any] | None, topology: Topology, config: Any = None) -> WorkModel | None:
    """The :class:`WorkModel` ``make(topology, config)`` builds (the ``work_model`` a
    backend registered), or None when ``make`` is None. Raises what the plugin's
    config loading raises (ConfigError naming the file and key), and TypeError
    naming the members missing from what it returns."""
    if make is None:
        return None
    model = make(topology, config)
    if not isinstance(model, WorkModel):
        missing = [name for name in _WORK_MODEL_MEMBERS if not hasattr(model, name)]
        raise TypeError(f"work_model returned {type(model).__name__}, which lacks {', '.join(missing)}")
    return model


_WORK_MODEL_MEMBERS = (
    "unit",
    "rate",
    "rate_source",
    "message_s",
    "fast_forward",
    "limit",
    "limit_key",
    "peak_memory_bytes",
    "per_link",
    "hops",
)


class WorkBudget:
    """Counts a packet-level backend's projected work (flit-hops, packet-hops) as
    messages are sent, and refuses a run past ``limit`` before simulating it.

    ``unit`` names the work (``"flit-hops"``), ``rate`` is the model's typical
    speed in units per wall second (for the projection), ``key`` and
    ``source`` name the config key that sets ``limit`` (0 or None: no limit).
    """

    __slots__ = ("backend", "unit", "rate", "limit", "key", "source", "total")

    def __init__(self, backend: str, unit: str, rate: float, limit: int | None, key: str, source: str):
        self.backend = backend
        self.unit = unit
        self.rate = rate
        self.limit = limit or None
        self.key = key
        self.source = source
        self.total = 0

    def add(self, work: int, describe: Callable[..., str], *args: Any) -> None:
        """Count ``work`` units; ``describe(*args)`` (called only when refusing) says
        what was added, e.g. "message NPU 0 -> NPU 1 of 4294967296 B: 16777216 flits
        x 2 links". Raises :class:`WorkLimitExceeded` with the estimate when the
        run's total passes the limit."""
        self.total += work
        if self.limit is not None and self.total > self.limit:
            projected = wall_time_text(self.total / self.rate)
            where = "--backend-config" if self.source.startswith("<") else self.source
            raise WorkLimitExceeded(
                f"{self.backend} backend: {describe(*args)}; the run would move "
                f"{self.total:.3g} {self.unit} (about {projected} at {self.rate:.2g} "
                f"{self.unit}/s), past the limit {self.key} = {self.limit:.3g} (raise it in "
                f"{where}; 0 = no limit)"
            )
