"""The simulation kernel's objects (astra_core/cpp/kernel.cc): tick buckets, the
matcher on a native and on a Python backend, and the windowed executor's errors."""

from __future__ import annotations

import heapq

import pytest

from astra_core.analytical import AnalyticalNetwork
from astra_core.config.network import NetworkConfig
from astra_core.events import EventQueue, kernel
from astra_core.system.collectives.plan import Plan, WindowedPhase
from astra_core.system.comm_types import CommType
from astra_core.system.p2p import MessageMatcher


class PythonClock:
    """A clock kept in Python (a backend that owns its time): ``now`` and ``schedule``."""

    def __init__(self) -> None:
        self.now = 0
        self._heap: list = []
        self._seq = 0

    def schedule(self, delay_ns, callback, arg=None):
        self._seq += 1
        heapq.heappush(self._heap, (self.now + delay_ns, self._seq, callback, arg))

    def run(self):
        while self._heap:
            self.now, _, callback, arg = heapq.heappop(self._heap)
            callback(arg)


@pytest.mark.parametrize("clock_kind", ["kernel", "python"])
def test_a_rank_runs_the_events_of_a_tick_together_in_the_order_they_were_registered(clock_kind):
    clock = EventQueue() if clock_kind == "kernel" else PythonClock()
    a = kernel().RankEvents(0, clock, 10, 0.0)
    b = kernel().RankEvents(1, clock, 10, 0.0)
    log = []

    def x(tag):
        log.append((tag, clock.now))
        a.register_event(0, log.append, "x-now")  # same tick, while a's bucket runs

    a.register_event(5, x, "x")
    b.register_event(5, lambda tag: log.append((tag, clock.now)), "y")
    a.register_event(5, lambda tag: log.append((tag, clock.now)), "z")
    assert a.pending() == 2 and b.pending() == 1
    clock.run()
    # a's bucket was queued first and runs whole, the event it adds included, then b's
    assert log == [("x", 5), ("z", 5), "x-now", ("y", 5)]
    assert a.pending() == 0
    if clock_kind == "kernel":
        assert clock.events_processed == 2  # one queue event per rank's tick


def test_the_reduction_of_a_packet_is_one_write_and_two_reads_of_whole_ns():
    with_bandwidth = kernel().RankEvents(0, EventQueue(), 10, 3.0)  # 3 bytes/ns
    assert with_bandwidth.reduction_delay_ns(100) == 3 * int(100 / 3.0) == 99
    without = kernel().RankEvents(0, EventQueue(), 10, 0.0)
    assert without.reduction_delay_ns(100) == 30  # upstream's 10 ns per access


RING4 = {"topology": ["Ring"], "npus_count": [4], "bandwidth": [1.0], "latency": [100.0]}


class PythonTimedAnalytical:
    """The same model's delays through Python calls (what a Python backend costs the
    kernel: a callable per message)."""

    def __init__(self, model: AnalyticalNetwork) -> None:
        self.model = model
        self.events = model.events
        self.schedule = model.events.schedule

    def now(self):
        return self.events.now

    def send(self, src, dst, size_bytes, on_delivered, arg=None, *, tag=0):
        self.events.schedule(self.model.delay_ns(src, dst, size_bytes), on_delivered, arg)

    def run(self):
        self.events.run()


def _exchange(backend) -> tuple[list, dict]:
    """Ranks 0..3 each send 2 MiB to the next and the one across; receives posted
    before and after the arrival; returns the callbacks' log and in-flight times."""
    matcher = MessageMatcher(backend, 4)
    log = []

    def note(tag):
        log.append((tag, backend.now()))

    size = 2 << 20
    for rank in range(4):
        matcher.send(rank, (rank + 1) % 4, size, 7, note, f"sent {rank}")
        matcher.recv(rank, (rank + 1) % 4, size, 7, note, f"recv {(rank + 1) % 4}")
        matcher.send(rank, (rank + 2) % 4, size, 8, None, None, not_before_ns=5_000_000)
    for rank in range(4):  # posted long after the messages arrived: complete after zero delay
        backend.schedule(9_000_000, lambda r: matcher.recv((r + 2) % 4, r, size, 8, note, f"late {r}"), rank)
    backend.run()
    assert matcher.messages == 8 and matcher.bytes == 8 * size and matcher.delivered == 8
    assert matcher.arrived_unreceived() == []
    return log, {rank: list(times) for rank, times in matcher.in_flight.items()}


def test_the_matcher_gives_the_same_times_on_the_kernel_model_and_through_python_calls():
    network = NetworkConfig.from_dict(RING4)
    native_log, native_flight = _exchange(AnalyticalNetwork(network))
    python_log, python_flight = _exchange(PythonTimedAnalytical(AnalyticalNetwork(network)))
    assert native_log == python_log and native_flight == python_flight
    # closed form: one hop of 100 ns + 2 MiB at 1 GiB/s (2^30 B/s = 1.073741824 B/ns)
    one_hop = int(100 + (2 << 20) / 1.073741824)
    assert native_log[:2] == [("sent 0", one_hop), ("recv 1", one_hop)]
    assert type(native_log[0][1]) is int
    # the message across (2 hops) counts as arrived no earlier than 5 ms, at both ends
    assert native_flight[0] == [0.0, 5_000_000.0]
    assert native_log[-4:] == [(f"late {r}", 9_000_000) for r in range(4)]


def test_a_message_of_a_rank_beyond_the_run_is_refused():
    matcher = MessageMatcher(AnalyticalNetwork(NetworkConfig.from_dict(RING4)), 4)
    with pytest.raises(IndexError, match="ranks 0 .. 3"):
        matcher.send(0, 4, 10, 1, None, None)


def test_a_windowed_phase_needs_its_stream_and_a_plan_of_int_tuples():
    plan = Plan(messages=((1, 3, 64),), window=1, packets=((False, 64), (False, 64)), final_data_size=64)
    phase = WindowedPhase("ring", CommType.ALL_GATHER, 0, 64, plan)
    assert (phase.sent, phase.inserted, phase.free, phase.final_data_size) == (0, 0, 0, 64)
    with pytest.raises(RuntimeError, match="before its stream was bound"):
        phase.start()
    bad = Plan(messages=((1, 3),), window=1, packets=((False, 64),), final_data_size=64)
    broken = WindowedPhase("ring", CommType.ALL_GATHER, 0, 64, bad)

    backend = AnalyticalNetwork(NetworkConfig.from_dict(RING4))

    class Owner:
        id = 0
        events = kernel().RankEvents(0, backend.events, 10, 0.0)
        matcher = MessageMatcher(backend, 4)

    class Stream:
        owner = Owner()
        stream_id = 1

    broken.stream = Stream()
    broken.start()  # its packet goes through memory; then its first message is read
    with pytest.raises(TypeError, match="entry 0 is not a tuple of 3"):
        backend.run()
    assert backend.now() == 10


@pytest.mark.parametrize("src,dst,tag", [(0, 1, 0), (5, 3, 1_000_017), (1023, 4095, 2**40 + 3), (7, 7, 7)])
def test_flow_hash_is_the_documented_32_bit_mix(src, dst, tag):
    from astra_core.topology.physical import flow_hash

    h = ((src * 0x9E3779B1) ^ (dst * 0x85EBCA77) ^ (tag * 0xC2B2AE3D)) & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x7FEB352D) & 0xFFFFFFFF
    h ^= h >> 15
    assert flow_hash(src, dst, tag) == h


def test_reading_the_in_flight_times_mid_run_changes_nothing_at_the_end():
    def run(read_at: int | None) -> dict:
        backend = AnalyticalNetwork(NetworkConfig.from_dict(RING4))
        matcher = MessageMatcher(backend, 4)

        def again(_):
            matcher.send(0, 1, 0, 2, None, None)  # leaves as the first lands: touching

        matcher.send(0, 1, 0, 1, again, None)  # [0, 100], then [100, 200]
        backend.schedule(500, lambda _: matcher.send(0, 1, 0, 3, None, None))  # [500, 600]
        if read_at is not None:
            backend.schedule(read_at, lambda _: matcher.in_flight)
        backend.run()
        return {rank: list(times) for rank, times in matcher.in_flight.items()}

    whole = run(None)
    assert whole[0] == [0.0, 200.0, 500.0, 600.0] == whole[1]
    for read_at in (50, 100, 150, 550, 700):
        assert run(read_at) == whole
