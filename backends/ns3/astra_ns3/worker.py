"""The worker process: ns-3 and the C++ model live here, never in the caller.

Started by :mod:`astra_ns3.process` as ``python -m astra_ns3.worker FD`` with
one end of a socket pair as file descriptor FD. It loads the model
(:func:`astra_ns3.native.load`, mode from ``$ASTRA_NS3_LIBRARY``: ``auto``,
``compiled`` or ``jit``), says ``("ready", info)``, then serves one
simulation at a time (messages are pickled tuples):

``("setup", settings, switches, cables)``
    a fresh fabric: model settings, one is-switch flag per node, and per
    cable ``(link_ab, link_ba, a, b, rate_ab, rate_ba, delay_ps, kmin_ab,
    kmax_ab, pmax_ab, kmin_ba, kmax_ba, pmax_ba)``. Reply ``("ok",)``.
``("step", start_ps, until_ps, flows)``
    advance to ``start_ps`` (no message can complete before it), start
    ``flows`` (``(id, queue_pair, src_node, dst_node, bytes, fwd_links,
    rev_links)``)
    there, and run until messages complete (all those completing at the same
    instant) or until ``until_ps`` (-1: no limit). Reply ``("step", status,
    now_ps, completed_ids)``; status 1 completions, 0 reached ``until_ps``,
    2 no events left.
``("finish",)``
    reply ``("finish", results)`` (counters and monitor samples as numpy
    arrays), then destroy the simulator so the next setup starts clean.
``("crash",)``
    abort as a failed ns-3 assertion would (tests of the isolation).

A model error replies ``("error", message)``; a bug replies ``("bug",
traceback)``. End of input ends the process.
"""

from __future__ import annotations

import os
import sys
import traceback
from multiprocessing.connection import Connection


def serve(conn: Connection) -> None:
    from astra_ns3 import native

    try:
        lib = native.load(os.environ.get("ASTRA_NS3_LIBRARY", "auto"))
    except Exception as exc:  # noqa: BLE001 - anything here means "cannot run"
        conn.send(("error", f"cannot load the ns-3 model: {exc}"))
        return
    conn.send(("ready", {"kind": lib.kind, "path": lib.path, "load_s": lib.load_s,
                         "pid": os.getpid()}))
    live = False
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        command = message[0]
        try:
            if command == "step":
                _, start_ps, until_ps, flows = message
                if start_ps > lib.now_ps():
                    lib.run(start_ps)
                for flow in flows:
                    lib.start_flow(*flow)
                status = lib.run(until_ps)
                if status == 3:
                    conn.send(("error", lib.error()))
                    continue
                conn.send(("step", status, lib.now_ps(), lib.take_completions()))
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
                conn.send(("ok",))
            elif command == "finish":
                results = lib.results()
                lib.destroy()
                live = False
                conn.send(("finish", results))
            elif command == "crash":
                lib.abort()
            elif command == "quit":
                return
            else:
                conn.send(("bug", f"unknown command {command!r}"))
        except native.NativeError as exc:
            conn.send(("error", str(exc)))
        except Exception:  # noqa: BLE001 - a bug: hand the traceback to the caller
            conn.send(("bug", traceback.format_exc()))


def main(argv: list[str]) -> None:
    conn = Connection(int(argv[1]))
    try:
        serve(conn)
    finally:
        conn.close()


if __name__ == "__main__":
    main(sys.argv)
