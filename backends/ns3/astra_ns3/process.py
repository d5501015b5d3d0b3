"""Worker processes that host ns-3, seen from the caller.

Each simulation runs in a worker: a plain subprocess (``python -m
astra_ns3.worker``) talking over a socket pair. If ns-3 aborts or the worker
dies any other way, the caller's next read sees end-of-file at once and
:class:`WorkerDied` names the exit status and the worker's last output; the
caller never hangs on a dead worker (the failure mode of a
``multiprocessing.Pool`` whose worker aborts). Nor on a live one that makes no
progress: a busy worker beats several times a second with its simulated time
(:mod:`astra_ns3.worker`), and a worker that sends nothing (stopped, e.g. by
SIGSTOP) or whose simulated time stands still (a model spinning at one
instant) for ``watchdog_s`` wall seconds is killed and reported as
:class:`WorkerStalled`, naming the last simulated time. A worker serves one simulation
at a time and destroys it afterwards (``Simulator::Destroy``); a worker that
finished cleanly waits, idle, for the next simulation of the same caller, so
tens of small simulations do not each pay the start-up (``ASTRA_NS3_REUSE=0``
turns that off). :func:`prestart` starts one in the background when the
backend is built, so that its start-up overlaps the caller's own set-up.
Idle workers exit with the caller.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from astra_core.errors import AstraError

#: Idle workers kept per caller process.
MAX_IDLE = 1
#: Default wall seconds without progress before a worker is declared stalled.
WATCHDOG_S = 60.0
#: Least wall time allowed for a new worker's first word (Python start-up, before it beats).
START_GRACE_S = 30.0


class WorkerDied(AstraError):
    """The ns-3 worker process ended unexpectedly (crash, abort, kill)."""


class ModelError(AstraError):
    """The ns-3 model refused the input or could not finish (one line)."""


class WorkerStalled(AstraError):
    """The ns-3 worker made no progress for the watchdog's wall time (stopped, or
    spinning without advancing simulated time); it has been killed."""


def _process_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` ('T' stopped, 'R' running, ...), or '?'."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


class WorkerProcess:
    """One worker subprocess and its connection.

    ``watchdog_s``: wall seconds without progress (see the module docstring)
    before a request raises :class:`WorkerStalled`; the start-up (loading or
    compiling the model) counts as progress while the worker beats, and its
    first word may take up to :data:`START_GRACE_S`."""

    def __init__(self, watchdog_s: float = WATCHDOG_S, wait: bool = True) -> None:
        parent_end, child_end = socket.socketpair()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - open for the worker's life; close() closes it
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "astra_ns3.worker", str(child_end.fileno())],
                pass_fds=(child_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                env=env,
            )
        finally:
            child_end.close()
        self.conn = Connection(parent_end.detach())
        self.watchdog_s = watchdog_s
        self.info: dict[str, Any] | None = None
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Wait for the worker's first word (it has loaded the model), once."""
        if self.info is not None:
            return
        watchdog_s, self.watchdog_s = self.watchdog_s, max(self.watchdog_s, START_GRACE_S)
        try:
            self.info = self.request(None, "ready")[1]
        finally:
            self.watchdog_s = watchdog_s

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(
        self, message: tuple | None, expect: str, *, offset_ns: float = 0.0, sent_ns: float | None = None
    ) -> tuple:
        """Send ``message`` (if any) and return the reply tagged ``expect``.

        Raises WorkerDied, WorkerStalled (no progress for ``watchdog_s``; it
        names the last simulated time: the worker's clock plus ``offset_ns``,
        or ``sent_ns``, the caller's time when it sent the request), ModelError
        (the model's error line), or RuntimeError (a bug in the worker, with
        its traceback)."""
        try:
            if message is not None:
                self.conn.send(message)
            reply = self._await_reply(offset_ns, sent_ns)
        except (EOFError, OSError, BrokenPipeError):
            raise self._died() from None
        if reply[0] == expect:
            return reply
        self.close()
        if reply[0] == "error":
            raise ModelError(f"ns3 backend: {reply[1]}")
        raise RuntimeError(f"ns3 worker failed:\n{reply[1]}")

    def _await_reply(self, offset_ns: float, sent_ns: float | None) -> tuple:
        """The next reply that is not a heartbeat, watching for progress."""
        conn, limit = self.conn, self.watchdog_s
        progress_at = time.monotonic()
        last_mark: Any = None
        last_ps: int | None = None
        beats = 0
        while True:
            left = limit - (time.monotonic() - progress_at)
            if left <= 0:
                raise self._stalled(beats, last_ps, offset_ns, sent_ns)
            if not conn.poll(min(left, 1.0)):
                continue
            reply = conn.recv()
            if reply[0] != "beat":
                return reply
            mark = reply[1]
            if mark[0] == "run":
                last_ps = mark[1]
            if mark != last_mark:
                last_mark, beats = mark, 0
                progress_at = time.monotonic()
            else:
                beats += 1

    def _stalled(
        self, beats_without_progress: int, last_ps: int | None, offset_ns: float, sent_ns: float | None
    ) -> WorkerStalled:
        pid = self.proc.pid
        stopped = _process_state(pid) == "T"
        if stopped:
            how = "it is stopped (SIGSTOP or a debugger) and answers nothing"
        elif beats_without_progress:
            how = "it is busy but its simulated time stands still"
        else:
            how = "it answers nothing"
        if last_ps is not None:
            when = f"last simulated time {offset_ns + last_ps / 1000:.3f} ns"
        elif sent_ns is not None:
            when = f"last simulated time {sent_ns:.3f} ns"
        else:
            when = "while starting"
        self.proc.kill()  # SIGKILL ends a stopped process too
        self.proc.wait()
        self.close()
        return WorkerStalled(
            f"ns3 backend: the ns-3 worker (pid {pid}) made no progress for "
            f"{self.watchdog_s:g} s of wall time: {how}; {when}; killed it "
            f"(watchdog_s in the backend config sets the limit)"
        )

    def _died(self) -> WorkerDied:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        self._log.seek(0)
        lines = [ln.strip() for ln in self._log.read().decode(errors="replace").splitlines() if ln.strip()]
        last = f": {' | '.join(line[:200] for line in lines[-3:])}" if lines else ""
        self.close()
        return WorkerDied(f"ns3 backend: the ns-3 worker process (pid {self.proc.pid}) died with {how}{last}")

    def close(self) -> None:
        """End the worker (politely, then by force) and free its resources."""
        if self.alive():
            try:
                self.conn.send(("quit",))
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.conn.close()
        self._log.close()


_idle: list[WorkerProcess] = []


def acquire(watchdog_s: float = WATCHDOG_S) -> WorkerProcess:
    """An idle (or prestarted) worker if there is a live one, else a new one, ready;
    its watchdog is ``watchdog_s``. Raises WorkerDied if a prestarted one failed."""
    while _idle:
        worker = _idle.pop()
        if worker.alive() or worker.info is None:
            worker.watchdog_s = watchdog_s
            worker.wait_ready()  # a prestarted worker that died says why here
            return worker
        worker.close()
    return WorkerProcess(watchdog_s)


def prestart() -> None:
    """Start a worker in the background unless one is idle (or reuse is off); the
    next :func:`acquire` takes it."""
    if not _idle and os.environ.get("ASTRA_NS3_REUSE", "1") != "0":
        _idle.append(WorkerProcess(wait=False))


def release(worker: WorkerProcess) -> None:
    """Keep a worker whose simulation finished cleanly for the next one (or end it)."""
    if worker.alive() and len(_idle) < MAX_IDLE and os.environ.get("ASTRA_NS3_REUSE", "1") != "0":
        _idle.append(worker)
    else:
        worker.close()


@atexit.register
def close_idle() -> None:
    """End every idle worker (also runs at interpreter exit)."""
    while _idle:
        _idle.pop().close()
