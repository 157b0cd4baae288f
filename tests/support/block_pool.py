"""A naive copy of vLLM's v1 BlockPool policy, for tests: reference counts, a free queue, eviction.

What vLLM 0.33 does (vllm/v1/core/block_pool.py, kv_cache_manager.py, single_type_kv_cache_manager.py):
- the pool has `usable` blocks, all in the free queue at first (vLLM keeps one more, its null block);
- a lookup finds the longest cached prefix of a request's block hashes;
- admitting a request touches its hit blocks (taken out of the free queue, reference count + 1) and
  takes each new block from the head of the free queue; a cached block taken there is evicted
  (a BlockRemoved event); it is refused when the free queue is too short for both;
- a finished (or preempted) request frees its blocks last to first: a block whose count reaches zero
  goes to the tail of the free queue (a block without a hash to the head: reused first).

Plain Python (an OrderedDict as the queue), one block at a time: slow, and obviously what it says.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass
class NaiveBlockPool:
    usable: int
    ref: dict = field(default_factory=dict)  # block id -> reference count (> 0: pinned)
    hash_of: dict = field(default_factory=dict)  # block id -> hash (cached blocks)
    by_hash: dict = field(default_factory=dict)  # hash -> block id
    removed: list = field(default_factory=list)  # hashes evicted since the last take_removed()

    def __post_init__(self) -> None:
        self._ids = itertools.count()
        self.free: OrderedDict = OrderedDict((next(self._ids), None) for _ in range(self.usable))

    @property
    def pinned(self) -> int:
        return len(self.ref)

    def cached(self, h) -> bool:
        return h in self.by_hash

    def lookup(self, hashes) -> int:
        """Blocks of the longest cached prefix."""
        n = 0
        for h in hashes:
            if h not in self.by_hash:
                break
            n += 1
        return n

    def can_admit(self, hits, n_new: int) -> bool:
        evictable = sum(1 for h in hits if self.by_hash[h] not in self.ref)
        return n_new + evictable <= len(self.free)

    def touch(self, h) -> int:
        b = self.by_hash[h]
        if b in self.free:
            del self.free[b]
        self.ref[b] = self.ref.get(b, 0) + 1
        return b

    def allocate(self, h=None) -> int:
        """A new block from the head of the free queue (evicting what it cached), holding hash `h`."""
        b, _ = self.free.popitem(last=False)
        old = self.hash_of.pop(b, None)
        if old is not None:
            del self.by_hash[old]
            self.removed.append(old)
        self.ref[b] = 1
        if h is not None:
            self.cache(b, h)
        return b

    def cache(self, b, h) -> None:
        """Block `b` is full: it holds hash `h` (a second block with a cached hash stays uncached)."""
        if h not in self.by_hash:
            self.hash_of[b] = h
            self.by_hash[h] = b

    def free_blocks(self, blocks) -> None:
        """A request lets go of its blocks, given first to last: freed last to first."""
        for b in reversed(blocks):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                del self.ref[b]
                self.free[b] = None
                if b not in self.hash_of:
                    self.free.move_to_end(b, last=False)

    def take_removed(self) -> list:
        out, self.removed = self.removed, []
        return out
