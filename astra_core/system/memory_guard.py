"""The machine's memory as a run sees it, and a guard that stops a run before the
kernel's OOM killer ends the process without a word.

:func:`check_memory_left` runs with every progress report of a run (every
:data:`~astra_core.events.PROGRESS_EVERY` events of an event-queue backend), and
:func:`check_memory_building` every few engines built or started:
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
    return _meminfo_bytes("MemAvailable:")


def total_bytes() -> int | None:
    """The machine's memory (``MemTotal`` of ``/proc/meminfo``), or None."""
    return _meminfo_bytes("MemTotal:")


def _meminfo_bytes(field: str) -> int | None:
    """``field`` of ``/proc/meminfo`` (kB there) in bytes, or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field):
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
    simulated ranks are done at simulated time ``now_ns``. Does nothing where the
    available memory is unknown."""
    left = _memory_left_text()
    if left is None:
        return
    need = ""
    if nodes_done:
        need = f"; at its rate so far it would need about {gib_text(_held() * nodes_total // nodes_done)}"
    raise RunTooLarge(
        f"stopped at t = {now_ns:,.0f} ns with {nodes_done:,} of {nodes_total:,} ET nodes done: {left}{need}"
    )


def check_memory_building(ranks: int) -> None:
    """:func:`check_memory_left` while the engines of ``ranks`` ranks are built or
    started, before the first event."""
    left = _memory_left_text()
    if left is not None:
        raise RunTooLarge(f"stopped while building or starting {ranks:,} ranks: {left}")


def _memory_left_text() -> str | None:
    """What the machine has left and this run holds, when the memory left is under
    :func:`memory_floor`; else (or unknown) None."""
    available = available_bytes()
    if available is None or available >= memory_floor():
        return None
    return f"the machine has {gib_text(available)} of memory left and this run holds {gib_text(_held())}"


def _held() -> int:
    return resident_bytes() or 0


def gib_text(size: int) -> str:
    """``"3.2 GiB"`` or ``"512 MiB"``."""
    return f"{size / 2**30:,.1f} GiB" if size >= 2**30 else f"{size / 2**20:,.0f} MiB"


def check_nodes_fit(nodes: int, node_bytes: int, what: str, fewer: str) -> None:
    """Raise RunTooLarge, one line naming ``what``, when ``nodes`` trace nodes of
    ``node_bytes`` each need more memory than the machine has available (before a run
    copies them: ``--iterations``, a cluster job's ``iterations``); ``fewer`` names what
    to reduce."""
    need, have = nodes * node_bytes, available_bytes()
    if have is not None and need > have:
        raise RunTooLarge(
            f"{what}: {nodes:,} trace nodes to hold (about {need / 2**30:,.1f} GiB at {node_bytes} bytes "
            f"a node), more than the {have / 2**30:,.1f} GiB this machine has available; run fewer {fewer}"
        )
