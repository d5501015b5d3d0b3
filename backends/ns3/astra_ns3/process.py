"""Worker processes that host ns-3, seen from the caller.

Each simulation runs in a worker: a plain subprocess (``python -m
astra_ns3.worker``) talking over a socket pair. If ns-3 aborts or the worker
dies any other way, the caller's next read sees end-of-file at once and
:class:`WorkerDied` names the exit status and the worker's last output; the
caller never hangs on a dead worker (the failure mode of a
``multiprocessing.Pool`` whose worker aborts). Nor on a live one that makes no
progress: a busy worker beats several times a second with its simulated time,
events and messages (:mod:`astra_ns3.worker`), and a worker that sends
nothing (stopped, e.g. by SIGSTOP), that spins at one simulated instant
without any message starting or completing (a livelock), or that stays
inside one event, for ``watchdog_s`` wall seconds is killed and reported as
:class:`WorkerStalled`, saying which and naming the simulated time
(:mod:`astra_ns3.liveness`). Heavy work at one instant (messages completing
one after the other) is progress: the watchdog waits. A worker serves one simulation
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
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from astra.plugin import AstraError
from astra_ns3.liveness import LIVELOCK, STUCK, Watchdog

#: What ``WorkerProcess.request`` calls on each heartbeat.
BeatHook = Callable[[Watchdog], None]

#: Idle workers kept per caller process.
MAX_IDLE = 1
#: Default wall seconds without progress before a worker is declared stalled.
WATCHDOG_S = 60.0
#: Least wall time allowed for a new worker's first word (Python start-up, before it beats).
START_GRACE_S = 30.0
#: Heartbeat intervals without a beat after which a worker "answers nothing" (at most half
#: the watchdog's limit): a livelocked or busy worker still beats.
SILENT_BEATS = 10


class WorkerDied(AstraError):
    """The ns-3 worker process ended unexpectedly (crash, abort, kill)."""


class ModelError(AstraError):
    """The ns-3 model refused the input or could not finish (one line)."""


class WorkerStalled(AstraError):
    """The ns-3 worker made no progress for the watchdog's wall time (stopped, in a
    livelock at one simulated instant, or inside one event); it has been killed."""


def _process_stat(pid: int) -> tuple[str, float | None]:
    """The kernel's one-letter state of ``pid`` ('T' stopped, 'R' running, ...; '?' if
    unknown) and the CPU seconds it has used (user + system; None if unknown)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return "?", None


def _silent_s(watchdog_s: float) -> float:
    """Wall seconds without a beat that make a worker silent (:data:`SILENT_BEATS`)."""
    from astra_ns3.worker import BEAT_S  # the worker reads the same variable

    beat_s = float(os.environ.get("ASTRA_NS3_BEAT_S", BEAT_S))
    return min(SILENT_BEATS * beat_s, watchdog_s / 2)


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
                [sys.executable, "-m", "astra_ns3.worker", str(child_end.fileno()), str(os.getpid())],
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
        self,
        message: tuple | None,
        expect: str,
        *,
        offset_ns: float = 0.0,
        sent_ns: float | None = None,
        on_beat: BeatHook | None = None,
        context: Callable[[], str] | None = None,
    ) -> tuple:
        """Send ``message`` (if any) and return the reply tagged ``expect``.

        ``on_beat(watchdog)`` runs on each heartbeat while the worker is busy
        (progress lines read ``watchdog.last``); ``context()`` adds a clause to
        a WorkerStalled error (the caller's messages). Raises WorkerDied,
        WorkerStalled (no progress for ``watchdog_s``, see
        :mod:`astra_ns3.liveness`; it says which kind and names the simulated
        time: the worker's clock plus ``offset_ns``, or ``sent_ns``, the
        caller's time when it sent the request), ModelError (the model's error
        line), or RuntimeError (a bug in the worker, with its traceback)."""
        try:
            if message is not None:
                self.conn.send(message)
            reply = self._await_reply(offset_ns, sent_ns, on_beat, context)
        except (EOFError, OSError, BrokenPipeError):
            raise self._died() from None
        if reply[0] == expect:
            return reply
        self.close()
        if reply[0] == "error":
            raise ModelError(f"ns3 backend: {reply[1]}")
        raise RuntimeError(f"ns3 worker failed:\n{reply[1]}")

    def receive_raw(self) -> bytes:
        """The raw bytes the worker sends after some replies (``"finish"``); raises
        WorkerDied."""
        try:
            return self.conn.recv_bytes()
        except (EOFError, OSError):
            raise self._died() from None

    def _await_reply(
        self,
        offset_ns: float,
        sent_ns: float | None,
        on_beat: BeatHook | None,
        context: Callable[[], str] | None,
    ) -> tuple:
        """The next reply that is not a heartbeat, watching for progress
        (:class:`astra_ns3.liveness.Watchdog`); each beat is also handed to ``on_beat``."""
        conn = self.conn
        watchdog = Watchdog(self.watchdog_s)
        # The worker's CPU seconds at its last beat, or once the reply is a second late
        # (not read per request: most replies come within microseconds).
        cpu_s: float | None = None
        while True:
            left = watchdog.left_s()
            if not conn.poll(min(max(left, 0.0), 1.0)):
                if cpu_s is None:
                    cpu_s = _process_stat(self.proc.pid)[1]
                if left <= 0:
                    # Judged only once everything the worker sent is read: the caller may
                    # itself have been held up (a starved machine) with beats waiting.
                    raise self._stalled(watchdog, cpu_s, offset_ns, sent_ns, context() if context else "")
                continue
            reply = conn.recv()
            if reply[0] != "beat":
                return reply
            watchdog.beat(reply[1])
            cpu_s = _process_stat(self.proc.pid)[1]
            if on_beat is not None:
                on_beat(watchdog)

    def _stalled(
        self, watchdog: Watchdog, cpu_s: float | None, offset_ns: float, sent_ns: float | None, context: str
    ) -> WorkerStalled:
        pid = self.proc.pid
        last = watchdog.last
        if last is not None:
            when = f"; last simulated time {offset_ns + last.now_ps / 1000:.3f} ns"
        elif sent_ns is not None:
            when = f"; last simulated time {sent_ns:.3f} ns"
        else:
            when = "; while starting"
        state, cpu_now = _process_stat(pid)
        silent_s = watchdog.silent_s()
        if state == "T":
            how = "it is stopped (SIGSTOP or a debugger) and answers nothing"
        elif silent_s >= _silent_s(self.watchdog_s) or watchdog.state not in (LIVELOCK, STUCK):
            # Silence is not a livelock: a livelocked worker still beats. Its CPU time
            # tells a worker the machine starved (memory, CPU) from one busy without beating.
            used = ""
            if cpu_now is not None and cpu_s is not None:
                used = f", in which it used {cpu_now - cpu_s:.2f} s of CPU"
            how = f"it answers nothing (no heartbeat for {silent_s:.1f} s{used})"
        else:
            how, when = watchdog.diagnosis(offset_ns), ""  # the diagnosis names the time
        self.proc.kill()  # SIGKILL ends a stopped process too
        self.proc.wait()
        self.close()
        return WorkerStalled(
            f"ns3 backend: the ns-3 worker (pid {pid}) made no progress for "
            f"{self.watchdog_s:g} s of wall time: {how}{when}{'; ' + context if context else ''}; killed it "
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
