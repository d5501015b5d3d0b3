"""The event queue: same-time order, the clock's numbers, errors, and the step_end hook."""

import weakref

import pytest

from astra_core.events import EventQueue


def test_step_end_runs_once_per_instant_before_the_clock_moves():
    events = EventQueue()
    log = []

    def mark(tag):
        log.append((tag, events.now))
        events.step_pending = True  # several changes in one instant: one step_end

    def step_end():
        log.append(("step", events.now))
        if events.now == 5 and not any(tag == "late" for tag, _ in log):
            events.schedule(0, lambda _: log.append(("late", events.now)))  # same instant

    events.step_end = step_end
    events.schedule(5, mark, "a")
    events.schedule(5, mark, "b")
    events.schedule(9, lambda _: log.append(("quiet", events.now)))  # sets nothing pending
    events.schedule(12, mark, "c")
    events.run()
    # The event step_end schedules at t = 5 still runs at t = 5; the quiet instant
    # (t = 9) calls no step_end.
    assert log == [("a", 5), ("b", 5), ("step", 5), ("late", 5), ("quiet", 9), ("c", 12), ("step", 12)]
    assert events.step_pending is False


# -- the kernel's queue (astra_core/cpp/kernel.cc) keeps the semantics of Python's heapq one


def test_same_time_events_run_in_the_order_they_were_scheduled_also_from_inside_the_instant():
    events = EventQueue()
    log = []

    def at_five(tag):
        log.append(tag)
        if tag == "a":
            events.schedule(0, log.append, "a-now")  # runs at 5, after b and c

    events.schedule(5, at_five, "a")
    events.schedule(5, log.append, "b")
    events.schedule_at(5, log.append, "c")
    events.schedule(4, log.append, "first")
    events.run()
    assert log == ["first", "a", "b", "c", "a-now"]
    assert events.events_processed == 5 and len(events) == 0


def test_the_clock_is_an_int_where_every_delay_was_one_and_a_float_otherwise():
    events = EventQueue()
    seen = []
    events.schedule(3, lambda _: seen.append(events.now))
    events.schedule(2.5, lambda _: events.schedule(4, lambda _: seen.append(events.now)))
    events.run()
    assert seen == [3, 6.5]
    assert type(seen[0]) is int and type(seen[1]) is float
    big = EventQueue()
    big.schedule(2**52 + 1, seen.append)  # exact in a double: 2**53 ns is 104 days
    big.run()
    assert big.now == 2**52 + 1 and type(big.now) is int


def test_run_stops_at_until_and_goes_on_later():
    events = EventQueue()
    log = []
    for t in (1, 2, 3):
        events.schedule(t, log.append, t)
    events.run(until_ns=2)
    assert log == [1, 2] and events.next_time() == 3 and len(events) == 1
    events.run()
    assert log == [1, 2, 3] and events.next_time() is None


@pytest.mark.parametrize("delay", [-1, -0.5, float("nan"), float("inf")])
def test_a_delay_that_is_negative_or_not_finite_is_refused(delay):
    events = EventQueue()
    with pytest.raises(ValueError, match=f"cannot schedule with a delay of {delay} ns"):
        events.schedule(delay, print)
    events.schedule(7, print)
    events.run(until_ns=7)
    with pytest.raises(ValueError, match="cannot schedule at 6 ns, clock is at 7 ns"):
        events.schedule_at(6, print)


def test_a_callback_that_raises_stops_the_run_and_leaves_the_queue_usable():
    events = EventQueue()
    log = []

    def broken(_):
        raise LookupError("bug")

    events.schedule(1, broken)
    events.schedule(2, log.append, "after")
    with pytest.raises(LookupError) as raised:
        events.run()
    # the kernel's frame is in the traceback, named as the queue's module
    names = []
    tb = raised.value.__traceback__
    while tb is not None:
        names.append(tb.tb_frame.f_globals.get("__name__"))
        tb = tb.tb_next
    assert names[-2:] == ["astra_core.events", __name__]
    assert events.now == 1 and events.events_processed == 1
    events.run()
    assert log == ["after"] and events.now == 2


def test_arguments_by_keyword_and_a_callback_and_argument_freed_once_run():
    events = EventQueue()

    class Payload:
        pass

    payload = Payload()
    ref = weakref.ref(payload)
    log = []
    events.schedule(delay_ns=1, callback=log.append, arg=payload)
    events.schedule_at(time_ns=2, callback=log.append)
    del payload
    events.run(until_ns=1)
    assert log[0] is ref()
    log.clear()
    events.run()
    assert log == [None] and ref() is None
