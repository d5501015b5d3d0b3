"""Ctrl-C (SIGINT) and SIGTERM stop an ``astra`` command within moments, in one line.

The run is driven from a pseudo-terminal, as a user's Ctrl-C would reach it: its
progress line is drawn there, and the signal is sent once that line shows.
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from astra_core.workload.generators.micro import write_micro
from tests.waiting import default_sigint, wait_for

REPO = Path(__file__).resolve().parents[2]
SYSTEM = REPO / "tests" / "data" / "reference" / "system" / "ring_1d.json"
#: Deadlines (s): generous for a loaded 2-core machine; a healthy run polls only until
#: the event happens. The run itself (every rank of a 256-rank all-to-all) takes far
#: longer than it takes to see the progress line and send the signal.
START_S = 300
EXIT_S = 60


class _Terminal:
    """A pseudo-terminal whose output is collected by a thread (``text()``)."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self._out = bytearray()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # the other end closed
                return
            if not data:
                return
            self._out.extend(data)

    def text(self) -> str:
        return self._out.decode(errors="replace")

    def close(self) -> None:
        os.close(self.slave)
        self._thread.join(timeout=EXIT_S)
        os.close(self.master)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_full_rank_run_in_one_line(tmp_path, signum):
    write_micro("all-to-all", 64 << 20, 256, tmp_path / "a2a")
    network = tmp_path / "network.yml"
    network.write_text("topology: [ Ring ]\nnpus_count: [ 256 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    command = [sys.executable, "-m", "astra_core.cli", "run", "--workload", str(tmp_path / "a2a")]
    command += ["--system", str(SYSTEM), "--network", str(network), "--no-symmetry"]
    terminal = _Terminal()
    run = subprocess.Popen(
        command,
        cwd=REPO,
        stdin=terminal.slave,
        stdout=terminal.slave,
        stderr=terminal.slave,
        preexec_fn=default_sigint,
    )
    try:
        assert wait_for(lambda: "simulating" in terminal.text() or run.poll() is not None, START_S)
        assert run.poll() is None, terminal.text()
        run.send_signal(signum)
        run.wait(timeout=EXIT_S)  # the kernel's event loop looks at signals between events
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        terminal.close()
    assert run.returncode == 128 + signum
    last = terminal.text().strip().splitlines()[-1]
    assert last.endswith(f"error: astra run: interrupted by {signal.Signals(signum).name}")
