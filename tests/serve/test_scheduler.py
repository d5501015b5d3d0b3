"""The replica scheduler against vLLM's v1 algorithm written request by request.

The scheduler keeps decoding requests as a group and the free blocks as runs;
:class:`Reference` below walks every running request each step exactly as vLLM's
``Scheduler.schedule`` does (running in admission order, preemption of the newest running
request, then FCFS admissions) over vLLM's block pool block by block (a free queue taken
from its head and given back to its tail, last block first; with prefix caching every
full block hashed, so a preempted request admitted again starts from its blocks still
cached). On random traces and KV caches small enough to preempt, both give every request
the same steps for its first token and its last, and the same preemptions."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

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
    block_ids: list[int] = field(default_factory=list)
    first_token_ns: int = -1
    finish_ns: int = -1
    preemptions: int = 0


class Reference:
    """vLLM v1's scheduling, request by request, over its block pool block by block (the
    module docstring); ``caching``: prefix caching (every full block hashed; a block's
    hash here is its request and index, as random prompts share nothing)."""

    def __init__(self, total_blocks: int, block_size: int, budget: int, max_seqs: int, caching: bool = True):
        self.bs, self.budget, self.max_seqs, self.caching = block_size, budget, max_seqs, caching
        self.queue: deque[int] = deque(range(total_blocks))  # free blocks, head first
        self.hash_of: dict[int, tuple[int, int]] = {}
        self.cached: dict[tuple[int, int], set[int]] = {}
        self.running: list[_Req] = []
        self.waiting: deque[_Req] = deque()
        self.scheduled: list[tuple[_Req, int]] = []

    @property
    def free(self) -> int:
        return len(self.queue)

    def _need(self, r: _Req, new: int) -> int:
        return -(-(r.cached + new) // self.bs) - len(r.block_ids)

    def _allocate(self, r: _Req, count: int) -> None:
        for _ in range(count):
            block = self.queue.popleft()
            key = self.hash_of.pop(block, None)
            if key is not None:  # evicted from the cache
                self.cached[key].discard(block)
            r.block_ids.append(block)

    def _free(self, r: _Req) -> None:
        self.queue.extend(reversed(r.block_ids))
        r.block_ids = []

    def _preempt(self) -> _Req:
        v = self.running.pop()
        self._free(v)
        v.cached = 0
        v.preemptions += 1
        self.waiting.appendleft(v)
        return v

    def _hit(self, r: _Req) -> list[int]:
        """The blocks ``r`` finds cached from its first on, at most its tokens less one."""
        if not self.caching:
            return []
        limit = (r.request.prompt_tokens + r.produced - 1) // self.bs
        blocks = []
        while len(blocks) < limit and self.cached.get((r.request.id, len(blocks))):
            blocks.append(next(iter(self.cached[(r.request.id, len(blocks))])))
        return blocks

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
            self._allocate(r, self._need(r, new))
            self.scheduled.append((r, new))
            budget -= new
        while not preempted and self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            r = self.waiting[0]
            hit = self._hit(r) if r.cached == 0 else []
            computed = r.cached + len(hit) * self.bs
            new = min(r.request.prompt_tokens + r.produced - computed, budget)
            if -(-(computed + new) // self.bs) - len(r.block_ids) > self.free:  # hit blocks too
                break
            for block in hit:  # touched: out of the free queue
                self.queue.remove(block)
            r.block_ids += hit
            r.cached = computed
            self.waiting.popleft()
            self._allocate(r, self._need(r, new))
            self.running.append(r)
            self.scheduled.append((r, new))
            budget -= new
        return sum(new for _, new in self.scheduled)

    def complete(self, end_ns: int) -> None:
        for r, new in self.scheduled:
            r.cached += new
            if self.caching:
                for index in range(r.cached // self.bs):
                    block = r.block_ids[index]
                    if block not in self.hash_of:
                        self.hash_of[block] = (r.request.id, index)
                        self.cached.setdefault((r.request.id, index), set()).add(block)
            if r.cached < r.request.prompt_tokens + r.produced:
                continue
            r.produced += 1
            if r.first_token_ns < 0:
                r.first_token_ns = end_ns
            if r.produced == r.request.output_tokens:
                r.finish_ns = end_ns
                self._free(r)
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
    if blocks < 100:  # the case exercises preemption, and readmission from cached blocks
        assert replica.preemptions > 0 and replica.reused_blocks > 0


def test_a_lone_request_takes_its_prompt_chunks_then_one_step_per_token():
    # 100-token prompt, budget 32: chunks of 32, 32, 32, 4; the 4th samples the first token,
    # then 9 more steps for the other 9 tokens
    replica = Replica(100, 16, 32, 8)
    seq = Sequence(Request(0, 0, 100, 10))
    _drive(replica, replica.waiting, [seq.request], [seq])
    assert seq.first_token_ns == 4 * STEP_NS
    assert seq.finish_ns == (4 + 9) * STEP_NS
    assert seq.produced == 10 and replica.free == 100


@pytest.mark.parametrize(("seed", "blocks", "budget", "max_seqs"), [(1, 60, 64, 16), (2, 40, 32, 8)])
def test_without_prefix_caching_a_preempted_request_recomputes_everything(seed, blocks, budget, max_seqs):
    requests = _trace(seed, 300, rate_per_step=0.6)
    replica = Replica(blocks, 16, budget, max_seqs, prefix_caching=False)
    seqs = [Sequence(r) for r in requests]
    _drive(replica, replica.waiting, requests, seqs)
    reference = Reference(blocks, 16, budget, max_seqs, caching=False)
    refs = [_Req(r) for r in requests]
    _drive(reference, reference.waiting, requests, refs)
    assert [(s.first_token_ns, s.finish_ns, s.preemptions) for s in seqs] == [
        (r.first_token_ns, r.finish_ns, r.preemptions) for r in refs
    ]
    assert replica.preemptions > 0 and replica.reused_blocks == 0 and replica.free == blocks


def test_guaranteed_no_evict_holds_each_request_whole_and_never_preempts():
    # TensorRT-LLM's GUARANTEED_NO_EVICT: 600 blocks, requests of 100 + 60 tokens (10 blocks
    # each, held whole from admission): never more than 60 run at once, none is preempted,
    # and every block comes back; vLLM's policy on the same cache preempts
    requests = [Request(i, i * 50, 100, 60) for i in range(400)]
    runs = {}
    for no_evict in (True, False):
        replica = Replica(600, 16, 512, 256, no_evict=no_evict)
        seqs = [Sequence(r) for r in requests]
        peak = 0
        now, i = 0, 0
        while i < len(seqs) or replica.busy:
            while i < len(seqs) and requests[i].arrival_ns <= now:
                replica.waiting.append(seqs[i])
                i += 1
            work = replica.schedule(now)
            peak = max(peak, replica.running)
            if work.tokens == 0 and i < len(seqs):
                now = requests[i].arrival_ns
                continue
            now += 1000
            replica.complete(now, 1000)
        assert all(s.finish_ns > 0 for s in seqs) and replica.free == 600
        runs[no_evict] = (peak, replica.preemptions)
    assert runs[True] == (60, 0)
    assert runs[False][1] > 0 and runs[False][0] > 60
