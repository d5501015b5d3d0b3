"""The run of all jobs and the runs alone, several at once.

A cluster run is one simulation of all its jobs plus one per job alone
(:mod:`.run`); they are independent. :func:`run_beside` runs the first in this
process while forked worker processes run the others, and this process takes
the runs alone that no worker has started once its own run is done. A forked
worker starts with this process's memory (the traces already read and composed)
and sends back only what a run alone keeps (:data:`~.cache.AloneRun`). Where
``fork`` is unsafe (not Linux) or one process is asked for, everything runs
here, one after the other. Results do not depend on how many processes ran
them: each run is the same deterministic simulation wherever it runs.

No worker outlives the call: whatever ends it early (an error, Ctrl-C, SIGTERM
raised as KeyboardInterrupt by the command line) kills the workers at once rather
than waiting for their runs, and on Linux the kernel kills each worker when this
process dies, even by SIGKILL. Workers ignore Ctrl-C, which a terminal sends to
the whole process group: this process stops them.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from astra_core.errors import AstraError
from astra_core.lifetime import die_with_parent, release_signals, signals_held

__all__ = ["available_processes", "run_beside"]

T = TypeVar("T")
R = TypeVar("R")

# The runs alone of the current run_beside call: what a forked worker calls.
_WORK: Callable[[int], object] | None = None


def available_processes() -> int:
    """The CPUs this process may use (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _start_worker(parent_pid: int) -> None:
    """A forked worker's first act: Ctrl-C and SIGTERM are the parent's to handle (it
    kills its workers); the worker dies with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    release_signals()  # forked while the parent held them
    die_with_parent(parent_pid)


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """Kill ``pool``'s workers now, busy or not (``shutdown`` would wait for their runs)."""
    kill = getattr(pool, "kill_workers", None)  # Python >= 3.14
    if kill is not None:  # pragma: no cover - newer Python
        kill()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.kill()


def _call(index: int) -> Any:
    assert _WORK is not None  # set before the workers were forked
    return _WORK(index)


def run_beside(
    main: Callable[[], T],
    work: Callable[[int], R],
    todo: Sequence[int],
    processes: int,
    name: Callable[[int], str],
) -> tuple[T, dict[int, R]]:
    """``main()`` here and ``work(i)`` for each ``i`` of ``todo``, in at most ``processes``
    processes in all (this one included): ``(main's result, {i: work(i)})``. Raises what
    ``main`` or a ``work`` raises (KeyboardInterrupt included), the workers killed first,
    and AstraError naming ``name(i)`` for a worker that died (killed, out of memory)."""
    global _WORK
    workers = min(processes - 1, len(todo))
    if workers < 1 or not sys.platform.startswith("linux"):
        result = main()
        return result, {i: work(i) for i in todo}
    _WORK = work
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(os.getpid(),),
    )
    try:
        with signals_held():  # the workers fork here; a signal meanwhile arrives after
            futures: dict[int, Future[R]] = {i: pool.submit(_call, i) for i in todo}
        result = main()
        done = _take_unstarted(futures, work, todo)
        for i in todo:
            if i not in done:
                done[i] = _result(futures[i], name(i))
        return result, done
    except BaseException:
        _kill_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _WORK = None


def _take_unstarted(
    futures: dict[int, Future[R]], work: Callable[[int], R], todo: Sequence[int]
) -> dict[int, R]:
    """Run here, last first, each run no worker has started yet."""
    done: dict[int, R] = {}
    for i in reversed(todo):
        if futures[i].cancel():
            done[i] = work(i)
    return done


def _result(future: Future[R], what: str) -> R:
    try:
        return future.result()
    except BrokenProcessPool:
        raise AstraError(
            f"{what}: the process simulating it died (out of memory?); run again with one process "
            "(astra cluster --processes 1)"
        ) from None
