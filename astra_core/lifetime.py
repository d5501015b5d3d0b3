"""Child processes that never outlive their parent.

Every process astra starts for a run (the sweep's workers, the cluster's runs
alone, the ns-3 worker) calls :func:`die_with_parent` first: a busy child reads no
pipe, so the end-of-file its parent's death leaves would not stop it, and it
would go on simulating, orphaned.
"""

from __future__ import annotations

import ctypes
import os
import signal

__all__ = ["PR_SET_PDEATHSIG", "die_with_parent"]

#: Linux's prctl option (<linux/prctl.h>): the signal a process gets when its parent ends.
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel kill (SIGKILL) this process when its parent ``parent_pid`` ends,
    however it ends, SIGKILL included: Linux's ``prctl(PR_SET_PDEATHSIG)``. Exits at
    once if that parent is already gone. Where there is no prctl it does nothing (the
    caller's pipes then stop the child at its next read)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
