"""Progress while the ns-3 worker runs.

astra's event queue only moves between the worker's steps, so the progress line must
not read ``simulating t = 0 ns`` for a whole ns3 run: the worker's heartbeats
(simulated time, ns-3's events) reach the backend's progress hook while a step runs.
"""

from __future__ import annotations

import io

from rich.console import Console

import astra
from astra_core.backend import set_progress
from astra_core.progress import RunProgress
from astra_ns3 import process
from astra_ns3.tests.fabrics import make_ns3, require_ns3, star


def test_the_progress_hook_sees_the_simulated_time_move_while_one_step_runs(monkeypatch):
    # Beats every 10 ms: a fresh worker reads the interval when it starts.
    process.close_idle()
    monkeypatch.setenv("ASTRA_NS3_BEAT_S", "0.01")
    # Packet by packet (a lone flow would otherwise be fast-forwarded in a few events).
    backend = make_ns3(star(2), {"cc": "none", "fast_forward": False})
    reports = []
    assert set_progress(backend, lambda now_ns, events, note="": reports.append((now_ns, events, note)))
    arrived = []
    # 400 MB through one switch at 100 Gb/s: ~98k packets x 2 links, one worker step
    # of many heartbeats; the message arrives after at least 32 ms (400e6 B x 8 / 100 Gb/s).
    backend.send(0, 1, 400_000_000, lambda _: arrived.append(backend.now()))
    backend.run()
    set_progress(backend, None)
    process.close_idle()  # no worker with the short beat for later tests
    assert len(arrived) == 1 and arrived[0] > 32e6
    during = [(t, events) for t, events, _ in reports if 0 < t < arrived[0]]
    # Reports from inside the step: the simulated time and ns-3's event count rise.
    assert len({t for t, _ in during}) >= 2
    times = [t for t, _, _ in reports]
    counts = [events for _, events, _ in reports]
    assert times == sorted(times) and counts == sorted(counts)
    assert all(note == "" for _, _, note in reports)  # the time never stood still for long


def test_an_ns3_run_reports_the_fraction_of_messages_delivered_up_to_one(reference_dir):
    require_ns3()
    out = io.StringIO()
    samples = []

    class Recording(RunProgress):
        def update(self, progress):
            super().update(progress)
            samples.append(self.last)

    display = Recording(Console(file=out, force_terminal=True, width=200))
    astra.simulate(
        reference_dir / "workload/micro/ALL_GATHER_8npus_1MB/ALL_GATHER",
        reference_dir / "system/ring_1d.json",
        reference_dir / "network/ring8.yml",
        backend="ns3",
        progress=display,
    )
    fractions = [s.delivered_fraction for s in samples]
    assert all(0 <= f <= 1 for f in fractions)
    # The first report comes with the first step's reply, before its messages' callbacks
    # run: 8 NPUs have sent their first chunk and none has arrived; the last has all 224.
    assert (samples[0].delivered, samples[0].sent) == (0, 8)
    assert (samples[-1].delivered, samples[-1].sent) == (224, 224) and fractions[-1] == 1
    assert [s.now_ns for s in samples] == sorted(s.now_ns for s in samples)
    assert "224/224 messages (100.0%)" in out.getvalue()
