"""The incremental max-min solver against progressive filling from scratch.

The reference below is the textbook algorithm (Bertsekas and Gallager, Data
Networks, section 6.5.2), written independently of the C++ solver: raise
every unfrozen flow's rate together, freeze the flows of the first link to
fill (and any flow that reaches its cap), repeat. After every batch of random
additions and removals, the incremental solver must give the same rates.
"""

from __future__ import annotations

import random

import pytest

from astra_flow.maxmin import Flow, MaxMinSolver


def progressive_filling(capacity: list[float], flows: list[tuple]) -> list[float]:
    """Rates of ``flows`` = [(links, weights, cap)] on links of ``capacity``, from scratch."""
    rates = [0.0] * len(flows)
    left = list(capacity)
    active = set(range(len(flows)))
    while active:

        def weight_on(link):
            return sum(flows[i][1][flows[i][0].index(link)] for i in active if link in flows[i][0])  # noqa: B023

        levels = {link: left[link] / weight_on(link) for link in range(len(capacity)) if weight_on(link) > 0}
        level = min([*levels.values(), *(flows[i][2] for i in active if flows[i][2] > 0)])
        done = {
            i
            for i in active
            if 0 < flows[i][2] <= level * (1 + 1e-12)
            or any(abs(levels[link] - level) <= 1e-12 * level for link in flows[i][0])
        }
        for i in done:
            rates[i] = level
            for link, w in zip(flows[i][0], flows[i][1]):
                left[link] -= w * level
        active -= done
    return rates


def test_two_links_the_textbook_example():
    # Link 0 (capacity 1) carries A and B; link 1 (capacity 10) carries B and C.
    # A and B freeze at 0.5 on link 0; C takes what link 1 has left: 9.5.
    solver = MaxMinSolver([1.0, 10.0])
    a, b, c = Flow((0,), (1.0,)), Flow((0, 1), (1.0, 1.0)), Flow((1,), (1.0,))
    for f in (a, b, c):
        solver.add(f)
    changed = []
    solver.solve(lambda f, old: changed.append((f, old)))
    assert (a.rate, b.rate, c.rate) == (0.5, 0.5, 9.5)
    assert sorted(id(f) for f, _ in changed) == sorted(map(id, (a, b, c)))
    assert solver.used == [1.0, 10.0]
    # A leaves: B rises to link 0's full capacity and C falls to 9.
    solver.remove(a)
    solver.solve(lambda f, old: None)
    assert (b.rate, c.rate) == (1.0, 9.0)


def test_ack_weights_and_caps():
    # One link of 10: a data flow (weight 1) and the ACKs of another flow (weight 0.02)
    # whose own bottleneck is its cap of 3. The data flow gets 10 - 0.02 * 3 = 9.94.
    solver = MaxMinSolver([10.0, 100.0])
    data, capped = Flow((0,), (1.0,)), Flow((1, 0), (1.0, 0.02), cap=3.0)
    solver.add(data)
    solver.add(capped)
    solver.solve(lambda f, old: None)
    assert capped.rate == 3.0
    assert data.rate == pytest.approx(9.94, rel=1e-12)


@pytest.mark.parametrize(
    "links, weights, cap, message",
    [
        ((0,), (float("nan"),), 0.0, "weight on link 0 must be positive and finite"),
        ((0, 1), (1.0, float("inf")), 0.0, "weight on link 1 must be positive and finite"),
        ((1,), (0.0,), 0.0, "weight on link 1 must be positive and finite"),
        ((0,), (-1.0,), 0.0, "weight on link 0 must be positive and finite"),
        ((0, 0), (1.0, 1.0), 0.0, "crosses link 0 twice"),
        ((0,), (1.0,), float("nan"), "cap must be finite and at least 0"),
        ((0,), (1.0,), -2.0, "cap must be finite and at least 0"),
        ((2,), (1.0,), 0.0, "crosses link 2 of 2"),
    ],
)
def test_a_flow_that_no_rate_can_satisfy_is_refused(links, weights, cap, message):
    solver = MaxMinSolver([10.0, 100.0])
    with pytest.raises(ValueError, match=message):
        solver.add(Flow(links, weights, cap))


@pytest.mark.parametrize("seed", range(40))
def test_incremental_rates_equal_a_full_solve(seed):
    rng = random.Random(seed)
    links = rng.randint(1, 12)
    capacity = [rng.choice([1.0, 2.0, 3.5, 10.0]) for _ in range(links)]
    solver = MaxMinSolver(capacity)
    live: dict[Flow, tuple] = {}
    for _ in range(25):
        for _ in range(rng.randint(0, 6)):
            chosen = tuple(rng.sample(range(links), rng.randint(1, min(4, links))))
            weights = tuple(rng.choice([1.0, 1.0, 0.05]) for _ in chosen)
            cap = rng.choice([0.0, 0.0, 0.0, 0.7])
            flow = Flow(chosen, weights, cap)
            solver.add(flow)
            live[flow] = (chosen, weights, cap)
        for flow in list(live):
            if rng.random() < 0.3:
                solver.remove(flow)
                del live[flow]
        reported = {}
        solver.solve(lambda f, old: reported.__setitem__(f, old))  # noqa: B023 - called here
        flows = list(live)
        expected = progressive_filling(capacity, [live[f] for f in flows])
        for flow, rate in zip(flows, expected):
            assert flow.rate == pytest.approx(rate, rel=1e-9)
        # Conservation: each link's used capacity is the sum over its flows.
        for link in range(links):
            total = sum(w * f.rate for f in flows for lk, w in zip(f.links, f.weights) if lk == link)
            assert solver.used[link] == pytest.approx(total, rel=1e-9, abs=1e-9)
            assert solver.used[link] <= capacity[link] * (1 + 1e-9)
        assert all(f.rate != old for f, old in reported.items())


def test_every_re_solve_of_a_fat_tree_all_to_all_is_max_min():
    # An all-to-all of uneven messages on a k = 4 fat-tree (ECMP over the core, ACK load
    # on the reverse routes, flows ending and starting all the time): after every
    # re-solve the incremental rates equal a fresh solve of the same flows.
    from astra_core.topology.generators import fat_tree
    from astra_flow.config import FlowConfig
    from astra_flow.network import FlowNetwork

    net = FlowNetwork(fat_tree(4), FlowConfig(ack_bytes=86, reallocation_delay_ns=0))
    model = net._links
    capacity = net.topology.link_bandwidth
    checked = []

    def solve_and_check():
        model.solve()
        flows = model.flows
        fresh = MaxMinSolver(capacity)
        copies = [Flow(links, weights, cap) for links, weights, cap, _ in flows]
        for copy in copies:
            fresh.add(copy)
        fresh.solve(lambda f, old: None)
        for (*_, rate), copy in zip(flows, copies):
            assert rate == pytest.approx(copy.rate, rel=1e-9)
        checked.append(len(flows))

    net.events.step_end = solve_and_check
    rng = random.Random(7)
    for src in range(16):
        for dst in range(16):
            if src != dst:
                net.send(src, dst, rng.choice([4096, 65536, 300_000]), lambda _: None, tag=src % 3)
    net.run()
    assert len(checked) > 50 and max(checked) == 240


def test_a_flow_at_the_level_of_two_full_links_is_held_at_the_lower_numbered():
    # Links 0 and 1 have capacities 0.1 + 0.2 and 0.3: equal but for the last bit of the
    # sum, so which one fills first is rounding. A flow crossing both is held at link
    # 0 whichever order its links come in, and whether it is placed alone or refilled
    # with another flow (link 2 gives the other flow room to take).
    for links in ((0, 1), (1, 0)):
        solver = MaxMinSolver([0.1 + 0.2, 0.3, 1.0])
        crossing = Flow(links, (1.0, 1.0))
        solver.add(crossing)
        solver.solve(lambda f, old: None)
        assert solver.bottleneck(crossing) == 0
        other = Flow((1, 2), (1.0, 1.0))
        solver.add(other)
        solver.solve(lambda f, old: None)
        # link 1 fills at 0.15 with both flows: it holds them both
        assert (crossing.rate, other.rate) == pytest.approx((0.15, 0.15), rel=1e-12)
        assert solver.bottleneck(crossing) == solver.bottleneck(other) == 1
        solver.remove(other)
        solver.solve(lambda f, old: None)
        assert crossing.rate == pytest.approx(0.3, rel=1e-12)
        assert solver.bottleneck(crossing) == 0
