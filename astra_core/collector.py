"""CPython's cyclic garbage collector around astra's large acyclic structures.

Traces, dependency graphs, symmetry tables and a run's messages are millions of
small objects without reference cycles (``tests/system/test_no_cycles.py``):
reference counting frees them, and each pass of the cyclic collector over them
is pure cost. A pass of the oldest generation walks every tracked object alive;
once a 128-rank step's traces and graphs are, a pass takes about a second
(Qwen3 235B at 128K tokens on 128 GB300, the validation suite's longest row: 20
such passes, 21 s of a 131 s run, collecting 100 objects in all).

* :func:`paused`: the collector off inside (decoding and generating run no code
  but astra's).
* :func:`few_passes`: around generating, preparing and running a simulation.
  Inside, objects alive on entry to any such block are set apart from the
  collector's passes (``gc.freeze``): the caller's and the earlier phases'
  structures are walked by none of the later passes; the young generation is
  collected every :data:`YOUNG_THRESHOLD` allocations (CPython's default: 700),
  so cycles a plugin makes are still collected. When the outermost block ends,
  what is still alive joins the oldest generation without a pass
  (``gc.unfreeze``). Where something else uses the permanent generation
  (``gc.get_freeze_count()`` is not 0 on the outermost entry, e.g. a server that
  froze its objects before forking), the blocks set nothing apart. A process
  forked inside a block (a worker of :mod:`astra_core.workers`) starts with none
  open and nothing set apart.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "few_passes", "paused"]

#: Allocations between two young-generation passes inside :func:`few_passes`. A run
#: allocates millions of short-lived objects (messages, events); at CPython's default
#: of 700 the collector's passes took half the time of a message-heavy run (a k = 12
#: fat-tree all-to-all: 25.3 s, 13.3 s with this).
YOUNG_THRESHOLD = 1_000_000

_lock = threading.Lock()
_depth = 0  # few_passes blocks open, in every thread
_owned = False  # the outermost block froze, so the permanent generation is astra's


def _set_apart() -> None:
    """Move every tracked object out of the collector's passes, if the permanent
    generation is astra's (a cheap list merge)."""
    if _owned:
        gc.freeze()


@contextmanager
def paused() -> Iterator[None]:
    """The cyclic collector off inside, as it was after; what was built inside is set
    apart before it runs again (inside :func:`few_passes`), else its first pass would
    walk all of it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        with _lock:
            _set_apart()
        if was_enabled:
            gc.enable()


def _forked() -> None:
    """In a process forked inside a :func:`few_passes` block (a worker of
    :mod:`astra_core.workers`, which never returns into its parent's code): none of the
    parent's blocks is the child's to end, so it starts with none open, nothing set
    apart and a lock no thread of its parent's may hold."""
    global _lock, _depth, _owned
    _lock = threading.Lock()
    if _owned:
        gc.unfreeze()
    _depth, _owned = 0, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


@contextmanager
def few_passes() -> Iterator[None]:
    """Generate, prepare or run with the collector's passes kept off astra's
    long-lived structures (module docstring); reentrant and thread-safe."""
    global _depth, _owned
    with _lock:
        if _depth == 0:
            _owned = gc.get_freeze_count() == 0
        _depth += 1
        _set_apart()
        before = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        with _lock:
            gc.set_threshold(*before)
            _depth = max(0, _depth - 1)  # 0 in a child forked inside (see _forked)
            if _depth == 0 and _owned:
                gc.unfreeze()
                _owned = False
