"""The ns3 worker's watchdog tells heavy work at one instant from a livelock.

A beat of the simulated time alone would kill the worker after any 60 s during which
the time stood still, whether thousands of messages were completing at that instant
(heavy work) or events re-fired at it forever (a livelock), and the error could not
say which. The beats carry ns-3's event count and the messages started and completed
(``astra_ns3_progress``).

The :class:`Watchdog` tests drive a fake clock (no wall time); the protocol tests feed
a real :class:`WorkerProcess` connection with beats from a stand-in worker thread.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from multiprocessing import Pipe

import pytest

from astra_ns3 import process
from astra_ns3.liveness import ADVANCING, HEAVY, LIVELOCK, STUCK, Watchdog


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def run_beat(now_ps: int, events: int, started: int = 10, completed: int = 0) -> tuple:
    return ("run", now_ps, events, started, completed)


def test_advancing_time_is_progress():
    clock = FakeClock()
    dog = Watchdog(60, clock)
    for k in range(1, 200):
        clock.t += 1
        dog.beat(run_beat(1000 * k, 50 * k))
        assert dog.state == ADVANCING and not dog.expired()


def test_heavy_work_at_one_instant_is_never_killed_and_is_named():
    # The time stands at 2,835,238,940 ps for 500 s while messages complete one
    # after the other at that instant: progress, however long it takes.
    clock = FakeClock()
    dog = Watchdog(60, clock)
    dog.beat(run_beat(2_835_238_940, 1_000, completed=0))
    for k in range(1, 501):
        clock.t += 1
        dog.beat(run_beat(2_835_238_940, 1_000 + 7 * k, completed=k // 10))
        assert not dog.expired()
    assert dog.state == HEAVY
    assert dog.instant_events() == 3500 and dog.instant_completed() == 50
    assert (
        dog.note()
        == "t stands still for 500 s, 3,500 events at it; heavy instant: 50 messages completed at it"
    )


def test_events_at_one_instant_without_message_progress_are_a_livelock():
    clock = FakeClock()
    dog = Watchdog(60, clock)
    dog.beat(run_beat(7_000, 10, completed=3))  # the instant begins
    for k in range(1, 60):
        clock.t += 1
        dog.beat(run_beat(7_000, 10 + 1000 * k, completed=3))
        assert not dog.expired()
    clock.t += 1
    dog.beat(run_beat(7_000, 10 + 60_000, completed=3))
    assert dog.expired() and dog.state == LIVELOCK
    assert dog.diagnosis(offset_ns=1_000.0) == (
        "livelock at t = 1007.000 ns: 60,000 events ran at that instant and no message "
        "started or completed (10 messages started, 3 completed in this fabric)"
    )


def test_a_message_completing_restarts_the_livelock_count():
    clock = FakeClock()
    dog = Watchdog(60, clock)
    dog.beat(run_beat(7_000, 10, completed=3))
    clock.t += 59
    dog.beat(run_beat(7_000, 5_000, completed=4))  # heavy: one completed
    clock.t += 59
    dog.beat(run_beat(7_000, 9_000, completed=4))
    assert dog.state == LIVELOCK and not dog.expired()
    clock.t += 1
    assert dog.expired()


def test_no_event_completing_is_stuck_inside_one_event():
    clock = FakeClock()
    dog = Watchdog(5, clock)
    dog.beat(run_beat(42_000, 900))
    for _ in range(5):
        clock.t += 1
        dog.beat(run_beat(42_000, 900))
    assert dog.expired() and dog.state == STUCK
    assert (
        dog.diagnosis()
        == "it is busy inside one event at t = 42.000 ns (no event completed; 900 events so far)"
    )


def test_busy_beats_outside_the_event_loop_are_progress_and_a_new_fabric_starts_afresh():
    clock = FakeClock()
    dog = Watchdog(5, clock)
    dog.beat(run_beat(42_000, 900))
    for n in range(10):  # the worker starts a step's messages in Python
        clock.t += 1
        dog.beat(("busy", n))
        assert not dog.expired()
    dog.beat(run_beat(0, 3))  # a fresh fabric: its time and counts start again
    assert dog.state == ADVANCING and dog.instant_events() == 0


# -- the caller's side, on a real connection --------------------------------------------


class TickingClock:
    """A clock that moves 0.05 s each time it is read: beats look 'slow' however fast
    the stand-in worker sends them, so no test depends on the machine's speed."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.05
        return self.t


@pytest.fixture
def fake_worker(monkeypatch):
    """A WorkerProcess whose 'worker' is a thread on the other end of a pipe (the
    process itself is a sleeping stand-in, killed when the watchdog fires), watched
    on a :class:`TickingClock`."""
    clock = TickingClock()
    monkeypatch.setattr(process, "Watchdog", lambda limit_s: Watchdog(limit_s, clock))
    caller_end, worker_end = Pipe()
    worker = process.WorkerProcess.__new__(process.WorkerProcess)
    worker.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    worker.conn = caller_end
    worker._log = open(__file__, "rb")  # noqa: SIM115 - closed by worker.close()
    worker.info = {}
    worker.watchdog_s = 1.0
    yield worker, worker_end
    worker.proc.kill()
    worker.close()
    worker_end.close()


def serve_beats(conn, beats, reply: tuple | None) -> threading.Thread:
    """Answer the first request with ``beats``, then ``reply`` (None: fall silent), until
    the caller hangs up."""

    def serve():
        conn.recv()
        try:
            for beat in beats:
                conn.send(("beat", beat))
            if reply is not None:
                conn.send(reply)
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_the_caller_waits_through_heavy_work_and_reports_each_beat(fake_worker):
    worker, other_end = fake_worker
    # 100 beats at one instant while messages complete: 5 s on the watchdog's clock, 1 s allowed.
    beats = [run_beat(2_835_238_940, 1000 + 10 * k, completed=k) for k in range(100)]
    seen = []
    thread = serve_beats(other_end, beats, ("step", 1, 2_835_238_940, [1, 2], (0, 0, 0, 0)))
    reply = worker.request(("step",), "step", on_beat=lambda dog: seen.append((dog.state, dog.last)))
    thread.join()
    assert reply[0] == "step" and worker.alive()
    assert [beat.completed for _, beat in seen] == list(range(100))
    assert {state for state, _ in seen[1:]} == {HEAVY}


def test_the_caller_kills_a_livelock_and_says_so(fake_worker):
    worker, other_end = fake_worker
    beats = (run_beat(5_000_000, 1000 + 10 * k, started=4, completed=1) for k in range(10**9))
    serve_beats(other_end, beats, ("step",))
    with pytest.raises(
        process.WorkerStalled,
        match=r"^ns3 backend: the ns-3 worker \(pid \d+\) made no progress for 1 s of wall time: "
        r"livelock at t = 5500\.000 ns: [1-9][\d,]* events ran at that instant and no message "
        r"started or completed \(4 messages started, 1 completed in this fabric\); "
        r"the oldest waits; killed it",
    ):
        worker.request(("step",), "step", offset_ns=500.0, context=lambda: "the oldest waits")
    assert not worker.alive()


def test_a_worker_that_falls_silent_is_not_called_spinning(fake_worker, monkeypatch):
    # One repeated beat, then silence (a worker starved of CPU or memory, its heartbeat
    # thread included), must not be reported as "busy but its simulated time stands
    # still": silence is named as such, with the CPU the worker used meanwhile (a
    # sleeping stand-in here: none).
    worker, other_end = fake_worker
    monkeypatch.setattr(process, "Watchdog", Watchdog)  # the real clock: silence is wall time
    worker.watchdog_s = 0.3
    serve_beats(other_end, [run_beat(2_835_238_940, 500), run_beat(2_835_238_940, 500)], None)
    with pytest.raises(
        process.WorkerStalled,
        match=r"^ns3 backend: the ns-3 worker \(pid \d+\) made no progress for 0\.3 s of wall time: "
        r"it answers nothing \(no heartbeat for 0\.\d s, in which it used \d+\.\d\d s of CPU\); "
        r"last simulated time 2835238\.940 ns; killed it",
    ):
        worker.request(("step",), "step")


class HeldUpClock:
    """The caller is held up (descheduled) right after it starts waiting: every reading
    after the first is 100 s later."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        return 0.0 if self.readings == 1 else 100.0 + self.readings


def test_a_held_up_caller_reads_the_waiting_beats_before_judging_the_worker(fake_worker, monkeypatch):
    # The caller reads before it checks its clock: a caller starved for longer than the
    # limit must not kill a worker whose beats (and reply) are waiting in the socket.
    worker, other_end = fake_worker
    monkeypatch.setattr(process, "Watchdog", lambda limit_s: Watchdog(limit_s, HeldUpClock()))
    for k in range(3):
        other_end.send(("beat", run_beat(1000 * (k + 1), 10 * (k + 1))))
    other_end.send(("step", 1, 3000, [0], (3000, 30, 1, 1)))
    assert worker.request(None, "step")[:4] == ("step", 1, 3000, [0])
    assert worker.alive()
