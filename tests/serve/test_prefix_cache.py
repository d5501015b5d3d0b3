"""Prefix caching: a shared prefix computed once per replica, its blocks held once, kept
while unused and evicted when the blocks are needed."""

from __future__ import annotations

from astra_core.serve.deployment import Deployment
from astra_core.serve.engine import serve_requests
from astra_core.serve.requests import Request
from astra_core.serve.scheduler import Replica, Sequence
from astra_core.serve.step_time import StepClock, StepWork
from astra_core.workload.generators.gpus import load_gpu
from astra_core.workload.generators.models import load_model

H100 = load_gpu("H100")
LLAMA8B = load_model("llama3-8b")


def _two(prefix_caching: bool = True):
    # a 1,030-token shared prefix (64 whole blocks = 1,024 tokens cached), prompts of 1,100
    first = Request(0, 0, 1100, 4, "system", 1030)
    second = Request(1, 10**9, 1100, 4, "system", 1030)
    d = Deployment(LLAMA8B, H100, prefix_caching=prefix_caching)
    return d, serve_requests(d, [first, second])


def test_a_later_request_computes_only_what_follows_the_cached_prefix():
    d, result = _two()
    clock = StepClock(d)
    full = round(clock.step_ns(StepWork(chunks=[(1100, 0)], samples=1)))
    rest = round(clock.step_ns(StepWork(chunks=[(1100 - 1024, 1024)], samples=1)))
    assert result.requests.ttft_ns.tolist() == [full, rest]
    _, uncached = _two(prefix_caching=False)
    assert uncached.requests.ttft_ns.tolist() == [full, full]


def test_a_shared_prefix_is_held_once_and_every_block_comes_back():
    replica = Replica(200, 16, 4096, 8)
    seqs = [Sequence(Request(i, 0, 600, 50, "p", 512)) for i in range(3)]
    replica.waiting.append(seqs[0])
    replica.schedule(0)
    replica.complete(1, 1)  # the first computed its prompt: 512 / 16 = 32 blocks cached
    used_one = replica.total_blocks - replica.free
    replica.waiting.extend(seqs[1:])
    replica.schedule(1)
    # the others map the 32 cached blocks and take 38 - 32 = 6 of their own (600 tokens)
    assert replica.total_blocks - replica.free == used_one + 2 * 6
    assert [s.cached for s in seqs[1:]] == [512, 512] and replica.prefixes.hits == 2
    while replica.busy:
        replica.complete(2, 1)
        replica.schedule(2)
    assert replica.free == replica.total_blocks  # the prefix's 32 blocks: cached, free to evict
    assert replica.prefixes.evictable == 32


def test_an_unused_prefix_is_evicted_when_its_blocks_are_needed():
    replica = Replica(40, 16, 4096, 8)
    replica.waiting.append(Sequence(Request(0, 0, 512, 1, "p", 512)))
    replica.schedule(0)
    replica.complete(1, 1)  # done at once (one output token): 32 blocks stay cached
    assert replica.prefixes.evictable == 32 and replica.free == 40
    big = Sequence(Request(1, 0, 600, 1))  # 38 blocks: only 8 are free of the cache
    replica.waiting.append(big)
    replica.schedule(1)
    assert big.blocks == 38 and "p" not in replica.prefixes.entries and replica.prefixes.evictable == 0


def test_a_request_that_does_not_fit_yet_keeps_the_tokens_it_arrived_with():
    # a decode side's request arrives with its prompt cached (all but the last token); while
    # the blocks are taken it waits, and keeps them cached for when they free up
    replica = Replica(10, 16, 4096, 8)
    hog = Sequence(Request(0, 0, 150, 1))  # 10 blocks
    replica.waiting.append(hog)
    replica.schedule(0)
    arrived = Sequence(Request(1, 0, 100, 3), cached=99)
    replica.waiting.append(arrived)
    replica.schedule(1)
    assert arrived in replica.waiting and arrived.cached == 99 and arrived.blocks == 0
    replica.complete(2, 1)  # the hog is done: its blocks come back
    work = replica.schedule(2)
    assert work.chunks == [(1, 99)] and arrived.blocks == 7


def test_preempted_requests_with_shared_prefixes_resume_and_every_block_comes_back():
    # a cache too small for the load: requests that share a declared prefix (two prefixes)
    # are preempted, resume from their prefix and their own blocks still cached, and every
    # request finishes with every block free again (cached or not)
    replica = Replica(120, 16, 256, 16)
    seqs = [Sequence(Request(i, 0, 300 + 7 * i, 40 + i % 5, f"p{i % 2}", 200)) for i in range(24)]
    replica.waiting.extend(seqs)
    now = 0
    while replica.busy:
        replica.schedule(now)
        now += 1000
        replica.complete(now, 1000)
        assert 0 <= replica.free <= replica.total_blocks
        assert sum(run[0] for run in replica.queue) + replica.prefixes.evictable == replica.free
    assert all(s.finish_ns > 0 for s in seqs) and replica.preemptions > 0 and replica.reused_blocks > 0
    assert replica.free == replica.total_blocks
    assert sum(run[0] for run in replica.queue) + replica.prefixes.evictable == replica.free
