"""The live-slot set of the exact kernel: which access slots hold a tracked block's latest access.

Live slots are bits in uint64 words, grouped in superblocks of 8 words (512 slots, one cache line).
A Fenwick tree counts live bits per superblock, so it is 512x smaller than the slot array and stays
in L1; inside a superblock the few words before a slot are popcounted. All inlined into the kernels.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core import fenwick
from kvset.core.intrinsics import popcount
from kvset.core.kernel_types import Int

SB_SHIFT = 9  # slots per superblock = 2**9
WORDS_PER_SB = 8


@njit(inline="always")
def live_prefix(live: np.ndarray, fen: np.ndarray, p: Int) -> Int:
    """Live slots in [0, p]."""
    w = p >> 6
    s = fenwick.prefix(fen, (p >> SB_SHIFT) - 1)
    for k in range(w & ~(WORDS_PER_SB - 1), w):
        s += popcount(live[k])
    m = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(63 - (p & 63))
    return s + popcount(live[w] & m)


@njit(inline="always")
def live_between(live: np.ndarray, lo: Int, hi: Int) -> Int:
    """Live slots in (lo, hi], lo < hi."""
    wl, wh = lo >> 6, hi >> 6
    above_lo = ~(np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(63 - (lo & 63)))  # bits > lo in its word
    upto_hi = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(63 - (hi & 63))  # bits <= hi in its word
    if wl == wh:
        return popcount(live[wl] & above_lo & upto_hi)
    s = popcount(live[wl] & above_lo) + popcount(live[wh] & upto_hi)
    for w in range(wl + 1, wh):
        s += popcount(live[w])
    return s


@njit(inline="always")
def live_test(live: np.ndarray, p: Int) -> bool:
    alive: bool = (live[p >> 6] >> np.uint64(p & 63)) & np.uint64(1) != 0
    return alive


@njit(inline="always")
def live_clear(live: np.ndarray, fen: np.ndarray, p: Int) -> None:
    live[p >> 6] &= ~(np.uint64(1) << np.uint64(p & 63))
    fenwick.add(fen, p >> SB_SHIFT, -1)


@njit(inline="always")
def live_build(live: np.ndarray, fen: np.ndarray, j: Int) -> None:
    """Slots 0..j-1 live, all others free; Fenwick rebuilt in linear time."""
    live[:] = 0
    full = j >> 6
    live[:full] = np.uint64(0xFFFFFFFFFFFFFFFF)
    if j & 63:
        live[full] = (np.uint64(1) << np.uint64(j & 63)) - np.uint64(1)
    n = fen.shape[0] - 1
    fen[:] = 0
    for i in range(1, n + 1):
        c: Int = 0
        for k in range((i - 1) * WORDS_PER_SB, min(i * WORDS_PER_SB, live.shape[0])):
            c += popcount(live[k])
        fen[i] += c
        q = i + (i & (-i))
        if q <= n:
            fen[q] += fen[i]


@njit(inline="always")
def release_slot(live: np.ndarray, fen: np.ndarray, pend: np.uint64, now: Int, p: Int) -> np.uint64:
    """Free slot p; a bit still pending in the newest word never reached the tree. Returns pend."""
    bit = np.uint64(1) << np.uint64(p & 63)
    if (p >> 6) == (now >> 6) and (pend & bit):
        live[p >> 6] &= ~bit
        return pend & ~bit
    live_clear(live, fen, p)
    return pend


@njit(inline="always")
def lowest_bit(x: np.uint64) -> Int:
    """Index of the lowest set bit of x (x != 0)."""
    return popcount((x & (~x + np.uint64(1))) - np.uint64(1))
