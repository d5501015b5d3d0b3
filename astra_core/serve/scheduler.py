"""One replica's engine: vLLM's v1 scheduler over a paged KV cache.

Each step (vLLM 0.11 ``v1/core/sched/scheduler.py`` ``Scheduler.schedule``, as read for
this model; the token budget is ``max_num_batched_tokens``):

1. **Running requests first**, in the order they were admitted: a decoding request asks
   for one token, a request in its prompt for the rest of it, cut to the budget left.
   Its KV blocks grow to ``ceil((cached + new) / block_size)``; when the free blocks do
   not cover that, the most recently admitted running request is preempted (its blocks
   freed, its cached tokens forgotten, put at the head of the waiting queue to recompute
   its prompt and the tokens it has produced) until they do, and if the request itself
   is the one preempted, the step schedules no more running requests.
2. **Waiting requests next**, first come first served, only if no request was preempted
   this step: each takes the rest of its tokens cut to the budget left (chunked
   prefill; without it a prompt that does not fit the budget waits), while the budget
   lasts, fewer than ``max_num_seqs`` requests run, and its blocks fit (waiting requests
   never preempt).

With ``no_evict`` (TensorRT-LLM's default capacity policy, ``GUARANTEED_NO_EVICT``:
"a started request is never paused") a waiting request is admitted only when the free
blocks hold its whole prompt and output, which it then keeps for itself until it
finishes; no running request is ever preempted.

A request samples a token in the step that computes the last of its tokens (its prompt,
or after a preemption its prompt and its earlier output), then one per step until it has
its ``output_tokens``; partial prompt chunks sample nothing. Its blocks are freed when it
finishes.

With prefix caching (vLLM v1's default) a preempted request's full blocks stay cached
after they are freed, and when it is admitted again it starts from those still there
(``kv_cache_manager.py``: ``get_computed_blocks``, at most its tokens less one, in whole
blocks). Free blocks form vLLM's free queue: a freed request's blocks join its tail, last
block first (``free_blocks(reversed(blocks))``), and an allocation takes from its head,
evicting what was cached there; so a preempted request loses its cached blocks from its
last one back as later allocations reach them. astra keeps the queue as runs of blocks
freed together; unused blocks of declared prefixes (:mod:`.prefix_cache`) are evicted
only once the queue runs out.

vLLM requires ``max_num_batched_tokens >= max_num_seqs``, so every decoding request gets
its token every step, and at most one request is part way through its prompt at the end
of a step (the last admitted; the budget ran out on it). The engine keeps decoding
requests as a group (their count, the tokens their caches hold, and how many cross a
block boundary each step), so a step costs time in the requests that change, not in
those that decode.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from astra_core.serve.prefix_cache import PrefixCache
from astra_core.serve.requests import Request
from astra_core.serve.step_time import StepWork

__all__ = ["Replica", "Sequence"]


@dataclass(eq=False)
class Sequence:
    """A request in ``replica``: ``cached`` tokens in its KV cache, ``produced`` output
    tokens so far (for a decoding request: as of its ``decode_step``), ``blocks`` held;
    times [ns]: ``first_scheduled_ns``, ``first_token_ns``, ``finish_ns``,
    ``last_token_ns`` (kept across a preemption); ``preemptions``."""

    request: Request
    replica: int = -1
    cached: int = 0
    produced: int = 0
    blocks: int = 0
    first_scheduled_ns: int = -1
    first_token_ns: int = -1
    finish_ns: int = -1
    last_token_ns: int = -1
    preemptions: int = 0
    decode_step: int = -1  # the step a decoding request started decoding in (-1: not decoding)
    shared: int = 0  # of its blocks, those of a cached prefix (held once for all its users)
    resumed_gap_ns: int = 0  # the inter-token gap a preemption put before its next token
    kept: int = 0  # after a preemption: its full blocks still cached, after its ``kept_after``
    kept_after: int = 0  # the prefix blocks its kept ones follow
    kept_run: list | None = None  # the free queue's run holding them
    reserved: int = 0  # under no_evict: the blocks held for its whole prompt and output


@dataclass
class _Decoders:
    """Decoding requests as a group: ``members`` in admission order, the tokens their
    caches hold at the start of the current step (``context``), how many cross a block
    boundary by step (``by_phase``: members whose ``(cached - step) mod block_size`` is
    the key), and when each finishes (a heap of ``(last step, id, decode step, sequence)``;
    an entry whose decode step is no longer its sequence's is stale)."""

    block_size: int
    members: dict[int, Sequence] = field(default_factory=dict)
    context: int = 0
    by_phase: list[int] = field(default_factory=list)
    finishes: list[tuple[int, int, int, Sequence]] = field(default_factory=list)

    def __post_init__(self):
        self.by_phase = [0] * self.block_size

    def cached_at(self, seq: Sequence, step: int) -> int:
        return seq.cached + (step - seq.decode_step)

    def add(self, seq: Sequence, step: int) -> None:
        """``seq`` decodes from ``step`` on: its cache holds ``seq.cached`` tokens then."""
        seq.decode_step = step
        self.members[seq.request.id] = seq
        self.context += seq.cached
        self.by_phase[(seq.cached - step) % self.block_size] += 1
        left = seq.request.output_tokens - seq.produced
        heapq.heappush(self.finishes, (step + left - 1, seq.request.id, step, seq))

    def remove(self, seq: Sequence, step: int) -> None:
        """Take ``seq`` out at the start of ``step``: its cached and produced tokens and
        its blocks as of then."""
        del self.members[seq.request.id]
        cached = self.cached_at(seq, step)
        self.context -= cached
        self.by_phase[(seq.cached - seq.decode_step) % self.block_size] -= 1
        seq.produced += step - seq.decode_step
        seq.cached, seq.decode_step = cached, -1
        seq.blocks = max(-(-cached // self.block_size), seq.reserved)

    def due(self, step: int) -> list[Sequence]:
        """Members whose last token is the one of ``step``."""
        out = []
        while self.finishes and self.finishes[0][0] <= step:
            _, _, started, seq = heapq.heappop(self.finishes)
            if seq.decode_step == started and self.members.get(seq.request.id) is seq:
                out.append(seq)
        return out

    def crossing(self, step: int) -> int:
        """Members whose next token needs a new block in ``step``."""
        return self.by_phase[-step % self.block_size]


class Replica:
    """One replica's scheduler state over ``total_blocks`` KV blocks (see the module
    docstring); ``budget``: ``max_num_batched_tokens``; ``max_seqs``: ``max_num_seqs``;
    ``chunked``: chunked prefill; ``prefix_caching``: blocks cached for reuse;
    ``no_evict``: TensorRT-LLM's ``GUARANTEED_NO_EVICT`` admission instead of vLLM's."""

    def __init__(
        self, total_blocks: int, block_size: int, budget: int, max_seqs: int, chunked: bool = True,
        prefix_caching: bool = True, no_evict: bool = False,
    ):  # fmt: skip
        self.total_blocks, self.free = total_blocks, total_blocks  # free: cached prefixes unused count
        self.prefixes = PrefixCache(block_size) if prefix_caching else None
        # vLLM's free queue as runs [blocks, the preempted request whose cached blocks they
        # are, or None]; with the unused prefixes' blocks it makes up ``free``
        self.queue: deque[list] = deque([[total_blocks, None]])
        self.block_size, self.budget, self.max_seqs, self.chunked = block_size, budget, max_seqs, chunked
        self.no_evict = no_evict
        self.waiting: deque[Sequence] = deque()
        self.decoders = _Decoders(block_size)
        self.prefilling: list[Sequence] = []  # running, in their prompt, after the decoders
        self.step = 0
        self.finished: list[Sequence] = []
        self.preemptions = 0
        self.reused_blocks = 0  # blocks preempted requests found still cached
        self._scheduled: list[tuple[Sequence, int]] = []
        self._decoding = 0

    @property
    def running(self) -> int:
        return len(self.decoders.members) + len(self.prefilling)

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running)

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    # -- scheduling --------------------------------------------------------------------
    def schedule(self, now_ns: int) -> StepWork:
        """Choose the next step's work at ``now_ns`` (module docstring)."""
        budget, preempted = self.budget, False
        dec = self.decoders
        need = 0 if self.no_evict else dec.crossing(self.step)  # no_evict: blocks held already
        if not self._take(need):
            self._preempt_decoders(now_ns)
            preempted = True
        self._decoding = len(dec.members)
        budget -= self._decoding
        self._scheduled = []
        if self.prefilling and budget > 0:
            seq = self.prefilling[0]
            new = min(seq.request.prompt_tokens + seq.produced - seq.cached, budget)
            if self._allocate(seq, new):
                self._scheduled.append((seq, new))
                budget -= new
            else:
                self.prefilling.pop()
                self._preempt(seq, now_ns)
                preempted = True
        if not preempted:
            self._admit(budget, now_ns)
        return StepWork(
            [(new, seq.cached) for seq, new in self._scheduled],
            self._decoding,
            dec.context + self._decoding,
            self._decoding + sum(1 for seq, new in self._scheduled if self._samples(seq, new)),
        )

    def _admit(self, budget: int, now_ns: int) -> None:
        while self.waiting and budget > 0 and self.running < self.max_seqs:
            seq = self.waiting[0]
            pinned = own = 0
            if seq.cached == 0 and self.prefixes is not None:
                seq.blocks, unused = self.prefixes.pin(seq)
                self.free -= unused
                own = self._touch_kept(seq)
                seq.cached = pinned = seq.blocks * self.block_size
            new = seq.request.prompt_tokens + seq.produced - seq.cached
            whole = seq.request.prompt_tokens + seq.request.output_tokens - seq.cached
            if (not self.chunked and new > budget) or not self._allocate(
                seq, whole if self.no_evict else min(new, budget)
            ):
                if own:
                    self._untouch_kept(seq, own)
                if pinned:  # give the prefix back; a decode side's arrived KV stays cached
                    self._release(seq)
                    seq.cached = 0
                break
            if own:
                seq.kept, seq.kept_run = 0, None
                self.reused_blocks += own
            if self.no_evict:
                seq.reserved = seq.blocks
            new = min(new, budget)
            self.waiting.popleft()
            self.prefilling.append(seq)
            if seq.first_scheduled_ns < 0:
                seq.first_scheduled_ns = now_ns
            self._scheduled.append((seq, new))
            budget -= new

    def _allocate(self, seq: Sequence, new: int) -> bool:
        more = max(self._blocks_for(seq.cached + new) - seq.blocks, 0)  # no_evict: held already
        if not self._take(more):
            return False
        seq.blocks += more
        return True

    def _take(self, blocks: int) -> bool:
        """Take ``blocks`` free blocks from the free queue's head (evicting the cached
        blocks there, then unused cached prefixes as needed); False, taking none, when
        fewer are free."""
        if blocks > self.free:
            return False
        if self.prefixes is not None:
            evicted = self.prefixes.evict(blocks, self.free)
            if evicted:
                self.queue.appendleft([evicted, None])
        self.free -= blocks
        queue = self.queue
        while blocks:
            run = queue[0]
            used = min(run[0], blocks)
            run[0] -= used
            blocks -= used
            if run[1] is not None:  # its last blocks first: the cached ones left lead the run
                run[1].kept = min(run[1].kept, run[0])
            if not run[0]:
                queue.popleft()
        return True

    def _release(self, seq: Sequence, cached_by: Sequence | None = None) -> list | None:
        """Give back ``seq``'s blocks: its own to the free queue's tail (``cached_by``: the
        preempted request whose cached blocks they are), its prefix's to the cache; the
        run ``cached_by``'s blocks joined (None without it)."""
        own, run = seq.blocks - seq.shared, None
        if own:
            self.free += own
            tail = self.queue[-1] if self.queue else None
            if cached_by is None and tail is not None and tail[1] is None:
                tail[0] += own
            else:
                run = [own, cached_by]
                self.queue.append(run)
        if self.prefixes is not None:
            self.free += self.prefixes.unpin(seq)
        seq.blocks = 0
        return run if cached_by is not None else None

    def _touch_kept(self, seq: Sequence) -> int:
        """The blocks ``seq``, admitted again after a preemption, finds still cached after
        the prefix blocks it holds (at most its tokens less one, in whole blocks): taken
        from their run, not from the queue's head."""
        run = seq.kept_run
        if run is None or seq.blocks != seq.kept_after:
            return 0
        usable = (seq.request.prompt_tokens + seq.produced - 1) // self.block_size - seq.blocks
        hit = min(seq.kept, usable)
        if hit <= 0:
            return 0
        run[0] -= hit
        run[1] = None  # its other blocks are nobody's cache now
        self.free -= hit
        seq.blocks += hit
        return hit

    def _untouch_kept(self, seq: Sequence, hit: int) -> None:
        """Undo :meth:`_touch_kept` for ``seq``, not admitted after all: its ``hit`` blocks
        back in their run, still cached for it."""
        run = seq.kept_run
        assert run is not None
        run[0] += hit
        run[1] = seq
        self.free += hit
        seq.blocks -= hit

    def _samples(self, seq: Sequence, new: int) -> bool:
        return seq.cached + new >= seq.request.prompt_tokens + seq.produced

    def _preempt(self, seq: Sequence, now_ns: int) -> None:
        """Free ``seq``'s blocks and queue it first to recompute (vLLM's preemption); a
        decoding request's last token came at the end of the step before, ``now_ns``."""
        if seq.decode_step >= 0:
            self.decoders.remove(seq, self.step)
            seq.last_token_ns = now_ns
        caching = self.prefixes is not None
        seq.kept = seq.cached // self.block_size - seq.shared if caching else 0
        seq.kept_after = seq.shared
        seq.kept_run = self._release(seq, seq if seq.kept > 0 else None)
        seq.cached = 0
        seq.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(seq)

    def _preempt_decoders(self, now_ns: int) -> None:
        """vLLM's running pass when the decoders' new blocks do not all fit: in admission
        order each decoder that needs a block takes one, preempting from the back (the
        request in its prompt first) while none is free; the pass stops when the decoder
        itself goes (every one after it went before)."""
        dec, step = self.decoders, self.step
        for seq in list(dec.members.values()):
            if seq.decode_step < 0:
                return  # preempted from the back, as every one after it
            if dec.cached_at(seq, step) % self.block_size:
                continue
            while not self._take(1):
                victim = (
                    self.prefilling.pop() if self.prefilling else dec.members[next(reversed(dec.members))]
                )
                self._preempt(victim, now_ns)
                if victim is seq:
                    return

    # -- a step's end ------------------------------------------------------------------
    def complete(self, end_ns: int, step_ns: int) -> list[tuple[int, int]]:
        """Apply the scheduled step ending at ``end_ns`` that took ``step_ns``; returns the
        inter-token gaps it closed as ``(gap ns, tokens)``."""
        dec, step = self.decoders, self.step
        gaps = [(step_ns, self._decoding)] if self._decoding else []
        dec.context += self._decoding
        for seq in dec.due(step):
            dec.remove(seq, step + 1)
            self._finish(seq, end_ns)
        for seq, new in self._scheduled:
            seq.cached += new
            if self.prefixes is not None:
                self.prefixes.keep(seq)
            if seq.cached < seq.request.prompt_tokens + seq.produced:
                continue  # a partial prompt chunk
            self.prefilling.remove(seq)
            if seq.first_token_ns < 0:
                seq.first_token_ns = end_ns
            elif seq.last_token_ns >= 0:
                gaps.append((end_ns - seq.last_token_ns, 1))
            seq.last_token_ns = end_ns
            seq.produced += 1
            if seq.produced >= seq.request.output_tokens:
                self._finish(seq, end_ns)
            else:
                dec.add(seq, step + 1)
        self.step += 1
        return gaps

    def _finish(self, seq: Sequence, end_ns: int) -> None:
        seq.finish_ns = end_ns
        self._release(seq)
        self.finished.append(seq)
