"""Where the points of a sweep run: in this process, a local process pool, or Ray.

Each executor calls ``on_row(row)`` in the calling process as each point
finishes (in completion order), so results can be saved one by one and a
sweep resumed after an interruption. Points never raise
(:func:`~astra_core.sweep.point.run_point`); a worker that dies (a crash, not
an exception) fails only the point it held, with that as its error.

* :func:`run_serial`: one point after another in this process (``workers=1``).
* :func:`run_pool`: a local pool of worker processes
  (:mod:`astra_core.sweep.pool`), one per CPU by default.
* :func:`run_ray`: Ray tasks (one CPU each) on a cluster at ``address``, or on
  a local Ray instance started for the sweep when ``address`` is None. The
  cluster's nodes need astra and every file the spec names at the same paths.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from astra_core.errors import AstraError
from astra_core.sweep import pool
from astra_core.sweep.point import error_line, failed_row, run_point
from astra_core.sweep.pool import OnRow

#: Ray tasks in flight at once when each is admitted as it is submitted.
RAY_IN_FLIGHT = 64


def default_workers() -> int:
    """One worker per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def run_serial(tasks: Sequence[dict], on_row: OnRow) -> None:
    """Run each task in this process, one after another (a point out of memory fails
    alone: there is no worker to end)."""
    for task in tasks:
        try:
            row = run_point(task)
        except MemoryError as exc:
            row = failed_row(task, error_line(exc))
        on_row(row)


def run_pool(tasks: Sequence[dict], on_row: OnRow, workers: int | None = None, **how: Any) -> None:
    """Run the tasks on a local pool of ``workers`` processes (default: one per CPU);
    see :func:`astra_core.sweep.pool.run_pool` (``how``: its ``target`` and ``failed``)."""
    if tasks:
        pool.run_pool(tasks, on_row, workers or default_workers(), **how)


def run_ray(
    tasks: Sequence[dict],
    on_row: OnRow,
    address: str | None = None,
    function: Callable[[dict], dict] = run_point,
    failed: Callable[[dict[str, Any], str], dict[str, Any]] = failed_row,
    admit: Callable[[dict], bool] | None = None,
) -> None:
    """Run the tasks as Ray tasks of ``function`` (see the module docstring); with
    ``admit``, at most :data:`RAY_IN_FLIGHT` at a time, each asked before it is submitted
    (False: dropped unrun)."""
    try:
        import ray
    except ImportError:
        raise AstraError("--ray needs Ray: pip install 'ray>=2.9'") from None
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            where = address or "a local Ray instance"
            raise AstraError(f"cannot start or reach Ray at {where}: {exc}") from None
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(function)
        waiting = list(reversed(tasks))
        pending: dict[Any, dict] = {}

        def submit() -> None:
            while waiting and (admit is None or len(pending) < RAY_IN_FLIGHT):
                task = waiting.pop()
                if admit is None or admit(task):
                    pending[remote.remote(task)] = task

        submit()
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    row = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    message = str(exc).strip().splitlines()
                    row = failed(task, f"Ray task failed: {message[0] if message else exc}")
                on_row(row)
            submit()
    finally:
        if started_here:
            ray.shutdown()
