"""The replica scheduler against vLLM's v1 algorithm written request by request.

The scheduler keeps decoding requests as a group; :class:`Reference` below walks every
running request each step exactly as vLLM's ``Scheduler.schedule`` does (running in
admission order, preemption of the newest running request, then FCFS admissions). On
random traces and KV caches small enough to preempt, both give every request the same
steps for its first token and its last, and the same preemptions."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import pytest

from astra_core.serve.requests import Request
from astra_core.serve.scheduler import Replica, Sequence

STEP_NS = 1000


@dataclass(eq=False)
class _Req:
    request: Request
    cached: int = 0
    produced: int = 0
    blocks: int = 0
    first_token_ns: int = -1
    finish_ns: int = -1
    preemptions: int = 0


class Reference:
    """vLLM v1's scheduling, request by request (the module docstring)."""

    def __init__(self, total_blocks: int, block_size: int, budget: int, max_seqs: int):
        self.free, self.bs, self.budget, self.max_seqs = total_blocks, block_size, budget, max_seqs
        self.running: list[_Req] = []
        self.waiting: deque[_Req] = deque()
        self.scheduled: list[tuple[_Req, int]] = []

    def _need(self, r: _Req, new: int) -> int:
        return -(-(r.cached + new) // self.bs) - r.blocks

    def _preempt(self) -> _Req:
        v = self.running.pop()
        self.free += v.blocks
        v.blocks = v.cached = 0
        v.preemptions += 1
        self.waiting.appendleft(v)
        return v

    def schedule(self) -> int:
        budget, preempted, self.scheduled = self.budget, False, []
        for r in list(self.running):
            if budget <= 0 or r not in self.running:
                break
            new = min(r.request.prompt_tokens + r.produced - r.cached, budget)
            while self._need(r, new) > self.free:
                preempted = True
                if self._preempt() is r:
                    break
            if r not in self.running:
                break
            self.free -= self._need(r, new)
            r.blocks += self._need(r, new)
            self.scheduled.append((r, new))
            budget -= new
        while not preempted and self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            r = self.waiting[0]
            new = min(r.request.prompt_tokens + r.produced - r.cached, budget)
            if self._need(r, new) > self.free:
                break
            self.waiting.popleft()
            self.free -= self._need(r, new)
            r.blocks += self._need(r, new)
            self.running.append(r)
            self.scheduled.append((r, new))
            budget -= new
        return sum(new for _, new in self.scheduled)

    def complete(self, end_ns: int) -> None:
        for r, new in self.scheduled:
            r.cached += new
            if r.cached < r.request.prompt_tokens + r.produced:
                continue
            r.produced += 1
            if r.first_token_ns < 0:
                r.first_token_ns = end_ns
            if r.produced == r.request.output_tokens:
                r.finish_ns = end_ns
                self.free += r.blocks
                r.blocks = 0
                self.running.remove(r)


def _drive(engine, waiting, requests: list[Request], items: list) -> None:
    """Step ``engine`` back to back at STEP_NS each, queuing each request (``items[i]``
    for ``requests[i]``) by the start of the first step after it arrives."""
    now, i = 0, 0
    while True:
        while i < len(requests) and requests[i].arrival_ns <= now:
            waiting.append(items[i])
            i += 1
        scheduled = engine.schedule(now) if isinstance(engine, Replica) else engine.schedule()
        tokens = scheduled.tokens if isinstance(engine, Replica) else scheduled
        if tokens == 0:
            if i == len(requests):
                return
            now = requests[i].arrival_ns
            continue
        now += STEP_NS
        if isinstance(engine, Replica):
            engine.complete(now, STEP_NS)
        else:
            engine.complete(now)


def _trace(seed: int, count: int, rate_per_step: float) -> list[Request]:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(STEP_NS / rate_per_step, count)).astype(int)
    prompts = rng.integers(1, 120, count)
    outputs = rng.integers(1, 60, count)
    return [Request(i, int(arrivals[i]), int(prompts[i]), int(outputs[i])) for i in range(count)]


@pytest.mark.parametrize(
    ("seed", "blocks", "budget", "max_seqs"),
    [
        (0, 400, 64, 16),
        (1, 60, 64, 16),
        (2, 40, 32, 8),
        (3, 25, 128, 32),
        (4, 2000, 256, 64),
        (5, 30, 16, 16),
    ],
)
def test_the_grouped_scheduler_is_vllms_step_for_step(seed, blocks, budget, max_seqs):
    requests = _trace(seed, 300, rate_per_step=0.6)
    replica = Replica(blocks, 16, budget, max_seqs)
    seqs = [Sequence(r) for r in requests]
    _drive(replica, replica.waiting, requests, seqs)
    reference = Reference(blocks, 16, budget, max_seqs)
    refs = [_Req(r) for r in requests]
    _drive(reference, reference.waiting, requests, refs)
    assert [(s.first_token_ns, s.finish_ns, s.preemptions) for s in seqs] == [
        (r.first_token_ns, r.finish_ns, r.preemptions) for r in refs
    ]
    assert all(s.finish_ns > 0 for s in seqs)
    assert replica.free == blocks  # every block back
    if blocks < 100:
        assert replica.preemptions > 0  # the case exercises preemption


def test_a_lone_request_takes_its_prompt_chunks_then_one_step_per_token():
    # 100-token prompt, budget 32: chunks of 32, 32, 32, 4; the 4th samples the first token,
    # then 9 more steps for the other 9 tokens
    replica = Replica(100, 16, 32, 8)
    seq = Sequence(Request(0, 0, 100, 10))
    _drive(replica, replica.waiting, [seq.request], [seq])
    assert seq.first_token_ns == 4 * STEP_NS
    assert seq.finish_ns == (4 + 9) * STEP_NS
    assert seq.produced == 10 and replica.free == 100
