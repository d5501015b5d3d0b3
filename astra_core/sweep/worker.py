"""The loop a sweep worker process runs (started by :mod:`astra_core.sweep.pool`).

A worker is a fresh interpreter (``python -c``), never a fork or a re-import
of the user's ``__main__``: a script that calls ``astra.sweep()`` needs no
``if __name__ == "__main__":`` guard, and a parent with threads (Ray, Arrow)
cannot hand a held lock to its workers.

Protocol, over two pipes whose descriptors the parent passes on the command
line: the worker sends :data:`READY` once astra imports, then for each task it
receives (a dict for :func:`~astra_core.sweep.point.run_point`) it sends back
the row. End of input (the parent closed its end) ends the worker.
"""

from __future__ import annotations

import signal
from multiprocessing.connection import Connection

from astra_core.lifetime import die_with_parent

READY = "ready"


def main(argv: list[str]) -> None:
    """Serve tasks until the parent closes the task pipe.

    ``argv``: the task pipe's read descriptor, the row pipe's write
    descriptor and the parent's pid. Ctrl-C reaches the whole process group;
    only the parent handles it (it terminates the workers).
    """
    task_fd, row_fd, parent_pid = (int(a) for a in argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid)
    tasks = Connection(task_fd, writable=False)
    rows = Connection(row_fd, readable=False)
    import astra_core.api  # noqa: F401 - fail here, before READY, if astra cannot load
    from astra_core.sweep.point import run_point

    try:
        rows.send(READY)
        while True:
            try:
                task = tasks.recv()
            except EOFError:
                return
            rows.send(run_point(task))
    except BrokenPipeError:  # the parent is gone: nobody wants the row
        return
