"""Shared prompt prefixes kept in one replica's KV cache (vLLM's automatic prefix caching).

vLLM v1 hashes every full block of a prompt, chained from the first, and a new request
reuses the longest run of cached blocks its prompt starts with, capped so that at least
one token is computed (``kv_cache_manager.py``: the hit is at most ``num_tokens - 1``, in
whole blocks). Blocks no running request uses stay cached and count as free; they are
evicted, least recently used first, when an allocation needs them (vLLM 0.11, as read for
this model).

astra keeps the prefixes that requests declare (``prefix_id``, its first
``prefix_tokens`` tokens): once a request has computed the prefix's full blocks they are
cached under its id; a later request with that id on the same replica starts with them
(its hit: the prefix's blocks, at most its prompt and earlier output less one token, in
whole blocks). A cached prefix is held once however many requests use it; at its last
user's end its blocks become evictable. A request's own blocks beyond the prefix are
cached for it alone after a preemption (:mod:`.scheduler`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from astra_core.serve.scheduler import Sequence

__all__ = ["PrefixCache"]


@dataclass
class _Prefix:
    blocks: int
    users: int = 0


class PrefixCache:
    """The cached prefixes of one replica whose blocks are ``block_size`` tokens;
    ``evictable``: blocks of prefixes no request uses (counted as free by the replica)."""

    def __init__(self, block_size: int):
        self.block_size = block_size
        self.entries: OrderedDict[str, _Prefix] = OrderedDict()
        self.evictable = 0
        self.hits = 0

    def pin(self, seq: Sequence) -> tuple[int, int]:
        """(the blocks ``seq``, which has cached nothing yet, starts with from its cached
        prefix, now held for it; those of them that were free, unused until now); (0, 0)
        on a miss."""
        key = seq.request.prefix_id
        entry = self.entries.get(key) if key is not None else None
        if entry is None:
            return 0, 0
        usable = (seq.request.prompt_tokens + seq.produced - 1) // self.block_size
        blocks = min(entry.blocks, usable)
        if blocks <= 0:
            return 0, 0
        self.entries.move_to_end(key)  # type: ignore[arg-type]
        unused = entry.blocks if entry.users == 0 else 0
        self.evictable -= unused
        entry.users += 1
        seq.shared = blocks
        self.hits += 1
        return blocks, unused

    def unpin(self, seq: Sequence) -> int:
        """``seq`` no longer uses its prefix's blocks (it finished or was preempted); the
        blocks that became free (the prefix's, when it was the last user)."""
        if not seq.shared:
            return 0
        entry = self.entries[seq.request.prefix_id]  # type: ignore[index]
        entry.users -= 1
        seq.shared = 0
        if entry.users:
            return 0
        self.evictable += entry.blocks
        return entry.blocks

    def keep(self, seq: Sequence) -> None:
        """Cache ``seq``'s prefix once its full blocks are computed, if no other is."""
        key, tokens = seq.request.prefix_id, seq.request.prefix_tokens
        blocks = tokens // self.block_size
        if (
            key is None
            or seq.shared
            or blocks == 0
            or seq.cached < blocks * self.block_size
            or key in self.entries
        ):
            return
        self.entries[key] = _Prefix(blocks, users=1)
        seq.shared = blocks

    def evict(self, needed: int, free: int) -> int:
        """Evict unused prefixes, least recently used first, until ``free`` blocks less the
        evictable ones cover ``needed`` (or none is left to evict); the blocks evicted."""
        evicted = 0
        for key in list(self.entries):
            if free - self.evictable >= needed:
                break
            entry = self.entries[key]
            if entry.users == 0:
                self.evictable -= entry.blocks
                evicted += entry.blocks
                del self.entries[key]
        return evicted
