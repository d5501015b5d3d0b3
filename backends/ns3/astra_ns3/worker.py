"""The worker process: ns-3 and the C++ model live here, never in the caller.

Started by :mod:`astra_ns3.process` as ``python -m astra_ns3.worker FD PID`` with
one end of a socket pair as file descriptor FD and the caller's process id PID (the
worker dies with it: :func:`astra_core.lifetime.die_with_parent`). It loads the model
(:func:`astra_ns3.native.load`, mode from ``$ASTRA_NS3_LIBRARY``: ``auto``,
``compiled`` or ``jit``), says ``("ready", info)``, then serves one
simulation at a time (messages are pickled tuples):

``("setup", settings, switches, cables)``
    a fresh fabric: model settings, one is-switch flag per node, and per
    cable ``(link_ab, link_ba, a, b, rate_ab, rate_ba, delay_ps, kmin_ab,
    kmax_ab, pmax_ab, kmin_ba, kmax_ba, pmax_ba)``. Reply ``("ok",)``.
``("step", start_ps, until_ps, qps, flows)``
    advance to ``start_ps`` (no message can complete before it), add the
    queue pairs ``qps`` (``(id, src_node, dst_node, fwd_links, rev_links)``)
    and start the messages ``flows`` (bytes: native int64 triples ``(id,
    queue_pair, bytes)``) there, and run until messages complete (all those
    completing at the same instant) or until ``until_ps`` (-1: no limit). Reply ``("step", status,
    now_ps, completed_ids, progress)``; status 1 completions, 0 reached
    ``until_ps``, 2 no events left; progress is
    :meth:`astra_ns3.native.Library.progress` (time, events, messages
    started and completed).
``("finish",)``
    destroy the simulator so the next setup starts clean and reply
    ``("finish", results, shape)`` (counters and monitor samples as numpy
    arrays), then the per-message counters (``flows`` of
    :meth:`astra_ns3.native.Library.results`, int64 of ``shape``) as raw
    bytes: a pickle would copy them (72 bytes a message) on both sides.
``("crash",)``
    abort as a failed ns-3 assertion would (tests of the isolation).

A model error replies ``("error", message)``; a bug replies ``("bug",
traceback)``. End of input ends the process.

Liveness. While the worker loads the model or serves a command, a heartbeat
thread sends ``("beat", mark)`` every ``$ASTRA_NS3_BEAT_S`` seconds (0.1):
inside the C++ event loop ``mark`` is ``("run", now_ps, events, started,
completed)`` (:meth:`astra_ns3.native.Library.progress`, read while the loop
runs: ctypes releases the GIL), elsewhere ``("busy", n)`` with n counting up.
The caller's watchdog (:mod:`astra_ns3.liveness`) tells heavy work at one
instant from a livelock and a stopped worker, and ends the latter two; the
caller's progress line shows the beats. No beat follows a reply, so an idle
worker sends nothing.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from astra.plugin import die_with_parent

#: Seconds between heartbeats while busy (the caller's watchdog allows >= 1 s).
BEAT_S = 0.1


class Heartbeat:
    """Sends ``("beat", mark)`` while the worker is busy; every send on the
    connection (beats and replies) goes through :meth:`send`, under one lock."""

    def __init__(self, conn: Connection, interval: float):
        self.conn = conn
        self.interval = interval
        self.lock = threading.Lock()
        self.busy = True  # loading the model
        # While the C++ event loop runs, the progress reader (Library.progress); set
        # and cleared under run_lock, so the model is never read once the loop has
        # returned (a later Simulator::Destroy would make the read rebuild a simulator).
        self.run_lock = threading.Lock()
        self.probe: Callable[[], tuple[int, int, int, int]] | None = None
        self.beats = 0
        threading.Thread(target=self._beat, name="astra-ns3-heartbeat", daemon=True).start()

    def send(self, reply: tuple, raw: Any = None) -> None:
        """Send a reply, and then ``raw`` (a buffer: a numpy array) unpickled if given; no
        beat follows them until the next command."""
        with self.lock:
            self.busy = False
            self.conn.send(reply)
            if raw is not None:
                self.conn.send_bytes(raw)

    def _beat(self) -> None:
        while True:
            time.sleep(self.interval)
            with self.run_lock:
                probe = self.probe
                mark = ("run", *probe()) if probe is not None else ("busy", self.beats)
            self.beats += 1
            with self.lock:
                if not self.busy:
                    continue
                try:
                    self.conn.send(("beat", mark))
                except OSError:
                    return


def serve(conn: Connection) -> None:
    heart = Heartbeat(conn, float(os.environ.get("ASTRA_NS3_BEAT_S", BEAT_S)))
    send = heart.send
    from astra_ns3 import native

    try:
        lib = native.load(os.environ.get("ASTRA_NS3_LIBRARY", "auto"))
    except Exception as exc:  # noqa: BLE001 - anything here means "cannot run"
        send(("error", f"cannot load the ns-3 model: {exc}"))
        return
    send(("ready", {"kind": lib.kind, "path": lib.path, "load_s": lib.load_s, "pid": os.getpid()}))

    def run(until_ps: int) -> int:
        with heart.run_lock:
            heart.probe = lib.progress
        try:
            return lib.run(until_ps)
        finally:
            with heart.run_lock:
                heart.probe = None

    live = False
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        heart.busy = True
        command = message[0]
        try:
            if command == "step":
                _, start_ps, until_ps, qps, flows = message
                if start_ps > lib.now_ps():
                    run(start_ps)
                for qp in qps:
                    lib.add_qp(*qp)
                lib.start_flows(flows)
                status = run(until_ps)
                if status == 3:
                    send(("error", lib.error()))
                    continue
                send(("step", status, lib.now_ps(), lib.take_completions(), lib.progress()))
            elif command == "setup":
                _, settings, switches, cables = message
                if live:
                    lib.destroy()
                lib.create(settings)
                live = True
                for is_switch in switches:
                    lib.add_node(is_switch)
                for cable in cables:
                    lib.add_cable(*cable)
                send(("ok",))
            elif command == "finish":
                results = lib.results()
                flows = results.pop("flows")
                lib.destroy()
                live = False
                send(("finish", results, flows.shape), raw=flows)
            elif command == "crash":
                lib.abort()
            elif command == "quit":
                return
            else:
                send(("bug", f"unknown command {command!r}"))
        except native.NativeError as exc:
            send(("error", str(exc)))
        except Exception:  # noqa: BLE001 - a bug: hand the traceback to the caller
            send(("bug", traceback.format_exc()))


def main(argv: list[str]) -> None:
    if len(argv) > 2:
        die_with_parent(int(argv[2]))
    conn = Connection(int(argv[1]))
    try:
        serve(conn)
    finally:
        conn.close()


if __name__ == "__main__":
    main(sys.argv)
