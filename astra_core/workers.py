"""Worker processes that run one task at a time each and lose only the task a dead
worker held: the one process pool of sweeps and clusters.

A worker starts one of two ways:

* a fresh interpreter (``python -c``) that runs ``target``, a ``"module:function"``
  name: never a fork or a re-import of the user's ``__main__``, so a script that
  calls ``astra.sweep()`` needs no ``if __name__ == "__main__":`` guard, and a parent
  with threads (Ray, Arrow) cannot hand a held lock to its workers. What a sweep uses.
* a fork of this process (Linux) that runs ``work``, a function: the worker starts
  with this process's memory (a cluster's traces, already read and composed). Forks
  happen only when the pool starts, within
  :func:`~astra_core.lifetime.signals_held`. What a cluster's runs alone use.

Protocol, over two pipes per worker: the worker sends :data:`READY` once it can run
tasks, then for each task it receives a ``(True, result)`` or, where the function
raised, ``(False, exception)``. End of input (the pool closed its end) ends the
worker. So the pool always knows which task a worker held: when a worker dies
(``os._exit``, a segfault, the OOM killer) that task alone is lost, and the caller
is told how the worker died. A task that raises MemoryError ends its worker
(:data:`OUT_OF_MEMORY_EXIT`) the same way: a Python heap that once filled keeps its
pages and would fail the tasks after it.

No worker outlives its pool: :meth:`WorkerPool.close` stops idle workers and kills
busy ones (``kill=True``: every one, at once), whatever ended the caller's loop
(KeyboardInterrupt, :class:`~astra_core.lifetime.Interrupted`); and on Linux the
kernel kills each worker when this process dies, even by SIGKILL
(:func:`~astra_core.lifetime.die_with_parent`). Workers ignore Ctrl-C, which a
terminal sends to the whole process group: the pool's process stops them.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection, wait
from typing import Any, cast

from astra_core.errors import AstraError
from astra_core.lifetime import die_with_parent, release_signals

READY = "ready"
#: A worker's exit status when its task ran out of memory: it leaves rather than reply,
#: since a heap that once filled may fail every task after (the pool replaces it).
OUT_OF_MEMORY_EXIT = 86
_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from astra_core.workers import serve_interpreter; serve_interpreter(sys.argv[2:])"
)
_STOP_WAIT_S = 5.0  # an idle worker exits at once; this only bounds a stuck one


def describe_exit(returncode: int | None) -> str:
    """How a process ended, in words: ``exit code 3``, ``killed by SIGSEGV``."""
    if returncode is None:
        return "still running"
    if returncode == OUT_OF_MEMORY_EXIT:
        return "out of memory: MemoryError"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def _become_worker(parent_pid: int) -> None:
    """A worker's first act, however it started: Ctrl-C and SIGTERM are the parent's to
    handle (it stops its workers; a fork held them, see
    :func:`~astra_core.lifetime.signals_held`), and the worker dies with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    release_signals()
    die_with_parent(parent_pid)


def _serve(tasks: Connection, results: Connection, function: Callable[[Any], Any]) -> None:
    """A worker's loop: READY, then one reply per task until end of input."""
    try:
        results.send(READY)
        while True:
            try:
                task = tasks.recv()
            except EOFError:
                return
            try:
                reply: tuple[bool, Any] = (True, function(task))
            except MemoryError:  # the task is lost; the pool says how and starts another worker
                os._exit(OUT_OF_MEMORY_EXIT)
            except Exception as exc:  # the caller's to raise, in its process
                reply = (False, exc)
            try:
                results.send(reply)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:  # cannot cross
                results.send((False, RuntimeError(f"a worker's reply could not be sent back: {exc}")))
    except BrokenPipeError:  # the pool is gone: nobody wants the reply
        return


def serve_interpreter(argv: list[str]) -> None:
    """A fresh-interpreter worker's entry: ``argv`` is the task pipe's read descriptor,
    the reply pipe's write descriptor, the parent's pid, the ``module:function`` to run
    and the modules to import first (all before READY, so that a worker that cannot
    load says so by dying before it is ready)."""
    import importlib

    task_fd, reply_fd, parent_pid = (int(a) for a in argv[:3])
    _become_worker(parent_pid)
    for module_name in argv[5:]:
        importlib.import_module(module_name)
    module, _, name = argv[3].partition(":")
    function = getattr(importlib.import_module(module), name)
    _serve(Connection(task_fd, writable=False), Connection(reply_fd, readable=False), function)


class _Worker:
    """One worker process, its two pipe ends, and the task it holds (None: idle)."""

    def __init__(self, pid: int, popen: subprocess.Popen | None, task_w: int, reply_r: int):
        self.pid = pid
        self._popen = popen  # a fresh interpreter; None for a fork (reaped with waitpid)
        self._returncode: int | None = None
        self.tasks = Connection(task_w, readable=False)
        self.replies = Connection(reply_r, writable=False)
        self.task: Any = None
        self.busy = False
        self.ready = False

    def give(self, task: Any) -> None:
        self.task, self.busy = task, True
        try:
            self.tasks.send(task)
        except OSError:  # it died already; the reply pipe's end of file says so
            pass

    def poll(self, block: bool = False) -> int | None:
        """Its exit status once it has ended (``block``: wait for that), else None."""
        if self._returncode is None:
            if self._popen is not None:
                self._returncode = self._popen.wait() if block else self._popen.poll()
            else:
                pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
                if pid != 0:
                    self._returncode = os.waitstatus_to_exitcode(status)
        return self._returncode

    def signal(self, signum: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def close(self, kill: bool) -> None:
        """Close its pipes (an idle worker then exits); kill it if it holds a task or
        ``kill`` (terminate a fresh interpreter, which may clean up; kill a fork)."""
        self.tasks.close()
        self.replies.close()
        if kill or self.busy:
            self.signal(signal.SIGKILL if self._popen is None or kill else signal.SIGTERM)

    def reap(self, wait_s: float) -> None:
        """Wait for the process to end; kill it if it has not within ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.poll() is None:
            self.signal(signal.SIGKILL)
            self.poll(block=True)


def _start_interpreter(target: str, preload: tuple[str, ...], what: str) -> _Worker:
    task_r, task_w = os.pipe()
    reply_r, reply_w = os.pipe()
    argv = [json.dumps(sys.path), str(task_r), str(reply_w), str(os.getpid()), target, "--", *preload]
    try:
        popen = subprocess.Popen(
            [sys.executable, "-c", _BOOT, *argv], pass_fds=(task_r, reply_w), stdin=subprocess.DEVNULL
        )
    except OSError as exc:
        for fd in (task_r, task_w, reply_r, reply_w):
            os.close(fd)
        raise AstraError(
            f"{what}: cannot start a worker process ({sys.executable}): {exc.strerror or exc}"
        ) from None
    os.close(task_r)
    os.close(reply_w)
    return _Worker(popen.pid, popen, task_w, reply_r)


def _start_fork(work: Callable[[Any], Any], others: list[_Worker]) -> _Worker:
    task_r, task_w = os.pipe()
    reply_r, reply_w = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the caller's code
        code = 0
        try:
            _become_worker(parent)
            for fd in (task_w, reply_r):
                os.close(fd)
            for other in others:  # the pool's ends of its other workers' pipes
                other.tasks.close()
                other.replies.close()
            _serve(Connection(task_r, writable=False), Connection(reply_w, readable=False), work)
        except BaseException:  # noqa: BLE001 - a forked worker must not unwind into the parent's code
            code = 1
        finally:
            os._exit(code)
    os.close(task_r)
    os.close(reply_w)
    return _Worker(pid, None, task_w, reply_r)


class WorkerPool:
    """``count`` worker processes, each running a fresh interpreter's ``target``
    (``"module:function"``, after importing the modules ``preload``) or, forked,
    ``work``: exactly one of the two.

    Give it tasks with :meth:`serve` (tasks are pickled to the workers and the
    results back). Raises AstraError naming ``what`` if a worker cannot start.
    Always :meth:`close` it (a ``with`` block does)."""

    def __init__(
        self,
        count: int,
        *,
        target: str | None = None,
        work: Callable[[Any], Any] | None = None,
        preload: tuple[str, ...] = (),
        what: str = "astra",
    ):
        if (target is None) == (work is None):
            raise TypeError("WorkerPool: give exactly one of target and work")
        self._target, self._work, self._preload, self._what = target, work, preload, what
        self._workers: list[_Worker] = []
        self._pending: deque[Any] = deque()
        self._admit: Callable[[Any], bool] | None = None
        self._lock = threading.Lock()
        self._closing = False
        self.grow(count)

    def grow(self, count: int) -> None:
        """Start ``count`` more workers (forks: hold signals around this, see
        :func:`~astra_core.lifetime.signals_held`)."""
        for _ in range(count):
            self._workers.append(self._start())

    def _start(self) -> _Worker:
        if self._target is not None:
            return _start_interpreter(self._target, self._preload, self._what)
        return _start_fork(cast(Callable[[Any], Any], self._work), self._workers)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.close(kill=kind is not None)

    def take_unstarted(self) -> Any:
        """A task no worker has started yet, the last given first, taken away from the
        pool (for the caller to run); None when there is none."""
        with self._lock:
            return self._pending.pop() if self._pending else None

    def serve(
        self,
        tasks: Iterable[Any],
        on_result: Callable[[Any, Any], None],
        on_lost: Callable[[Any, str], None],
        replace: bool = False,
        admit: Callable[[Any], bool] | None = None,
    ) -> None:
        """Run ``tasks`` on the workers until none is pending or held, calling here
        ``on_result(task, result)`` as each finishes (completion order) and
        ``on_lost(task, how)`` for the task of a worker that died (``how``: ``exit
        code 3``, ``killed by SIGKILL``). The dead worker is replaced if ``replace``;
        a task's exception is raised here. ``admit(task)``, asked as a worker takes the
        task, drops it unrun when False (a search that learns as results come in). May
        run in a thread while the caller takes back unstarted tasks
        (:meth:`take_unstarted`); returns early once the pool is closing."""
        with self._lock:
            self._admit = admit
            self._pending.extend(tasks)
        for worker in list(self._workers):
            self._feed(worker)
        while not self._closing:
            busy = {w.replies: w for w in self._workers if w.busy}
            if not busy:
                return
            for conn in cast("list[Connection]", wait(list(busy))):
                if self._closing:
                    return
                self._collect(busy[conn], on_result, on_lost, replace)

    def _feed(self, worker: _Worker) -> None:
        with self._lock:
            while self._pending and not self._closing:
                task = self._pending.popleft()
                if self._admit is None or self._admit(task):
                    worker.give(task)
                    return

    def _collect(self, worker: _Worker, on_result, on_lost, replace: bool) -> None:
        """Handle what ``worker`` sent (or its death); give it (or its replacement) the next task."""
        try:
            message = worker.replies.recv()
        except (EOFError, OSError):
            code = worker.poll(block=True)
            if self._closing:
                return
            if not worker.ready:
                raise AstraError(
                    f"{self._what}: a worker process could not start ({describe_exit(code)}); "
                    "see its messages above"
                ) from None
            task, worker.task, worker.busy = worker.task, None, False
            worker.close(kill=False)
            self._workers.remove(worker)
            on_lost(task, describe_exit(code))
            if replace and not self._closing:
                worker = self._start()
                self._workers.append(worker)
                self._feed(worker)
            return
        if message == READY:
            worker.ready = True
            return
        task, worker.task, worker.busy = worker.task, None, False
        ok, value = message
        if not ok:
            raise value
        on_result(task, value)
        self._feed(worker)

    def kill(self) -> None:
        """Kill every worker now (SIGKILL), busy or not: a :meth:`serve` running in
        another thread then returns, and :meth:`close` has nothing left to wait for."""
        self._closing = True
        for worker in list(self._workers):
            worker.signal(signal.SIGKILL)

    def close(self, kill: bool = False) -> None:
        """Stop every worker: close its pipes (an idle one exits) and kill a busy one, or
        every one at once with ``kill``; then wait for them. Safe to call twice."""
        self._closing = True
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.close(kill)
        for worker in workers:
            worker.reap(_STOP_WAIT_S)
