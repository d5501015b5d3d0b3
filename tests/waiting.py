"""What the tests of processes and signals share: waiting on an event with a generous
bound (never a fixed sleep as a margin), and Ctrl-C as a terminal delivers it."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], object], timeout_s: float, every_s: float = 0.02) -> bool:
    """Poll ``predicate`` every ``every_s`` until it holds (True) or ``timeout_s`` passed
    (False). A healthy run polls only until the event happens: a generous bound costs
    nothing when nothing is wrong."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return bool(predicate())


def default_sigint() -> None:
    """A child's ``preexec_fn``: a shell's background job inherits SIGINT ignored; give
    the child Ctrl-C as a terminal would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
