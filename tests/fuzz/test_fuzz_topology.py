"""Fuzz: a topology file gives a fabric or one error line, never a traceback,
a hang or a fabric with impossible links."""

from __future__ import annotations

import math

from hypothesis import given

from astra_core.topology.ns3_format import parse_ns3_topology
from tests.fuzz.budget import answer_or_one_line_error, fuzz_settings
from tests.fuzz.strategies import topology_texts


@fuzz_settings(200)
@given(text=topology_texts())
def test_topology_file(text):
    fabric = answer_or_one_line_error(parse_ns3_topology, text, "fabric.txt", limit_s=5)
    if fabric is None:
        return
    assert fabric.npus_count >= 1
    for src, dst, rate, latency in _cables(fabric):
        assert src != dst
        assert math.isfinite(rate) and rate > 0, (src, dst, rate)
        assert math.isfinite(latency) and latency >= 0, (src, dst, latency)


def _cables(fabric):
    from astra_core.topology.ns3_format import cables

    return cables(fabric)
