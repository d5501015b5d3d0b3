"""Worker processes that host ns-3, seen from the caller.

Each simulation runs in a worker: a plain subprocess (``python -m
astra_ns3.worker``) talking over a socket pair. If ns-3 aborts or the worker
dies any other way, the caller's next read sees end-of-file at once and
:class:`WorkerDied` names the exit status and the worker's last output; the
caller never hangs on a dead worker (the failure mode of a
``multiprocessing.Pool`` whose worker aborts). A worker serves one simulation
at a time and destroys it afterwards (``Simulator::Destroy``); a worker that
finished cleanly waits, idle, for the next simulation of the same caller, so
tens of small simulations do not each pay the start-up (``ASTRA_NS3_REUSE=0``
turns that off). Idle workers exit with the caller.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from astra_core.errors import AstraError

#: Idle workers kept per caller process.
MAX_IDLE = 1


class WorkerDied(AstraError):
    """The ns-3 worker process ended unexpectedly (crash, abort, kill)."""


class ModelError(AstraError):
    """The ns-3 model refused the input or could not finish (one line)."""


class WorkerProcess:
    """One worker subprocess and its connection."""

    def __init__(self) -> None:
        parent_end, child_end = socket.socketpair()
        self._log = tempfile.TemporaryFile()
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "astra_ns3.worker", str(child_end.fileno())],
                pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=self._log, env=env)
        finally:
            child_end.close()
        self.conn = Connection(parent_end.detach())
        self.info: dict[str, Any] = self.request(None, "ready")[1]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, message: tuple | None, expect: str) -> tuple:
        """Send ``message`` (if any) and return the reply tagged ``expect``.

        Raises WorkerDied, ModelError (the model's error line), or
        RuntimeError (a bug in the worker, with its traceback)."""
        try:
            if message is not None:
                self.conn.send(message)
            reply = self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            raise self._died() from None
        if reply[0] == expect:
            return reply
        self.close()
        if reply[0] == "error":
            raise ModelError(f"ns3 backend: {reply[1]}")
        raise RuntimeError(f"ns3 worker failed:\n{reply[1]}")

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
        return WorkerDied(f"ns3 backend: the ns-3 worker process (pid {self.proc.pid}) died with "
                          f"{how}{last}")

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


def acquire() -> WorkerProcess:
    """An idle worker if there is a live one, else a new one."""
    while _idle:
        worker = _idle.pop()
        if worker.alive():
            return worker
        worker.close()
    return WorkerProcess()


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
