"""The event queue that owns the simulated clock: the system layer's and the backends'.

The queue is C++ (``astra_core/cpp/kernel.cc``, the simulation kernel, built on
first use by :func:`astra_core.native.load_extension`). Events are kept in a
binary heap of ``(time_ns, sequence, callback, arg)``.
The sequence number makes events at the same time run in the order they were
scheduled, including events scheduled *at the current time while it is being
processed*: they run in the same time step, after everything already queued
for it. This is exactly the ordering of ASTRA-sim's analytical event queue
(``EventList::invoke_events`` drains a FIFO list per time), which several
collective algorithms depend on to reproduce upstream's timings.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from astra_core.native import load_extension

Callback = Callable[[Any], None]


class ProgressHook(Protocol):
    """What ``EventQueue.progress`` holds: called with the simulated time ``now_ns``
    (ns), the events the backend has executed so far, and a short ``note`` on what the
    backend is doing when its time stands still ('' otherwise). Backends that run
    their work elsewhere (ns3's worker) call it too, from their own heartbeat."""

    def __call__(self, now_ns: float, events: int, note: str = "", /) -> None: ...


_CPP = Path(__file__).resolve().parent / "cpp"
#: The kernel's one translation unit and the parts it includes (``cpp/kernel/``).
KERNEL_SOURCES = (_CPP / "kernel.cc",)
KERNEL_PARTS = tuple(sorted((_CPP / "kernel").glob("*.h")))
#: The public headers (``cpp/include/``), which the kernel and compiled network
#: models include alike: the C API for models (:data:`KERNEL_API_HEADER`,
#: docs/plugins.md) and the shared pieces docs/kernel.md lists (containers, heap,
#: routing, routes, deliveries, pipeline, max-min solver). Pass them as a native
#: source's ``headers``.
KERNEL_HEADERS = tuple(sorted((_CPP / "include").glob("*.h")))
KERNEL_API_HEADER = _CPP / "include" / "astra_kernel_api.h"


def kernel() -> ModuleType:
    """The simulation kernel's extension module (built on first use, then cached).
    Raises :class:`~astra_core.native.NativeUnavailable` when neither a C++
    compiler nor cppyy can build it."""
    return load_extension("_astra_kernel", KERNEL_SOURCES, (*KERNEL_HEADERS, *KERNEL_PARTS))


def kernel_api_address() -> int:
    """The address of the kernel's C API (the ``AstraKernelApi`` of
    :data:`KERNEL_API_HEADER`), for a compiled model loaded with
    :func:`astra_core.native.load`, which takes it as an ``int64``."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = (ctypes.py_object, ctypes.c_char_p)
    return int(get(kernel().C_API, b"_astra_kernel.C_API"))


_NATIVE_SEND = b"astra.native_send"  # the capsule's name, alive as long as the module


def native_send_capsule(address: int) -> Any:
    """The capsule ``astra.native_send`` that a backend offers as ``native_send``,
    holding the ``AstraNativeSend`` at ``address`` (in a compiled model, which must
    outlive the capsule: the backend keeps both)."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    return new(address, _NATIVE_SEND, None)


#: Events between two calls of ``EventQueue.progress`` (a power of two: a mask test).
PROGRESS_EVERY = 1 << 16


if TYPE_CHECKING:

    class EventQueue:
        """Heap-based event queue owning the simulated clock (ns).

        ``schedule(delay_ns, fn, arg)`` runs ``fn(arg)`` at ``now + delay_ns``;
        ``run()`` drains the queue. Times are whatever numbers the caller uses:
        ``now`` is an int where every delay that led to it was one (the
        analytical models truncate delays to whole ns like upstream), else a
        float.

        ``progress``, if set to a callable, is called as ``progress(now_ns,
        events_processed)`` every :data:`PROGRESS_EVERY` events while ``run()``
        drains the queue (progress bars); left None it costs nothing.

        ``step_end``, if set to a callable, is called with no argument when
        ``step_pending`` is true and the clock is about to move past the current
        time (or the queue has run dry); ``step_pending`` is cleared first. A
        model that batches the changes of one instant (a flow model re-solving
        its rates once per time step) sets ``step_pending`` when it has work
        waiting; ``step_end`` may schedule events, also at the current time.
        """

        now: float
        events_processed: int
        progress: ProgressHook | None
        step_end: Callable[[], None] | None
        step_pending: bool

        def schedule(self, delay_ns: float, callback: Callback, arg: Any = None, /) -> None:
            """Run ``callback(arg)`` after ``delay_ns`` (finite, >= 0) nanoseconds.

            Raises ValueError for a negative, infinite or NaN delay (a NaN time
            would break the heap's order; an infinite one would stop the clock at
            infinity)."""

        def schedule_at(self, time_ns: float, callback: Callback, arg: Any = None, /) -> None:
            """Run ``callback(arg)`` at absolute time ``time_ns`` (finite, >= now);
            raises ValueError otherwise."""

        def __len__(self) -> int: ...

        def next_time(self) -> float | None:
            """The time of the earliest queued event, or None if none is queued."""

        def run(self, until_ns: float | None = None, /) -> None:
            """Process events in time order until none remain (or ``until_ns``)."""

else:
    EventQueue = kernel().EventQueue
