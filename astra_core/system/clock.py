"""The clock of a network backend as the system layer reads it: ``now`` (ns) and
``schedule(delay_ns, callback, arg)``."""

from __future__ import annotations

from astra_core.backend import event_queue


class BackendClock:
    """``now`` and ``schedule`` of any backend, as the event queue spells them."""

    __slots__ = ("_backend", "schedule")

    def __init__(self, backend):
        self._backend = backend
        self.schedule = backend.schedule

    @property
    def now(self) -> float:
        """The backend's simulated time (ns)."""
        return self._backend.now()


def clock_of(backend):
    """The backend's EventQueue when it schedules straight into one (a fast path:
    attribute reads instead of calls), else a :class:`BackendClock`."""
    events = event_queue(backend)
    if events is not None and getattr(backend, "schedule", None) == events.schedule:
        return events
    return BackendClock(backend)
