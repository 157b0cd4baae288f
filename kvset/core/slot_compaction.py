"""Renumbering the exact kernel's access slots: in place when they run out (compact: from the first
free slot on, or the whole table at once), or into larger state when the analyzer grows it."""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core.hash_table import EMPTY, table_find
from kvset.core.intrinsics import popcount
from kvset.core.kernel_layout import M_COMPACTIONS, M_NOW, M_OLDEST
from kvset.core.kernel_types import Int
from kvset.core.live_slots import live_build, live_test, lowest_bit


@njit(inline="always")
def _compacted(live: np.ndarray, fen: np.ndarray, meta: np.ndarray, tracked: Int) -> None:
    """Slots 0..tracked-1 live, the next free one after them: the end of either compaction."""
    live_build(live, fen, tracked)
    meta[M_NOW] = tracked
    meta[M_OLDEST] = 0
    meta[M_COMPACTIONS] += 1


# compact() looks the blocks above the first free slot up one by one (a cache miss each) while
# they are fewer than the table's cells and the slots over LOOKUP_COST: else compact_by_table
LOOKUP_COST = 8


@njit(nogil=True, cache=True)
def compact(
    table: np.ndarray,
    mask: Int,
    slot_keys: np.ndarray,
    live: np.ndarray,
    fen: np.ndarray,
    meta: np.ndarray,
    tracked: Int,
) -> None:
    """Renumber live slots to 0..tracked-1 in recency order and rebuild the Fenwick tree.

    The slots below the first free one are live and keep their numbers, and so do their blocks'
    table entries (a run leaves a stale entry only at a freed slot below the block's live one). On
    a re-read prefix that is most of the stack: what was re-read since the last compaction lies
    near the top, above blocks no request reads again. So only the blocks above it move, each
    found in the table by its key, while they are few (compact_slots); else every cell of the table
    is renumbered in one pass (compact_by_table)."""
    now = meta[M_NOW]
    first = first_free(live, now)
    if LOOKUP_COST * (tracked - first) < mask + 1 + now:
        compact_slots(table, mask, slot_keys, live, fen, meta, first)
    else:
        compact_by_table(table, mask, slot_keys, live, fen, meta)


@njit(inline="always")
def first_free(live: np.ndarray, now: Int) -> Int:
    """The lowest free slot (now if none is free below it)."""
    full = np.uint64(0xFFFFFFFFFFFFFFFF)
    w = 0
    while (w << 6) < now and live[w] == full:
        w += 1
    if (w << 6) >= now:
        return now
    return min(now, (w << 6) + lowest_bit(~live[w]))


@njit(nogil=True, cache=True)
def compact_slots(
    table: np.ndarray,
    mask: Int,
    slot_keys: np.ndarray,
    live: np.ndarray,
    fen: np.ndarray,
    meta: np.ndarray,
    first: Int,
) -> None:
    """Renumber the live slots from `first` on (every slot below it live) to first, first+1, ...,
    each block's table entry found by its key."""
    now = meta[M_NOW]
    j = first
    for s in range(max(first, meta[M_OLDEST]), now):  # none live below the oldest
        if live_test(live, s):
            key = slot_keys[s]
            slot_keys[j] = key
            h = table_find(table, mask, key)
            table[2 * h + 1] = np.uint64(j)
            j += 1
    _compacted(live, fen, meta, j)


@njit(nogil=True, cache=True)
def compact_by_table(
    table: np.ndarray, mask: Int, slot_keys: np.ndarray, live: np.ndarray, fen: np.ndarray, meta: np.ndarray
) -> None:
    """All live slots renumbered, the table in one pass (state that runs have moved blocks in: the
    table may say a freed slot).

    Instead of one hash lookup per tracked block (a cache miss each), three sequential passes:
    freed slots that a run moved on are made to say their block's live slot directly (from the
    top down, so a chain of moves collapses in one pass), the table's cells are renumbered in
    place by the rank of that live slot, and the keys move down."""
    now = meta[M_NOW]
    unow = np.uint64(now)
    for s in range(now - 1, -1, -1):
        if not live_test(live, s):
            t = slot_keys[s]
            # a freed slot a run moved on says a later slot; others say a key, and no table entry
            # leads to them, so whatever is written there is never read
            if t > np.uint64(s) and t < unow and not live_test(live, np.int64(t)):
                slot_keys[s] = slot_keys[np.int64(t)]
    nwords = (now + 63) >> 6
    rank = np.empty(nwords + 1, dtype=np.int64)  # live slots in the words before
    rank[0] = 0
    for w in range(nwords):
        rank[w + 1] = rank[w] + popcount(live[w])
    for c in range(mask + 1):
        v = table[2 * c + 1]
        if v != EMPTY:
            q = np.int64(v)
            if not live_test(live, q):
                q = np.int64(slot_keys[q])
            below = (np.uint64(1) << np.uint64(q & 63)) - np.uint64(1)
            table[2 * c + 1] = np.uint64(rank[q >> 6] + popcount(live[q >> 6] & below))
    j = 0
    for s in range(meta[M_OLDEST], now):
        if live_test(live, s):
            slot_keys[j] = slot_keys[s]
            j += 1
    _compacted(live, fen, meta, j)


@njit(nogil=True, cache=True)
def rebuild_into(
    old_slot_keys: np.ndarray,
    old_live: np.ndarray,
    old_meta: np.ndarray,
    table: np.ndarray,
    mask: Int,
    slot_keys: np.ndarray,
    live: np.ndarray,
    fen: np.ndarray,
    meta: np.ndarray,
) -> None:
    """Move the tracked blocks, in recency order, into freshly allocated (larger) state."""
    j = 0
    for s in range(old_meta[M_OLDEST], old_meta[M_NOW]):
        if live_test(old_live, s):
            key = old_slot_keys[s]
            h = -table_find(table, mask, key) - 1
            table[2 * h] = key
            table[2 * h + 1] = np.uint64(j)
            slot_keys[j] = key
            j += 1
    live_build(live, fen, j)
    meta[:] = old_meta
    meta[M_NOW] = j
    meta[M_OLDEST] = 0
