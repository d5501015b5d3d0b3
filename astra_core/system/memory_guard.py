"""The machine's memory as a run sees it, and a guard that stops a run before the
kernel's OOM killer ends the process without a word.

:func:`check_memory_left` runs with every progress report of a run (every
:data:`~astra_core.events.PROGRESS_EVERY` events of an event-queue backend):
when the memory the machine has available falls under :func:`memory_floor`,
the run stops with :class:`RunTooLarge`, one line saying how far it got, what
it holds and what it would need at its rate so far.
"""

from __future__ import annotations

import os

from astra_core.errors import AstraError


class RunTooLarge(AstraError):
    """A run needs, or would need, more memory than the machine has available."""


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc/self/statm``), or None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def available_bytes() -> int | None:
    """Memory the kernel can give this process now (Linux ``MemAvailable`` of
    ``/proc/meminfo``), or None where it does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def total_bytes() -> int | None:
    """The machine's memory (``MemTotal`` of ``/proc/meminfo``), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


#: Stop when less than this share of the machine's memory is left available ...
FLOOR_SHARE = 0.03
#: ... or less than this many bytes, whichever is more.
FLOOR_BYTES = 256 << 20


def memory_floor() -> int:
    """Bytes of available memory under which a run stops: :data:`FLOOR_SHARE` of the
    machine's, at least :data:`FLOOR_BYTES`."""
    total = total_bytes()
    return max(FLOOR_BYTES, int(FLOOR_SHARE * total)) if total else FLOOR_BYTES


def check_memory_left(now_ns: float, nodes_done: int, nodes_total: int) -> None:
    """Raise :class:`RunTooLarge` (one line) when the machine's available memory is
    under :func:`memory_floor`; ``nodes_done`` of ``nodes_total`` ET nodes of the
    simulated ranks are done at simulated time ``now_ns`` (``nodes_done`` 0: the run
    is being built or started, and ``nodes_total`` counts its ranks). Does nothing
    where the available memory is unknown."""
    available = available_bytes()
    if available is None or available >= memory_floor():
        return
    held = resident_bytes() or 0
    left = f"the machine has {gib_text(available)} of memory left and this run holds {gib_text(held)}"
    if not nodes_done:
        raise RunTooLarge(f"stopped while building or starting {nodes_total:,} ranks: {left}")
    need = gib_text(held * nodes_total // nodes_done)
    raise RunTooLarge(
        f"stopped at t = {now_ns:,.0f} ns with {nodes_done:,} of {nodes_total:,} ET nodes done: {left}; "
        f"at its rate so far it would need about {need}"
    )


def gib_text(size: int) -> str:
    """``"3.2 GiB"`` or ``"512 MiB"``."""
    return f"{size / 2**30:,.1f} GiB" if size >= 2**30 else f"{size / 2**20:,.0f} MiB"
