"""The sampled analyzer's tracked blocks: their slots, the Fenwick tree of the slot weights, and the
passes over them that are not per access (compaction, growth into larger arrays, dropping blocks
when a fixed-size sample lowers its rate).

slot[s] = (weight, W, g, band) for the live slot of a tracked block (see kvset.core.sampling_kernel);
weight 0 is a free slot. The hash table is the exact kernel's (kvset.core.hash_table).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core import hash_table as HT
from kvset.core.kernel_types import Int
from kvset.core.sampling_filter import priority_hash

# slot[] columns (int64)
W_WEIGHT = 0
W_BEFORE = 1
W_INDEX = 2
W_BAND = 3

# The Fenwick tree of slot weights is kept valid for the nodes up to the newest slot only
# (kvset.core.fenwick.append and remove_below); rebuild_fenwick() makes it whole.


@njit(nogil=True, cache=True)
def rebuild_fenwick(slot: np.ndarray, fen: np.ndarray, now: Int) -> Int:
    """Fenwick tree of the slot weights in linear time; returns their sum."""
    fen[:] = 0
    n = fen.shape[0] - 1
    total = 0
    for i in range(1, n + 1):
        if i - 1 < now:
            fen[i] += slot[i - 1, W_WEIGHT]
            total += slot[i - 1, W_WEIGHT]
        q = i + (i & (-i))
        if q <= n:
            fen[q] += fen[i]
    return total


@njit(nogil=True, cache=True)
def move_slots(
    table: np.ndarray,
    mask: Int,
    slot_key: np.ndarray,
    slot: np.ndarray,
    now: Int,
    new_table: np.ndarray,
    new_mask: Int,
    new_key: np.ndarray,
    new_slot: np.ndarray,
) -> Int:
    """Copy the live slots, in recency order, to slots 0..tracked-1 of new, larger arrays and point
    the new hash table at them (growth; compaction in place is compact_slots)."""
    j = 0
    for s in range(now):
        if slot[s, W_WEIGHT] > 0:
            key = slot_key[s]
            new_key[j] = key
            for c in range(4):
                new_slot[j, c] = slot[s, c]
            h = HT.table_find(new_table, new_mask, key)
            if h < 0:
                h = -h - 1
                new_table[2 * h] = key
            new_table[2 * h + 1] = np.uint64(j)
            j += 1
    for s in range(j, now):
        new_slot[s, W_WEIGHT] = 0
    return j


@njit(nogil=True, cache=True)
def compact_slots(
    table: np.ndarray, mask: Int, slot_key: np.ndarray, slot: np.ndarray, fen: np.ndarray, now: Int
) -> Int:
    """move_slots in place, without a table lookup per block: the live slots move down in one pass
    (fen, rebuilt after, holds each one's new index meanwhile), then one pass over the table
    renumbers its cells. Returns the live slots. Both passes are free of branches (every slot is
    copied down, and only a live one advances the target; indices are unsigned): live and free
    slots alternate unpredictably, and without the branches a compaction takes 22 % less."""
    j = 0
    for s in range(now):
        live = slot[s, W_WEIGHT] > 0
        fen[np.uint64(s)] = j
        slot_key[np.uint64(j)] = slot_key[np.uint64(s)]
        for c in range(4):
            slot[np.uint64(j), c] = slot[np.uint64(s), c]
        j += live
    last = np.uint64(max(0, now - 1))
    for c in range(mask + 1):
        v = table[np.uint64(2 * c + 1)]
        moved = np.uint64(fen[min(v, last)])
        table[np.uint64(2 * c + 1)] = v if v == HT.EMPTY else moved
    for s in range(j, now):
        slot[s, W_WEIGHT] = 0
    return j


@njit(nogil=True, cache=True)
def drop_above(
    limit: np.uint64,
    salt: np.uint64,
    shifts: np.ndarray,
    table: np.ndarray,
    mask: Int,
    slot_key: np.ndarray,
    slot: np.ndarray,
    now: Int,
) -> Int:
    """Fixed size: forget the tracked blocks whose priority exceeds the (lowered) limit.

    Removes them from the hash table and frees their slots; the caller rebuilds the Fenwick tree
    with the new rates. Returns the number of blocks dropped."""
    dropped = 0
    for s in range(now):
        if slot[s, W_WEIGHT] > 0:
            key = slot_key[s]
            if (priority_hash(key, salt) >> np.uint64(shifts[slot[s, W_BAND]])) > limit:
                HT.table_delete(table, mask, HT.table_find(table, mask, key))
                slot[s, W_WEIGHT] = 0
                dropped += 1
    return dropped


@njit(nogil=True, cache=True)
def live_priorities(
    salt: np.uint64, shifts: np.ndarray, slot_key: np.ndarray, slot: np.ndarray, now: Int
) -> np.ndarray:
    """Priority of every tracked block (the value the limit is compared with)."""
    out = np.empty(now, dtype=np.uint64)
    j = 0
    for s in range(now):
        if slot[s, W_WEIGHT] > 0:
            out[j] = priority_hash(slot_key[s], salt) >> np.uint64(shifts[slot[s, W_BAND]])
            j += 1
    return out[:j]
