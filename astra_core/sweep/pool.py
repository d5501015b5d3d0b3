"""A sweep's local pool: worker processes (:mod:`astra_core.workers`, fresh
interpreters) that lose only the point a dead worker held.

When a worker dies (``os._exit``, a segfault, the OOM killer) that point alone gets
a failed row naming how the worker died, a new worker takes its place, and the
sweep goes on. (``concurrent.futures.ProcessPoolExecutor`` instead breaks as a
whole and fails every pending point.)

No worker outlives the sweep: they are stopped when the pool's loop ends for any
reason, including Ctrl-C (SIGINT: KeyboardInterrupt) and SIGTERM
(:class:`~astra_core.lifetime.Interrupted`, within
:func:`~astra_core.lifetime.sigterm_raises`, which
:func:`~astra_core.sweep.run.run_sweep` holds while points run); and on Linux the
kernel kills each worker when the sweep process dies, even by SIGKILL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from astra_core.sweep.point import failed_row
from astra_core.workers import WorkerPool

OnRow = Callable[[dict[str, Any]], None]


def run_pool(
    tasks: Sequence[dict],
    on_row: OnRow,
    workers: int,
    target: str = "astra_core.sweep.point:run_point",
    failed: Callable[[dict[str, Any], str], dict[str, Any]] = failed_row,
    admit: Callable[[dict[str, Any]], bool] | None = None,
) -> None:
    """Run ``tasks`` on ``workers`` worker processes, each task through ``target``
    (``"module:function"``: a sweep's points by default, ``astra plan``'s layouts),
    calling ``on_row(row)`` here as each finishes (completion order); ``failed(task,
    error)`` makes the row of a task whose worker died; ``admit(task)``, asked as a
    worker takes a task, drops it unrun when False.

    A worker that dies fails only its point (``worker process died while
    running this point (killed by SIGKILL)``) and is replaced. Raises
    AstraError if a worker cannot start (before it ran anything). Whatever
    ends the loop (KeyboardInterrupt, :class:`~astra_core.lifetime.Interrupted`, an exception from
    ``on_row``), every worker is gone when this returns.
    """

    def lost(task: dict[str, Any], how: str) -> None:
        on_row(failed(task, f"worker process died while running this point ({how})"))

    # astra's API is imported before a worker says it is ready: a worker that cannot
    # load astra stops the sweep with one error, rather than failing every point
    count = min(workers, len(tasks))
    with WorkerPool(count, target=target, preload=("astra_core.api",), what="sweep") as pool:
        pool.serve(tasks, lambda _task, row: on_row(row), lost, replace=True, admit=admit)
