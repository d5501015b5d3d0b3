"""Weighted max-min fair rates by progressive filling, re-solved incrementally.

Each flow crosses a set of links; on link ``l`` it uses ``weight x rate``
of the link's capacity (weight 1 for its data, a small weight for the ACKs
its data causes on the reverse path). Max-min fairness (Bertsekas and
Gallager, *Data Networks*, 2nd ed., section 6.5.2, progressive filling): all
rates rise together from zero; when a link fills, the flows crossing it
freeze at the current level; an optional per-flow cap freezes its flow at
the cap. The result is the allocation in which no flow can go faster
without slowing a flow that is no faster.

Incremental re-solving uses the structure of progressive filling: the
filling below level ``s`` is the same with or without a change if no link the
change touches fills below ``s``. Removing a flow of rate ``r`` therefore
changes no flow slower than ``r``; adding flows changes no flow slower than
``min over their links of capacity / (weight of every flow on it)`` (a link
cannot fill below that level). A re-solve takes that level ``s0``, keeps every
flow slower than ``s0`` at its rate, and refills (the *members*) the new flows
and the flows at or above ``s0`` held at a changed link (whose rate that
link's filling set). The others keep their rates and their share of every
link; the set grows, and the members are filled again, only where that could
be wrong: by the flows held at a link that a member whose rate moved
crosses, and by every flow on a member's bottleneck link if a fixed flow
there is faster than the member (max-min allows no faster flow on a flow's
bottleneck).

Two shortcuts need no filling: new flows that can take the capacity their
links have spare, split among the new flows of each link, without a faster
flow on the link each fills (then no other rate changes); and a single member
(its tightest link). ``tests/backends/flow/test_maxmin.py`` checks the rates
against progressive filling from scratch after every change.

Units are the caller's (bytes/ns here); capacities must be positive.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

#: Members up to which a fill scans links instead of keeping a heap.
_FEW = 16
#: Relative slack when comparing rates: levels computed through different
#: sums of the same numbers differ in their last bits.
_REL = 1e-9


class Flow:
    """A flow of the solver: ``links`` with ``weights`` (same length; a link
    appears once), an optional ``cap`` (same unit as rates; 0 = none), and its
    current ``rate`` (0 until solved, > 0 after) and ``bottleneck``, the link
    whose filling set that rate (-1 for its cap). Subclass it to carry payload."""

    __slots__ = ("links", "weights", "cap", "rate", "_mark", "bottleneck")

    def __init__(self, links: tuple[int, ...], weights: tuple[float, ...], cap: float = 0.0):
        self.links = links
        self.weights = weights
        self.cap = cap
        self.rate = 0.0
        self._mark = 0
        self.bottleneck = -1  # the link it filled at its last solve (-1: its cap, or none)


class MaxMinSolver:
    """Max-min fair rates of the flows on ``capacities`` (one per link, > 0).

    ``add(flow)`` and ``remove(flow)`` record changes; ``solve(on_rate)``
    re-solves the flows those changes can affect and calls
    ``on_rate(flow, old_rate)`` for every flow whose rate changed (new flows
    have ``old_rate`` 0). Per link: ``flows_on[l]`` maps its active flows to
    their weights, ``used[l]`` is the capacity they
    take (sum of weight x rate), ``weight[l]`` the sum of their weights,
    ``count[l]`` how many there are and ``peak_flows[l]`` the most at once.
    ``flows_solved`` counts refilled flows over all solves (the work done).
    """

    def __init__(self, capacities: Iterable[float]):
        self.capacity = list(capacities)
        links = len(self.capacity)
        self.flows_on: list[dict[Flow, float]] = [{} for _ in range(links)]
        self.used = [0.0] * links
        self.weight = [0.0] * links
        self.count = [0] * links
        self.peak_flows = [0] * links
        self.flows_solved = 0
        self._changed_links: set[int] = set()
        self._added: list[Flow] = []
        self._level = float("inf")  # s0: flows slower than this keep their rates
        self._marks = 0

    # -- changes --------------------------------------------------------------------------
    def add(self, flow: Flow) -> None:
        """Start ``flow`` (rate 0 until the next ``solve``)."""
        flow.rate = 0.0
        flows_on, weight, count, peak = self.flows_on, self.weight, self.count, self.peak_flows
        for link, w in zip(flow.links, flow.weights):
            flows_on[link][flow] = w
            weight[link] += w
            count[link] += 1
            if count[link] > peak[link]:
                peak[link] = count[link]
        self._added.append(flow)

    def remove(self, flow: Flow) -> None:
        """Stop ``flow``; the capacity it used is free from the next ``solve``."""
        rate = flow.rate
        flows_on, used, weight, count = self.flows_on, self.used, self.weight, self.count
        changed = self._changed_links
        for link, w in zip(flow.links, flow.weights):
            del flows_on[link][flow]
            used[link] -= w * rate
            weight[link] -= w
            count[link] -= 1
            changed.add(link)
        if rate < self._level:
            self._level = rate
        if rate == 0.0:  # removed before it was ever solved
            self._added.remove(flow)

    # -- solving --------------------------------------------------------------------------
    def solve(self, on_rate: Callable[[Flow, float], None]) -> None:
        """Re-solve after the recorded changes (see the module docstring)."""
        if self._added and self._place_new(on_rate):
            self._added = []
        capacity, flows_on, used, weight = self.capacity, self.flows_on, self.used, self.weight
        level = self._level
        changed = self._changed_links
        bounded: set[int] = set()
        for flow in self._added:
            for link in flow.links:
                if link not in bounded:
                    bounded.add(link)
                    bound = capacity[link] / weight[link]
                    if bound < level:
                        level = bound
        changed |= bounded
        self._added = []
        self._level = float("inf")
        if not changed:
            return
        self._changed_links = set()
        self._marks += 1
        mark = self._marks
        threshold = level * (1 - _REL)

        # The refilled flows: new ones (rate 0) and those at or above the level on an
        # admitted link; every other flow keeps its rate and its share of each link.
        left: dict[int, float] = {}  # link -> capacity left to the members
        load: dict[int, float] = {}  # link -> weight of the members on it
        members: list[Flow] = []

        def admit(link: int, held_here_only: bool) -> None:
            for flow in flows_on[link]:
                rate = flow.rate
                if (rate < threshold and rate != 0.0) or flow._mark == mark:
                    continue
                if held_here_only and rate != 0.0 and flow.bottleneck != link:
                    continue  # held at another link: moves only if that one does
                flow._mark = mark
                members.append(flow)
                for other, w in zip(flow.links, flow.weights):
                    if other in left:
                        left[other] += w * rate
                        load[other] += w
                    else:
                        left[other] = capacity[other] - used[other] + w * rate
                        load[other] = w

        for link in changed:
            admit(link, True)
        held = set(changed)  # links whose flows held there are members
        admitted: set[int] = set()  # links all of whose flows at or above the level are members
        while True:
            new_rate, bottlenecks = self._fill(members, left, load, flows_on, mark)
            # Refill with more flows where the fixed ones could be wrong: those held at a
            # link that a member whose rate moved crosses, and every flow on a member's
            # bottleneck link if a fixed one there is faster than the member (max-min
            # lets no flow be faster there).
            before = len(members)
            for flow in members[:before]:
                old, rate = flow.rate, new_rate[flow]
                if abs(rate - old) > _REL * rate:
                    for link in flow.links:
                        if link not in held:
                            held.add(link)
                            admit(link, True)
            for link, share in bottlenecks.items():
                top = share * (1 + _REL)
                if link not in admitted and any(
                    flow._mark != mark and flow.rate > top for flow in flows_on[link]
                ):
                    admitted.add(link)
                    admit(link, False)
            if len(members) == before:
                break
        self.flows_solved += len(members)

        # Commit: account every flow whose rate changed, then report it.
        for flow, rate in new_rate.items():
            old = flow.rate
            if rate != old:
                self._set_rate(flow, rate)
                on_rate(flow, old)

    def _set_rate(self, flow: Flow, rate: float) -> None:
        """Set ``flow``'s rate and the capacity it uses on every link."""
        delta = rate - flow.rate
        used = self.used
        for link, w in zip(flow.links, flow.weights):
            used[link] += w * delta
        flow.rate = rate

    def _place_new(self, on_rate: Callable[[Flow, float], None]) -> bool:
        """Give the new flows the capacity their links have spare, split by weight
        among the new flows of each link, if that is max-min: it slows no other flow,
        and every new flow fills a link on which no flow is faster (the bottleneck
        condition), so every other rate stays as it was. Returns whether it did (if
        not, nothing changed)."""
        capacity, used, flows_on, added = self.capacity, self.used, self.flows_on, self._added
        new_weight: dict[int, float] = {}
        for flow in added:
            for link, w in zip(flow.links, flow.weights):
                new_weight[link] = new_weight.get(link, 0.0) + w
        share = {link: (capacity[link] - used[link]) / w for link, w in new_weight.items()}
        rates = []
        for flow in added:
            rate, tightest = min((share[link], link) for link in flow.links)
            if not rate > 0:
                return False
            if 0 < flow.cap < rate:
                rate, tightest = flow.cap, -1
            rates.append((rate, tightest))
        filled = dict.fromkeys(new_weight, 0.0)
        for flow, (rate, _) in zip(added, rates):
            for link, w in zip(flow.links, flow.weights):
                filled[link] += w * rate
        for _flow, (rate, tightest) in zip(added, rates):
            if tightest < 0:
                continue
            top = rate * (1 + _REL)
            if filled[tightest] < (capacity[tightest] - used[tightest]) * (1 - _REL):
                return False  # another new flow there is slower: the link is not full
            if any(other.rate > top for other in flows_on[tightest]):
                return False  # a flow there is faster
        for flow, (rate, tightest) in zip(added, rates):
            flow.bottleneck = tightest
            self._set_rate(flow, rate)
            on_rate(flow, 0.0)
        return True

    @staticmethod
    def _fill_few(
        members: list[Flow], remaining: dict[int, float], load: dict[int, float]
    ) -> tuple[dict[Flow, float], dict[int, float]]:
        """:meth:`_fill` for a few members: scan the links for the lowest level each
        round (a round per distinct bottleneck) instead of keeping a heap."""
        new_rate: dict[Flow, float] = {}
        bottlenecks: dict[int, float] = {}
        unfrozen = list(members)
        while unfrozen:
            share, key = min((remaining[link] / w, link) for link, w in load.items() if w > 1e-12)
            share = max(share, 0.0)
            capped = [f for f in unfrozen if 0 < f.cap <= share]
            if capped:
                share = min(f.cap for f in capped)
                frozen = [f for f in capped if f.cap == share]
                key = -1
            else:
                frozen = [f for f in unfrozen if key in f.links]
                bottlenecks[key] = share
            for flow in frozen:
                new_rate[flow] = share
                flow.bottleneck = key
                for other, w in zip(flow.links, flow.weights):
                    remaining[other] -= w * share
                    load[other] -= w
            if key >= 0:
                load[key] = 0.0
            unfrozen = [f for f in unfrozen if f not in new_rate]
        return new_rate, bottlenecks

    def _fill(
        self,
        members: list[Flow],
        left: dict[int, float],
        load: dict[int, float],
        flows_on: list[dict[Flow, float]],
        mark: int,
    ) -> tuple[dict[Flow, float], dict[int, float]]:
        """Progressive filling of ``members`` (flows marked ``mark``) on the capacity
        ``left`` to them (their weight per link: ``load``); returns flow -> rate and
        link -> the level at which it froze members (their bottleneck)."""
        if len(members) == 1:  # alone among flows that keep their rates
            flow = members[0]
            rate, link = min((left[link] / w, link) for link, w in zip(flow.links, flow.weights))
            if 0 < flow.cap < rate:
                flow.bottleneck = -1
                return {flow: flow.cap}, {}
            rate = max(rate, 0.0)
            flow.bottleneck = link
            return {flow: rate}, {link: rate}
        if len(members) <= _FEW:
            return self._fill_few(members, left.copy(), load.copy())
        remaining = left.copy()
        load = load.copy()
        # A heap of link fill levels (lower bounds: a link's level only rises as flows
        # freeze below it) and flow caps.
        heap: list[tuple[float, int]] = [(remaining[link] / w, link) for link, w in load.items() if w > 0]
        capped = [flow for flow in members if flow.cap > 0]
        heap.extend((flow.cap, -1 - i) for i, flow in enumerate(capped))
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        new_rate: dict[Flow, float] = {}
        bottlenecks: dict[int, float] = {}
        todo = len(members)
        while heap and len(new_rate) < todo:
            share, key = pop(heap)
            if key < 0:
                frozen = [capped[-1 - key]]
                if frozen[0] in new_rate:
                    continue
            else:
                w = load[key]
                if w <= 1e-12:
                    continue
                current = max(remaining[key], 0.0) / w
                if current > share * (1 + _REL):
                    push(heap, (current, key))  # stale: the link's level rose since
                    continue
                share = current
                frozen = [flow for flow in flows_on[key] if flow._mark == mark and flow not in new_rate]
            for flow in frozen:
                new_rate[flow] = share
                flow.bottleneck = key if key >= 0 else -1
                for other, w in zip(flow.links, flow.weights):
                    remaining[other] -= w * share
                    load[other] -= w
            if key >= 0:
                load[key] = 0.0
                if frozen:
                    bottlenecks[key] = share
        return new_rate, bottlenecks
