"""The matcher records when each rank's messages were on the network."""

from __future__ import annotations

from astra_core.events import EventQueue
from astra_core.system.p2p import MessageMatcher


class FixedLatency:
    """A backend whose messages take ``1000 + bytes`` ns; the clock is its EventQueue's."""

    def __init__(self) -> None:
        self.events = EventQueue()
        self.schedule = self.events.schedule

    def now(self) -> float:
        return self.events.now

    def send(self, src, dst, size, on_delivered, arg, *, tag, dim=None) -> None:
        self.events.schedule(1000 + size, on_delivered, arg)

    def run(self) -> None:
        self.events.run()


def test_in_flight_from_send_to_arrival_for_both_ranks_whether_or_not_received():
    backend = FixedLatency()
    matcher = MessageMatcher(backend, 3)
    got = []
    # rank 2 posts its receive at t = 0; rank 0 sends only at t = 500: rank 2's
    # message is in flight [500, 1600], not from 0.
    matcher.recv(0, 2, 100, 7, got.append, "r")
    backend.schedule(500, lambda _: matcher.send(0, 2, 100, 7, None, None))
    # rank 1 sends to rank 2 at 1200 a message no receive matches: in flight [1200, 2500]
    backend.schedule(1200, lambda _: matcher.send(1, 2, 300, 8, None, None))
    backend.run()
    assert got == ["r"]
    flight = {rank: list(log) for rank, log in matcher.in_flight.items()}
    # rank 2: the two messages overlap -> one interval [500, 2500]
    assert flight == {0: [500.0, 1600.0], 1: [1200.0, 2500.0], 2: [500.0, 2500.0]}


def test_touching_intervals_merge_and_a_gap_starts_a_new_one():
    backend = FixedLatency()
    matcher = MessageMatcher(backend, 2)

    def again(_):
        matcher.send(0, 1, 0, 1, None, None)  # leaves as the first lands: touching

    matcher.send(0, 1, 0, 1, again, None)  # [0, 1000], then [1000, 2000]
    backend.schedule(2500, lambda _: matcher.send(0, 1, 0, 2, None, None))  # [2500, 3500]
    backend.run()
    assert list(matcher.in_flight[0]) == [0.0, 2000.0, 2500.0, 3500.0]
    assert list(matcher.in_flight[1]) == [0.0, 2000.0, 2500.0, 3500.0]
