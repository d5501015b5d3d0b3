"""Processes that stop when asked and never outlive their parent.

* Every process astra starts for a run (the sweep's workers, the cluster's runs
  alone, the ns-3 worker) calls :func:`die_with_parent` first: a busy child reads no
  pipe, so the end-of-file its parent's death leaves would not stop it, and it
  would go on simulating, orphaned.
* Within :func:`sigterm_raises`, SIGTERM raises :class:`Interrupted`, a
  KeyboardInterrupt: a command stops as on Ctrl-C, running its ``finally`` blocks
  (workers killed, half-written files removed).
* Within :func:`signals_held` (around a fork), Ctrl-C and SIGTERM wait and arrive
  after it: a KeyboardInterrupt raised in Python's at-fork callbacks is printed
  and ignored, and the command would run on to the end and exit 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Iterator

__all__ = [
    "PR_SET_PDEATHSIG",
    "Interrupted",
    "die_with_parent",
    "release_signals",
    "sigterm_raises",
    "signals_held",
]

#: Linux's prctl option (<linux/prctl.h>): the signal a process gets when its parent ends.
PR_SET_PDEATHSIG = 1
#: The signals that stop a command (held by :func:`signals_held`).
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


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


class Interrupted(KeyboardInterrupt):
    """SIGTERM (``signum``) reached a command: a KeyboardInterrupt, so that code that
    cleans up after Ctrl-C does the same here."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within: SIGTERM raises :class:`Interrupted` (main thread only: from another thread
    no handler can be set, and SIGTERM keeps ending the process at once; its children
    die with it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Within: SIGINT and SIGTERM are blocked in this thread and wait; one that came
    arrives as the block ends, where its handler raises in ordinary code. Hold them
    around a ``fork``: Python runs at-fork callbacks (logging's lock release) in which
    the handler's KeyboardInterrupt would be printed and ignored. Threads started
    within inherit the block (the signal then goes to a thread that takes it).
    Children forked within start blocked too: they call :func:`release_signals`."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def release_signals() -> None:
    """In a child forked within :func:`signals_held`: SIGINT and SIGTERM reach it
    again (with whatever handlers it has set)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
