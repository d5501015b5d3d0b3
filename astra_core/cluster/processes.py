"""The run of all jobs and the runs alone, several at once.

A cluster run is one simulation of all its jobs plus one per job alone
(:mod:`.run`); they are independent. :func:`run_beside` runs the first in this
process while forked workers of the one process pool (:mod:`astra_core.workers`)
run the others, and this process takes
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

import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from astra_core.errors import AstraError
from astra_core.lifetime import signals_held
from astra_core.workers import OUT_OF_MEMORY_EXIT, WorkerPool, describe_exit

__all__ = ["available_processes", "run_beside"]

T = TypeVar("T")
R = TypeVar("R")


def available_processes() -> int:
    """The CPUs this process may use (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


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
    workers = min(processes - 1, len(todo))
    if workers < 1 or not sys.platform.startswith("linux"):
        result = main()
        return result, {i: work(i) for i in todo}
    done: dict[int, R] = {}
    failed: list[BaseException] = []

    def lost(i: int, how: str) -> None:
        guess = "" if how == describe_exit(OUT_OF_MEMORY_EXIT) else "; out of memory?"
        failed.append(
            AstraError(
                f"{name(i)}: the process simulating it died ({how}{guess}); run again with "
                "one process (astra cluster --processes 1)"
            )
        )
        pool.kill()

    def serve() -> None:
        try:
            pool.serve(todo, done.__setitem__, lost)
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread below
            failed.append(exc)
            pool.kill()

    pool = WorkerPool(0, work=work, what="astra cluster")
    try:
        with signals_held():  # the workers fork here; a signal meanwhile arrives after
            pool.grow(workers)
        feeder = threading.Thread(target=serve, name="astra-cluster-workers")
        feeder.start()
        try:
            result = main()
            while not failed and (i := pool.take_unstarted()) is not None:  # last first
                done[i] = work(i)
        except BaseException:
            pool.kill()  # the feeder's wait ends as the workers die
            raise
        finally:
            feeder.join()
        if failed:
            raise failed[0]
        return result, done
    except BaseException:
        pool.kill()
        raise
    finally:
        pool.close()
