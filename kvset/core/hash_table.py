"""The kernels' hash tables: open addressing with linear probing over uint64 keys.

table[2h] is a cell's key, table[2h + 1] its value, EMPTY for an empty cell; a key's home cell is
its mixed hash masked to the table's size (a power of two). Deletion shifts back the cells after
the hole, so probing never meets a tombstone.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core.kernel_types import Int

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # slot value of an empty hash-table cell


@njit(inline="always")
def mix(x: np.uint64) -> np.uint64:
    # splitmix64 finalizer: spreads dense ids and structured hashes alike
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(inline="always")
def table_find(table: np.ndarray, mask: Int, key: np.uint64) -> Int:
    """Cell index holding key, or -(free cell index) - 1."""
    return table_probe(table, mask, key, np.int64(mix(key) & np.uint64(mask)))


@njit(inline="always")
def table_probe(table: np.ndarray, mask: Int, key: np.uint64, h: Int) -> Int:
    """table_find from the key's home cell h."""
    while True:
        v = table[2 * h + 1]
        if v == EMPTY:
            return -h - 1
        if table[2 * h] == key:
            return h
        h = (h + 1) & mask


@njit(inline="always")
def table_delete(table: np.ndarray, mask: Int, h: Int) -> None:
    # Backward-shift deletion keeps linear probing tombstone-free.
    j = h
    while True:
        j = (j + 1) & mask
        if table[2 * j + 1] == EMPTY:
            break
        home = np.int64(mix(table[2 * j]) & np.uint64(mask))
        # move j into the hole h if its home is not cyclically in (h, j]
        if (j > h and (home <= h or home > j)) or (j < h and (home <= h and home > j)):
            table[2 * h] = table[2 * j]
            table[2 * h + 1] = table[2 * j + 1]
            h = j
    table[2 * h + 1] = EMPTY


# Keys-only tables (the free queue's, the engine's resident set): a uint64 key array beside a byte
# array saying which cells are used, so that every uint64 value can be a key; payload arrays, if
# any, are parallel to the keys.
@njit(inline="always")
def key_find(keys: np.ndarray, used: np.ndarray, key: np.uint64) -> Int:
    """Cell index holding key in a keys-only table (a power-of-two size), or -(free cell index) - 1."""
    mask = np.uint64(len(keys) - 1)
    j = np.int64(mix(key) & mask)
    while used[j]:
        if keys[j] == key:
            return j
        j = np.int64(np.uint64(j + 1) & mask)
    return -1 - j


@njit(inline="always")
def key_next_shift(keys: np.ndarray, used: np.ndarray, hole: Int) -> Int:
    """Backward-shift deletion in a keys-only table, one step: the cell after `hole` whose entry must
    move into it (the hole lies on that entry's probe path), or -1 when the run ends first. The caller
    moves the key and its payload, marks the cell free and goes on from it: no tombstones."""
    imask = np.int64(len(keys) - 1)
    mask = np.uint64(len(keys) - 1)
    probe = (hole + 1) & imask
    while used[probe]:
        home = np.int64(mix(keys[probe]) & mask)
        if ((hole - home) & imask) < ((probe - home) & imask):
            return probe
        probe = (probe + 1) & imask
    return -1
