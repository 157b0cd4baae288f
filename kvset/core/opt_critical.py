"""Belady MIN stack distances from the past alone: a stack of critical times.

MIN with capacity C hits the accesses of a largest set of reuse intervals that C - 1 slots can
hold beside the block just accessed, and taking the intervals by end time, each into the slot
that became free latest but before it starts ("best fit"), is such a set. Write f for a slot's
free time (the time of the last access its interval covers, -1 for a slot never used). For every
capacity at once: there is one stack of times e[0], e[1], ... with e[0] = t - 1 and S_C, the first
C entries, exactly {t - 1} and the free times of capacity C's slots. So an access at t whose block
was last used at p is a hit at C iff S_C holds a time <= p, and its OPT stack distance is one
plus the first depth d whose entry is <= p; the accessed block's own future is never needed.

The update, for every capacity at once: the top becomes t; for C >= d+1 the slot of the
largest free time <= p in S_C takes the interval (its free time becomes t - 1). On the stack:
depth d takes t - 1, its old entry is carried down, and at every deeper depth whose entry is
larger than the carried one and still <= p the two trade places; the entry carried past the
bottom, which is the largest time <= p on the whole stack, is dropped (it is known beforehand,
from a bit set of the times on the stack, so the walk stops at it). A first access only replaces
the top (t - 1 is dropped); an access with no entry <= p takes a new depth at the bottom.

Entries only trade depths (none is inserted or removed in the middle), so the stack is a flat
array with, per 64 depths and per 4,096, bounds on the smallest and largest entry (a lower and an
upper bound, made exact when a walk reads every entry they cover) that let the search for d and
the walk of the carried entry skip whole blocks. Time: the search plus the depths between d and
the dropped entry that the bounds do not skip; memory: 8 bytes a distinct block, 8 an access
for the previous uses and a bit an access for the set of times.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core.intrinsics import ctlz
from kvset.core.kernel_types import Int

BIG = np.int64(1) << 62  # the lower bound of an empty block
SMALL = np.int64(-2)  # the upper bound of an empty block (below every time, -1 included)
BLOCK = 64  # depths per block of bounds
GROUP = 64 * 64  # depths per group of blocks


@njit(nogil=True, cache=True)
def to_previous_uses(uses: np.ndarray) -> None:
    """Next uses (n: never again) into previous uses (-1: a first access), in place.

    From the end: each access's own cell is read and set to -1 before an earlier access, the one
    whose next use it is, overwrites it with that earlier access's index.
    """
    n = uses.shape[0]
    for i in range(n - 1, -1, -1):
        nx = uses[i]
        uses[i] = -1
        if nx < n:
            uses[nx] = i


@njit(nogil=True, cache=True)
def chained_share(nxt: np.ndarray) -> float:
    """Of the accesses whose block is used again, the share whose next use directly follows the
    previous access's: re-read prefixes (the priority stack's runs, kvset.core.opt_runs)."""
    n = nxt.shape[0]
    again = 0
    chained = 0
    for i in range(1, n):
        if nxt[i] < n:
            again += 1
            if nxt[i] == nxt[i - 1] + 1:
                chained += 1
    return chained / again if again else 0.0


@njit(inline="always")
def _bit_pred(words: np.ndarray, summary: np.ndarray, v: Int) -> Int:
    """The largest time <= v in the set (v >= 0 and some such time is there)."""
    w = v >> 6
    bits = words[w]
    if (v & 63) != 63:
        bits &= (np.uint64(1) << np.uint64((v & 63) + 1)) - np.uint64(1)
    if bits == 0:
        g = w >> 6
        up = summary[g]
        if (w & 63) != 0:
            up &= (np.uint64(1) << np.uint64(w & 63)) - np.uint64(1)
        else:
            up = np.uint64(0)
        while up == 0:
            g -= 1
            up = summary[g]
        w = (g << 6) + 63 - np.int64(ctlz(up))
        bits = words[w]
    return (w << 6) + 63 - np.int64(ctlz(bits))


@njit(inline="always")
def _bit_set(words: np.ndarray, summary: np.ndarray, v: Int) -> None:
    w = v >> 6
    words[w] |= np.uint64(1) << np.uint64(v & 63)
    summary[w >> 6] |= np.uint64(1) << np.uint64(w & 63)


@njit(inline="always")
def _bit_clear(words: np.ndarray, summary: np.ndarray, v: Int) -> None:
    w = v >> 6
    words[w] &= ~(np.uint64(1) << np.uint64(v & 63))
    if words[w] == 0:
        summary[w >> 6] &= ~(np.uint64(1) << np.uint64(w & 63))


def allocate(distinct: int, accesses: int) -> tuple[np.ndarray, ...]:
    """(stack, block lows, block highs, group lows, group highs, bit words, bit summary)."""
    depths = distinct + 2 * GROUP
    blocks = depths // BLOCK + 1
    groups = depths // GROUP + 1
    words = accesses // 64 + 2
    return (
        np.empty(depths, np.int64),
        np.full(blocks, BIG, np.int64),
        np.full(blocks, SMALL, np.int64),
        np.full(groups, BIG, np.int64),
        np.full(groups, SMALL, np.int64),
        np.zeros(words, np.uint64),
        np.zeros(words // 64 + 2, np.uint64),
    )


@njit(nogil=True, cache=True)
def critical_kernel(
    prev: np.ndarray,
    tokens: np.ndarray,
    out: np.ndarray,
    hist: np.ndarray,
    e: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    glo: np.ndarray,
    ghi: np.ndarray,
    words: np.ndarray,
    summary: np.ndarray,
) -> Int:
    """OPT stack distances for previous-use times prev (-1: first access) into hist[d] = (accesses,
    tokens), d = 0 for a first access; tokens one per access or a length-1 array for all; out a
    distance per access, or length 1 for none. Returns the largest distance."""
    n = prev.shape[0]
    per_access_tokens = tokens.shape[0] == n
    want_out = out.shape[0] == n
    size = 0
    maxd: Int = 0
    for t in range(n):
        tok = tokens[t] if per_access_tokens else tokens[0]
        p = prev[t]
        if p < 0:  # a first access: the top becomes t (t - 1 is dropped)
            if size == 0:
                size = 1
                lo[0] = t
                glo[0] = t
            else:
                _bit_clear(words, summary, e[0])
            e[0] = t
            _bit_set(words, summary, t)
            hi[0] = t
            ghi[0] = t
            hist[0, 0] += 1
            hist[0, 1] += tok
            if want_out:
                out[t] = 0
            continue
        # d: the first depth whose time is <= p (size if none)
        d = size
        g = 0
        ngroups = (size + GROUP - 1) // GROUP
        while g < ngroups and d == size:
            if glo[g] <= p:
                b_end = min((g + 1) * (GROUP // BLOCK), (size + BLOCK - 1) // BLOCK)
                gmin = BIG
                gmax = SMALL
                for b in range(g * (GROUP // BLOCK), b_end):
                    if lo[b] <= p:
                        j_end = min((b + 1) * BLOCK, size)
                        bmin = BIG
                        bmax = SMALL
                        for j in range(b * BLOCK, j_end):
                            x = e[j]
                            if x <= p:
                                d = j
                                break
                            bmin = min(bmin, x)
                            bmax = max(bmax, x)
                        if d < size:
                            break
                        lo[b] = bmin  # read whole: the bounds are exact now
                        hi[b] = bmax
                    gmin = min(gmin, lo[b])
                    gmax = max(gmax, hi[b])
                if d == size:  # none in the group: its bounds from its blocks'
                    glo[g] = gmin
                    ghi[g] = gmax
            g += 1
        dist = d + 1
        hist[dist, 0] += 1
        hist[dist, 1] += tok
        if want_out:
            out[t] = dist
        maxd = max(maxd, dist)
        top = e[0]
        e[0] = t
        hi[0] = t
        ghi[0] = t
        _bit_set(words, summary, t)
        if d == 0:  # p = t - 1: the old top is the one dropped
            _bit_clear(words, summary, top)
            continue
        b = d // BLOCK
        g = d // GROUP
        if d == size:  # nothing on the stack is <= p: a new depth
            e[d] = top
            size += 1
            lo[b] = min(lo[b], top)
            glo[g] = min(glo[g], top)
            hi[b] = max(hi[b], top)
            ghi[g] = max(ghi[g], top)
            continue
        c = e[d]
        e[d] = top
        hi[b] = max(hi[b], top)
        ghi[g] = max(ghi[g], top)
        last = _bit_pred(words, summary, p)  # the entry dropped at the end of the walk
        _bit_clear(words, summary, last)
        j = d + 1
        low = c  # every entry written below is >= the first one carried: lowering bounds by it holds
        while c != last:
            if j % GROUP == 0:
                g = j // GROUP
                if ghi[g] <= c or glo[g] > p:
                    j += GROUP
                    continue
            b = j // BLOCK
            if j % BLOCK == 0 and (hi[b] <= c or lo[b] > p):  # nothing in (c, p] here
                j += BLOCK
                continue
            glo[j // GROUP] = min(glo[j // GROUP], low)
            whole = j % BLOCK == 0
            j_end = min((b + 1) * BLOCK, size)
            bmin = BIG
            bmax = SMALL
            while j < j_end:
                x = e[j]
                if c < x <= p:
                    e[j] = c
                    x, c = c, x
                bmin = min(bmin, x)
                bmax = max(bmax, x)
                j += 1
                if c == last:
                    break
            if whole and j == j_end:
                lo[b] = bmin
                hi[b] = bmax
            else:
                lo[b] = min(lo[b], low)
    return maxd
