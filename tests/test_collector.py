"""The collector policy around astra's large structures (astra_core.collector)."""

import gc

import pytest

from astra_core.collector import YOUNG_THRESHOLD, few_passes, paused


@pytest.fixture(autouse=True)
def _nothing_frozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_objects_alive_on_entry_are_set_apart_and_return_on_exit():
    before = gc.get_threshold()
    alive = [[i] for i in range(1000)]
    with few_passes():
        assert gc.get_freeze_count() > len(alive)  # no pass walks them
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        with few_passes():  # reentrant: the outer block still owns the permanent generation
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0  # back in the oldest generation
    assert gc.get_threshold() == before


def test_what_is_built_while_paused_is_set_apart_before_the_collector_runs_again():
    was = gc.isenabled()
    with few_passes():
        apart = gc.get_freeze_count()
        with paused():
            assert not gc.isenabled()
            built = [[i] for i in range(1000)]
        assert gc.isenabled() == was
        assert gc.get_freeze_count() >= apart + len(built) + 1
    assert gc.get_freeze_count() == 0


def test_a_cycle_made_inside_is_still_collected():
    class Node:
        pass

    with few_passes():
        node = Node()
        node.me = node  # a cycle made after the entry: the young generation's passes see it
        del node
        assert gc.collect() >= 1


def test_a_permanent_generation_in_use_elsewhere_is_left_alone():
    mine = [object()]
    gc.freeze()  # e.g. a server that froze its objects before forking
    frozen = gc.get_freeze_count()
    with few_passes():
        with paused():
            built = [[i] for i in range(100)]
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == frozen  # not unfrozen either
    del mine, built


def test_a_process_forked_inside_starts_with_nothing_set_apart():
    """A worker forked inside a block (astra_core.workers' forks never return into their
    parent's code) must not keep its objects out of every pass for good."""
    import os

    import astra_core.collector as collector

    with few_passes():
        assert gc.get_freeze_count() > 0
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 when its state is clean
            clean = gc.get_freeze_count() == 0 and collector._depth == 0 and not collector._owned
            with few_passes():  # and a block of its own sets apart and ends as usual
                clean = clean and gc.get_freeze_count() > 0
            os._exit(0 if clean and gc.get_freeze_count() == 0 else 1)
        _, status = os.waitpid(pid, 0)
        assert gc.get_freeze_count() > 0  # the parent's block is still its own
    assert os.waitstatus_to_exitcode(status) == 0
