"""The garnetlike clock never runs backwards.

A port asked to arbitrate for a flit that was ready before now must wake
now. On SimPy's environment, which this model ran on before, such a wake-up
was pushed with a negative delay and SimPy set its clock back to it: on 200
random messages over an 8-NPU switch, 67 wake-ups moved the clock back by up
to 1.7 us and flits were granted in the past (the deliveries summed 74 us
early). The clock is now astra's EventQueue, which refuses the past, and
ports clamp their wake-ups to now.
"""

from __future__ import annotations

import random

import pytest

from astra_core.backend import Topology
from astra_core.config.network import NetworkConfig
from astra_core.plugins import backend_registry
from astra_garnetlike.kernel import Clock

SWITCH8 = {"topology": ["Switch"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}


class _Port:
    def __init__(self):
        self.fired = []

    def fire(self, now):
        self.fired.append(now)


def test_the_clock_refuses_a_wake_up_in_the_past():
    clock = Clock()
    clock.call_in(100, lambda _: None)
    clock.run()
    port = _Port()
    with pytest.raises(ValueError, match="must be finite and >= 0"):
        clock.wake(port, 50)
    clock.wake(port, 100)
    clock.run()
    assert port.fired == [100] and clock.now_ps == 100


def test_random_traffic_runs_without_asking_for_the_past():
    net = backend_registry().create(
        "garnetlike",
        Topology(NetworkConfig.from_dict(SWITCH8)),
        {"flit_bytes": 65536, "packet_bytes": 1 << 20},
    )
    rng = random.Random(0)
    seen: list[float] = []

    def send(pair):
        src, dst = pair
        net.send(src, dst, rng.randrange(1, 3 << 20), lambda _: seen.append(net.now()), tag=1)

    for _ in range(200):
        net.schedule(rng.randrange(0, 100_000), send, tuple(rng.sample(range(8), 2)))
    net.run()  # a port waking in the past would raise ValueError here
    assert len(seen) == 200 and seen == sorted(seen)
