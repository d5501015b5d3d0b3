"""EventQueue's step_end hook: one call per instant with work pending, before time moves."""

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
