"""The progress line: on a terminal only, fed by the event queue every 2^16 events.

The congestion-aware run of the bundled ResNet-50 example processes 87,240
events (``EventQueue.events_processed``), so it reports progress once from the
queue (at event 65,536) and once more when the run finishes.
"""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

import astra
from astra_core.cli import main
from astra_core.events import PROGRESS_EVERY, EventQueue
from astra_core.progress import RunProgress
from tests.conftest import isolate_plugins

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "resnet50_dp"
PREFIX = EXAMPLE / "workload" / "Resnet50_DataParallel"
ARGS = [
    "--workload",
    str(PREFIX),
    "--system",
    str(EXAMPLE / "system.json"),
    "--network",
    str(EXAMPLE / "network.yml"),
]
# every event of the run: messages, kernels, and one issue pass per rank per instant
# in which its nodes complete (RankEngine.complete)
CONGESTION_EVENTS = 88_960


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def test_event_queue_reports_every_progress_interval():
    queue = EventQueue()
    calls = []
    for i in range(3 * PROGRESS_EVERY + 5):
        queue.schedule(i // 7, lambda _: None)
    queue.progress = lambda now, events: calls.append((now, events))
    queue.run()
    assert queue.events_processed == 3 * PROGRESS_EVERY + 5
    assert [events for _, events in calls] == [PROGRESS_EVERY, 2 * PROGRESS_EVERY, 3 * PROGRESS_EVERY]
    # Event k (1-based) runs at (k - 1) // 7 ns.
    assert [now for now, _ in calls] == [
        (k - 1) // 7 for k in (PROGRESS_EVERY, 2 * PROGRESS_EVERY, 3 * PROGRESS_EVERY)
    ]


def test_event_queue_with_progress_runs_the_same_events_in_the_same_order():
    def fill(queue, log):
        for i in range(1000):
            queue.schedule((i * 37) % 101, log.append, i)

    plain, reporting = EventQueue(), EventQueue()
    a, b = [], []
    fill(plain, a)
    fill(reporting, b)
    reporting.progress = lambda now, events: None
    plain.run(until_ns=50)
    reporting.run(until_ns=50)
    assert a == b and plain.now == reporting.now and len(plain) == len(reporting)
    plain.run()
    reporting.run()
    assert a == b and plain.events_processed == reporting.events_processed == 1000


def test_progress_reports_on_a_terminal(built_backends):
    out = io.StringIO()
    display = RunProgress(Console(file=out, force_terminal=True, width=120))
    assert display.enabled
    report = astra.simulate(
        PREFIX,
        EXAMPLE / "system.json",
        EXAMPLE / "network.yml",
        backend="analytical-congestion",
        progress=display,
    )
    events = built_backends[-1].events
    assert events.events_processed == CONGESTION_EVENTS
    assert display.updates == CONGESTION_EVENTS // PROGRESS_EVERY + 1
    assert events.progress is None  # detached after the run
    assert "simulating" in out.getvalue()
    # The last report comes after the run: every ET node of the simulated ranks is done.
    done, total = display.last.nodes_done, display.last.nodes_total
    assert done == total == sum(len(g) for g in report.graphs[:1]) * len(report.traces)
    assert f"{total:,}/{total:,} ET nodes" in out.getvalue()


@pytest.mark.parametrize(
    "seconds, text", [(0.4, "0 s"), (42.4, "42 s"), (200, "3 min 20 s"), (3900, "1 h 05 min")]
)
def test_time_left_is_written_for_people(seconds, text):
    from astra_core.progress import format_seconds

    assert format_seconds(seconds) == text


def test_no_progress_without_a_terminal(built_backends):
    display = RunProgress(Console(file=io.StringIO()))
    assert not display.enabled
    astra.simulate(
        PREFIX,
        EXAMPLE / "system.json",
        EXAMPLE / "network.yml",
        backend="analytical-congestion",
        progress=display,
    )
    assert display.updates == 0 and built_backends[-1].events.progress is None
    # The CLI under a test runner (not a terminal) prints the table and nothing else.
    result = CliRunner().invoke(main, ["run", *ARGS, "--backend", "analytical-congestion"])
    assert result.exit_code == 0
    assert "simulating" not in result.output and "events/s" not in result.output
    assert result.stderr == ""


def run_console_script(*, terminal: bool) -> str:
    """``astra run`` as a user runs it, stdout and stderr on a pty or on a pipe."""
    command = [
        str(Path(sys.executable).with_name("astra")),
        "run",
        *ARGS,
        "--backend",
        "analytical-congestion",
    ]
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    if not terminal:
        done = subprocess.run(command, capture_output=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        return (done.stdout + done.stderr).decode()
    master, slave = pty.openpty()
    proc = subprocess.Popen(command, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the pty
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode(errors="replace")


def test_console_script_shows_progress_on_a_pty_and_not_on_a_pipe():
    on_pty = run_console_script(terminal=True)
    assert "simulating" in on_pty and f"{CONGESTION_EVENTS:,} events" in on_pty
    assert "events/s" in on_pty
    on_pipe = run_console_script(terminal=False)
    assert "step time: 1,082,479.776 µs" in on_pipe
    assert "simulating" not in on_pipe and "\x1b[" not in on_pipe


MICRO = "workload/micro/ALL_GATHER_8npus_1MB/ALL_GATHER"


@pytest.mark.parametrize("backend", ["analytical", "analytical-congestion", "flow", "garnetlike", "ns3"])
def test_every_backend_reports_time_messages_and_events(backend, reference_dir):
    # garnetlike too (its clock counts ps, not an ns event queue), and every backend says
    # how many messages have been delivered.
    if backend == "ns3":
        from astra_ns3.tests.fabrics import require_ns3

        require_ns3()
    samples = []

    class Recording(RunProgress):
        def update(self, progress):
            super().update(progress)
            samples.append(self.last)

    out = io.StringIO()
    display = Recording(Console(file=out, force_terminal=True, width=200))
    report = astra.simulate(
        reference_dir / MICRO,
        reference_dir / "system/ring_1d.json",
        reference_dir / "network/ring8.yml",
        backend=backend,
        progress=display,
    )
    assert samples and all(0 <= s.delivered <= s.sent for s in samples)
    times = [s.now_ns for s in samples]
    assert times == sorted(times) and [s.events for s in samples] == sorted(s.events for s in samples)
    last = samples[-1]
    # The run's last report: every message delivered (of the simulated ranks: under rank
    # symmetry the representatives'), at the end of the step or after it.
    assert last.delivered == last.sent and last.delivered_fraction == 1
    assert last.sent * len(report.ranks) // len(report.traces) == report.messages > 0
    assert last.now_ns >= report.step_ns > 0
    assert last.events > 0
    assert f"{last.sent:,}/{last.sent:,} messages (100.0%)" in out.getvalue()


@pytest.mark.parametrize(
    "part, whole, text", [(1_835_776, 1_836_032, "99.9%"), (7, 7, "100.0%"), (0, 8, "0.0%"), (1, 3, "33.3%")]
)
def test_the_delivered_percentage_reads_100_only_when_all_are_delivered(part, whole, text):
    from astra_core.progress import format_percent

    assert format_percent(part, whole) == text


# -- the line fits the terminal --------------------------------------------------------------

FULL = {
    "label": "simulating",
    "simulated": "t = 570,477.494 µs",
    "messages": "1,915,392/1,915,392 messages (99.9%)",
    "events": "12,345,678 events",
    "rate": "1,668,367 events/s",
    "nodes": "72,576/72,576 ET nodes",
    "elapsed": "0:01:02",
    "eta": "~3 min 20 s left",
    "note": "",
}


@pytest.mark.parametrize(
    "columns, line",
    [
        # 78 cells beside the spinner: messages (36), events and the rate do not fit
        (80, "simulating t = 570,477.494 µs 72,576/72,576 ET nodes 0:01:02 ~3 min 20 s left"),
        (40, "t = 570,477.494 µs ~3 min 20 s left"),
        (20, "t = 570,477.494 µs"),
        (12, "t = 570,4…"),
    ],
)
def test_the_progress_line_keeps_the_most_important_fields_that_fit(columns, line):
    from astra_core.progress import fit_line

    assert fit_line(FULL, columns - 2).plain == line


@pytest.mark.parametrize("columns", [80, 40])
def test_the_drawn_progress_line_is_no_wider_than_the_terminal(columns):
    import re

    from rich.cells import cell_len

    out = io.StringIO()
    display = RunProgress(Console(file=out, force_terminal=True, width=columns))
    astra.simulate(
        PREFIX,
        EXAMPLE / "system.json",
        EXAMPLE / "network.yml",
        backend="analytical-congestion",
        progress=display,
    )
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())  # colours and cursor moves
    lines = [line for line in re.split(r"[\r\n]", drawn) if line.strip()]
    assert display.updates > 1 and lines
    assert max(cell_len(line) for line in lines) <= columns
    # the last report: at 80 columns the label, the event rate and the elapsed time too
    expected = {
        80: r"simulating t = 1\.082 s [\d,]+ events/s 1,720/1,720 ET nodes \d:\d\d:\d\d",
        40: r"t = 1\.082 s 1,720/1,720 ET nodes",
    }
    assert re.fullmatch(". " + expected[columns], lines[-1]), lines[-1]
