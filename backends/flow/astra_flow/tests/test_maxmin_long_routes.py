"""The solver on flows of many links: past the links a flow keeps in itself
(astra_maxmin.h, kInlineLinks = 6) they live on the heap, and a flow number reused by
a flow of another length moves between the two. Rates must still be max-min:
the same as progressive filling from scratch (test_maxmin's reference), with
flows of 1 to 12 links added, removed and freed at random."""

from __future__ import annotations

import random

import pytest

from astra_flow.maxmin import Flow, MaxMinSolver
from astra_flow.tests.test_maxmin import progressive_filling


@pytest.mark.parametrize("seed", range(20))
def test_rates_of_flows_on_long_and_short_routes_are_max_min(seed: int) -> None:
    rng = random.Random(seed)
    links = 12
    capacity = [rng.choice([1.0, 2.0, 3.5, 10.0]) for _ in range(links)]
    solver = MaxMinSolver(capacity)
    live: dict[Flow, tuple] = {}
    for _ in range(20):
        for _ in range(rng.randint(0, 5)):
            chosen = tuple(rng.sample(range(links), rng.choice([1, 2, 6, 7, 9, 12])))
            weights = tuple(rng.choice([1.0, 1.0, 0.05]) for _ in chosen)
            flow = Flow(chosen, weights, rng.choice([0.0, 0.0, 0.7]))
            solver.add(flow)
            live[flow] = (chosen, weights, flow.cap)
        for flow in list(live):
            if rng.random() < 0.4:
                solver.remove(flow)
                del live[flow]
                if rng.random() < 0.5:
                    solver.release(flow)  # its number goes to the next new flow
        solver.solve(lambda f, old: None)
        flows = list(live)
        expected = progressive_filling(capacity, [live[f] for f in flows])
        assert [f.rate for f in flows] == pytest.approx(expected, rel=1e-9)
        for link in range(links):
            total = sum(w * f.rate for f in flows for lk, w in zip(f.links, f.weights) if lk == link)
            assert solver.used[link] == pytest.approx(total, rel=1e-9, abs=1e-9)
