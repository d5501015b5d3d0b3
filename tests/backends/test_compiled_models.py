"""The compiled network models (analytical-congestion's and flow's, C++ of their own
distributions on the kernel's public interface) belong to the event queue they run
on: a run stopped by an exception leaves nothing the garbage collector cannot free,
the deliveries they wait to make included, and a model outlives no queue."""

from __future__ import annotations

import gc
import weakref

import pytest

from astra_analytical.congestion import CongestionAwareNetwork
from astra_core.topology.generators import fat_tree
from astra_flow.config import FlowConfig
from astra_flow.network import FlowNetwork

MAKERS = {
    "analytical-congestion": lambda: CongestionAwareNetwork(fat_tree(4)),
    "flow": lambda: FlowNetwork(fat_tree(4), FlowConfig()),
}


class Stop(Exception):
    pass


class Owner:
    """A callback's owner that holds the network, as the system layer's phases do."""

    def __init__(self, net):
        self.net = net
        self.delivered = []

    def on_delivered(self, arg):
        self.delivered.append(arg)
        if arg == 1:
            raise Stop


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_stopped_run_leaves_nothing_the_collector_cannot_free(name):
    owner = Owner(MAKERS[name]())
    for i in range(4):  # same route, growing sizes: delivered in order, 0 then 1 stops the run
        owner.net.send(0, 5, 100_000 * (i + 1), owner.on_delivered, i)
    with pytest.raises(Stop):
        owner.net.run()
    assert owner.delivered == [0, 1]  # two deliveries still held by the queue for the model
    gone = [weakref.ref(owner), weakref.ref(owner.net)]
    del owner
    gc.collect()
    assert [ref() for ref in gone] == [None, None]


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_finished_run_delivers_every_message_once(name):
    owner = Owner(MAKERS[name]())
    owner.on_delivered = owner.delivered.append  # no stop
    for i in range(6):
        owner.net.send(i, (i + 5) % 16, 50_000, owner.on_delivered, i)
    owner.net.run()
    assert sorted(owner.delivered) == list(range(6))
    assert owner.net.messages == 6
