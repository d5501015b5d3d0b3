"""A local pool of worker processes that loses only the point a dead worker held.

Each worker is a fresh interpreter running :mod:`astra_core.sweep.worker`,
with a pipe for its tasks and one for its rows, and holds one point at a
time. So the pool always knows which point a worker held: when a worker dies
(``os._exit``, a segfault, the OOM killer) that point alone gets a failed row
naming how the worker died, a new worker takes its place, and the sweep goes
on. (``concurrent.futures.ProcessPoolExecutor`` instead breaks as a whole and
fails every pending point.)

No worker outlives the sweep: they are terminated when the pool's loop ends
for any reason, including Ctrl-C (SIGINT: KeyboardInterrupt) and SIGTERM
(:class:`~astra_core.lifetime.Interrupted`, within
:func:`~astra_core.lifetime.sigterm_raises`, which
:func:`~astra_core.sweep.run.run_sweep` holds while points run); and on Linux
the kernel kills each worker when the sweep process dies, even by SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, cast

from astra_core.errors import AstraError
from astra_core.sweep.point import failed_row
from astra_core.sweep.worker import READY

OnRow = Callable[[dict[str, Any]], None]
_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from astra_core.sweep.worker import main; main(sys.argv[2:])"
)
_STOP_WAIT_S = 5.0  # an idle worker exits at once; this only bounds a stuck one


def describe_exit(returncode: int | None) -> str:
    """How a process ended, in words: ``exit code 3``, ``killed by SIGSEGV``."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class _Worker:
    """One worker process, its two pipe ends, and the task it holds (None when idle)."""

    def __init__(self) -> None:
        task_r, task_w = os.pipe()
        row_r, row_w = os.pipe()
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _BOOT,
                    json.dumps(sys.path),
                    str(task_r),
                    str(row_w),
                    str(os.getpid()),
                ],
                pass_fds=(task_r, row_w),
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            for fd in (task_r, task_w, row_r, row_w):
                os.close(fd)
            raise AstraError(
                f"sweep: cannot start a worker process ({sys.executable}): {exc.strerror or exc}"
            ) from None
        os.close(task_r)
        os.close(row_w)
        self.tasks = Connection(task_w, readable=False)
        self.rows = Connection(row_r, writable=False)
        self.task: dict[str, Any] | None = None
        self.ready = False

    def give(self, task: dict[str, Any]) -> None:
        self.task = task
        try:
            self.tasks.send(task)
        except OSError:  # it died already; the row pipe's end of file says so
            pass

    def stop(self) -> None:
        """Close its pipes (an idle worker then exits) and terminate it if it holds a point."""
        self.tasks.close()
        self.rows.close()
        if self.task is not None and self.process.poll() is None:
            self.process.terminate()

    def reap(self, wait_s: float) -> None:
        """Wait for the process to end; kill it if it has not within ``wait_s``."""
        try:
            self.process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def run_pool(tasks: Sequence[dict], on_row: OnRow, workers: int) -> None:
    """Run ``tasks`` on ``workers`` worker processes, calling ``on_row(row)`` here as
    each finishes (completion order).

    A worker that dies fails only its point (``worker process died while
    running this point (killed by SIGKILL)``) and is replaced. Raises
    AstraError if a worker cannot start (before it ran anything). Whatever
    ends the loop (KeyboardInterrupt, :class:`~astra_core.lifetime.Interrupted`, an exception from
    ``on_row``), every worker is gone when this returns.
    """
    pending = deque(tasks)
    pool: list[_Worker] = []
    try:
        for _ in range(min(workers, len(pending))):
            worker = _Worker()
            pool.append(worker)
            worker.give(pending.popleft())
        while any(w.task is not None for w in pool):
            busy = {w.rows: w for w in pool if w.task is not None}
            for conn in cast("list[Connection]", wait(list(busy))):  # of those given
                _collect(busy[conn], pool, pending, on_row)
    finally:
        for worker in pool:
            worker.stop()
        for worker in pool:
            worker.reap(_STOP_WAIT_S)


def _collect(worker: _Worker, pool: list[_Worker], pending: deque, on_row: OnRow) -> None:
    """Handle what ``worker`` sent (or its death); give it (or its replacement) the next task."""
    try:
        message = worker.rows.recv()
    except (EOFError, OSError):
        code = worker.process.wait()
        if not worker.ready:
            raise AstraError(
                f"sweep: a worker process could not start ({describe_exit(code)}); see its messages above"
            ) from None
        task, worker.task = worker.task, None
        worker.stop()
        pool.remove(worker)
        # a task: only workers holding one are waited on
        on_row(
            failed_row(
                cast("dict[str, Any]", task),
                f"worker process died while running this point ({describe_exit(code)})",
            )
        )
        if pending:
            worker = _Worker()
            pool.append(worker)
            worker.give(pending.popleft())
        return
    if message == READY:
        worker.ready = True
        return
    worker.task = None
    on_row(message)
    if pending:
        worker.give(pending.popleft())
