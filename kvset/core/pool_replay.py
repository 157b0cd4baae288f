"""Whose blocks the pool holds and who pushed whom out: one LRU replay of the stream at the pool's size.

The stack distances tell each principal's hits at every capacity, but not who holds the cache nor
whose access evicted a block: those depend on one capacity, so the stream is replayed once through
an LRU of that many blocks (a compiled doubly-linked list over the stream's blocks, numbered
densely). A block is held by the principal whose access touched it last, from that access until
the next access to it or its eviction; a principal's share of the cache is the block-steps it
held over all of them (time counted in accesses, so a burst weighs what it holds per access). An
eviction is the access that pushed the least recent block out; when that block is next accessed
(a miss: it is gone) the pair (evicting access, missing access) is one block displaced.

This is a model of the pool (an exact LRU of its size, the stream as kvset read it), not the
engine's own resident set: the figure says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from kvset.types import PRINCIPAL_LEVELS

AGES_AT_ONCE = 1 << 18  # evictions whose ages are taken at once


@njit(cache=True, nogil=True)
def _replay(
    blocks: np.ndarray,
    n_blocks: int,
    capacity: int,
    held: np.ndarray,
    pair_evictor: np.ndarray,
    pair_victim: np.ndarray,
    evict_step: np.ndarray,
    evict_last: np.ndarray,
    prev: np.ndarray,
    nxt: np.ndarray,
    last: np.ndarray,
    evicted_by: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - compiled
    # per block, all -1 on entry: the list's links, the step of its last access (-1: not resident)
    # and the step that pushed it out (until it is missed)
    n = len(blocks)
    head = -1  # most recent
    tail = -1  # least recent: the next to go
    size = 0
    pairs = 0
    evictions = 0
    for i in range(n):
        b = blocks[i]
        if last[b] >= 0:
            held[last[b]] = i - last[b]
            if b != head:  # unlink, then push at the head
                p, q = prev[b], nxt[b]
                nxt[p] = q
                if q >= 0:
                    prev[q] = p
                else:
                    tail = p
                prev[b] = -1
                nxt[b] = head
                prev[head] = b
                head = b
        else:
            if evicted_by[b] >= 0:
                pair_evictor[pairs] = evicted_by[b]
                pair_victim[pairs] = i
                pairs += 1
                evicted_by[b] = -1
            prev[b] = -1
            nxt[b] = head
            if head >= 0:
                prev[head] = b
            head = b
            if tail < 0:
                tail = b
            size += 1
            if size > capacity:
                v = tail
                tail = prev[v]
                nxt[tail] = -1
                prev[v] = -1
                size -= 1
                held[last[v]] = i - last[v]
                evict_step[evictions] = i
                evict_last[evictions] = last[v]
                evictions += 1
                evicted_by[v] = i
                last[v] = -1
        last[b] = i
    for b in range(n_blocks):  # still resident at the end: held until then
        if last[b] >= 0:
            held[last[b]] = n - last[b]
    return pairs, evictions


@dataclass(frozen=True, eq=False)
class PoolReplay:
    """An LRU of `capacity` blocks replayed over the stream. `held`: per access (in the replay's
    order), the steps its block stayed resident as its own. `displaced`: (evicting access, missing
    access) per block pushed out and then missed. `eviction_ages`: seconds each evicted block had
    stayed since its last use (the times of the requests of the two accesses)."""

    capacity: int
    held: np.ndarray
    displaced: tuple[np.ndarray, np.ndarray]
    eviction_ages: np.ndarray


@dataclass(eq=False)
class PoolTrace:
    """The stream as the pool replay needs it, in the analyzer's order: each access's block (a dense
    number) and its principal ids at the levels it holds; each request's first access and its time."""

    blocks: np.ndarray  # int32 (int64 past 2**31 blocks)
    n_blocks: int
    principals: np.ndarray  # int32 (accesses, len(levels))
    request_starts: np.ndarray  # int64, ascending
    request_times: np.ndarray  # float64 seconds (nan: the stream gave none)
    levels: tuple[str, ...] = PRINCIPAL_LEVELS  # the principals' columns

    @classmethod
    def of(
        cls,
        keys: np.ndarray,
        principals: np.ndarray,
        times: np.ndarray,
        starts: np.ndarray,
        levels: tuple[str, ...] = PRINCIPAL_LEVELS,
    ) -> PoolTrace:
        uniq, dense = np.unique(keys, return_inverse=True)
        del keys
        small = np.int32 if len(uniq) < 2**31 and len(dense) < 2**31 else np.int64
        return cls(
            dense.astype(small).reshape(-1),
            len(uniq),
            np.asarray(principals, dtype=np.int32),
            np.asarray(starts, dtype=np.int64),
            np.asarray(times, dtype=np.float64),
            levels,
        )

    def __len__(self) -> int:
        return len(self.blocks)

    def column(self, level: str) -> np.ndarray:
        """Each access's principal id at this level (0, unknown, at a level it does not hold)."""
        if level not in self.levels:
            return np.zeros(len(self.blocks), dtype=np.int32)
        return self.principals[:, self.levels.index(level)]

    def times_of(self, steps: np.ndarray) -> np.ndarray:
        """The time of each access (its request's)."""
        request = np.searchsorted(self.request_starts, steps, side="right") - 1
        return self.request_times[np.maximum(request, 0)]

    def replay(self, capacity: int) -> PoolReplay:
        """The LRU of `capacity` blocks over the stream, replayed at each call: what is read from it
        is kept by its reader (kvset.figures.principal_pool, per trace), and its arrays, 10 to 20
        bytes an access, are let go with it rather than held until the next read."""
        if capacity < 1:
            raise ValueError(f"a pool of {capacity} blocks holds nothing")
        n = len(self.blocks)
        step = (
            self.blocks.dtype
        )  # access indices fit the blocks' type: there are no more blocks than accesses
        held = np.zeros(n, dtype=step)
        evictor, victim = np.empty(n, dtype=step), np.empty(n, dtype=step)
        evicted_at, last_use = np.empty(n, dtype=step), np.empty(n, dtype=step)
        links = [np.full(self.n_blocks, -1, dtype=step) for _ in range(4)]
        pairs, evictions = _replay(
            self.blocks, self.n_blocks, int(capacity), held, evictor, victim, evicted_at, last_use, *links
        )
        del links
        ages = np.empty(evictions)
        for lo in range(0, evictions, AGES_AT_ONCE):  # a slice at a time: 8 bytes an eviction, not 40
            at = slice(lo, min(lo + AGES_AT_ONCE, evictions))
            ages[at] = self.times_of(evicted_at[at]) - self.times_of(last_use[at])
        return PoolReplay(int(capacity), held, (evictor[:pairs].copy(), victim[:pairs].copy()), ages)

    def turn_gaps(self, level: str = "session") -> tuple[np.ndarray, np.ndarray]:
        """(principal ids, median gap in seconds between one request and the next) of every named
        principal of this level with two requests or more."""
        if not len(self.request_starts):
            return np.zeros(0, dtype=np.int32), np.zeros(0)
        who = self.column(level)[self.request_starts]
        at = self.request_times
        named = who > 0
        who, at = who[named], at[named]
        order = np.lexsort((at, who))
        who, at = who[order], at[order]
        same = who[1:] == who[:-1]
        gap_of, gaps = who[1:][same], np.diff(at)[same]
        if not len(gaps):
            return np.zeros(0, dtype=np.int32), np.zeros(0)
        order = np.lexsort((gaps, gap_of))
        gap_of, gaps = gap_of[order], gaps[order]
        ids, first, counts = np.unique(gap_of, return_index=True, return_counts=True)
        lo = first + (counts - 1) // 2
        hi = first + counts // 2
        return ids, (gaps[lo] + gaps[hi]) / 2
