"""Runs of re-read blocks for the optimal curve (kvset.core.opt_kernel): most accesses of a re-read
prefix find their block one depth below the last one's, with only the top of the stack, or the top
and the depth just above the block, a record.

Say access t-1 found its block at depth d that way: afterwards a key C sits at depth d and no key
at depths 1..d-1 exceeds a bound M (the old top's key). If access t's block is at depth d + 1 (its
key is t there: next-use times are unique, so the key names its block) and the top's key x is at
least M, the records above it are the top and, if C > x, depth d: the smaller of x and C stays at
depth d, the larger moves on to d + 1, nxt[t] goes on top, the distance is d + 2, and M becomes the
larger of M and the key left at d. So while both tests hold an access is one store into a chunk,
with C and the top's key kept in registers: no search for the block, no walk of the records, no
edits down the treap (docs/method.md, section 12).

The chunks' and their ancestors' summaries (largest, smallest key and so on) are left stale while
the run goes on, read by nothing, and made right (settle) when it leaves a chunk or ends.
"""

from __future__ import annotations

import numpy as np

from kvset.core.kernel_types import Int
from kvset.core.opt_rope import CMX, CNT, LT, MX, RT, SZ, flush, locate, plain, refresh_chunk


# Compiled once each and called, not inlined: none is called more than once a shifted run's access
# or once a chunk a run passes, and every inlined copy adds to the kernel's compile time.
@plain
def find_at(nd: np.ndarray, root: Int, pos: Int) -> tuple[Int, Int]:
    """(chunk node, offset) of position pos, which the stack holds; nothing is marked."""
    v = root
    while True:
        left = nd[v, LT]
        ls = nd[left, SZ]
        if pos < ls:
            v = left
            continue
        pos -= ls
        if pos < nd[v, CNT]:
            return v, pos
        pos -= nd[v, CNT]
        v = nd[v, RT]


@plain
def settle(
    nd: np.ndarray,
    ck: np.ndarray,
    root: Int,
    pos: Int,
    v: Int,
    dirty: np.ndarray,
    counts: np.ndarray,
    order: np.ndarray,
) -> None:
    """Chunk v (which holds position pos) was written in place: its summary, then every node from
    the root down to it, recomputed."""
    refresh_chunk(nd, ck, v)
    locate(nd, root, pos, False, 0, dirty)
    flush(nd, ck, dirty, counts, order)


# A shifted run. Most accesses of a re-read prefix that the run above does not take (its blocks
# deep, below other conversations' blocks) find, above the block at depth D, the top and one run
# of records [k, D-1] with nothing in 1..k-1 above the top's key. The cascade is then: the top's key
# goes to depth k, the run shifts down by one, into the block's depth; that is one insertion and one
# removal, whatever the run's length, and no walk of the records. The next access finds its block at
# D+1 in the same shape when no key at 1..k-1 exceeds the new top's (the bound M) and the run goes on
# below it: from k if the old top's key (now at k) exceeds the new top's, else from k+1, where the key
# must exceed the new top's too (kvset.core.opt_kernel keeps D, k, M and the key at k in registers).


@plain
def key_at(nd: np.ndarray, ck: np.ndarray, root: Int, pos: Int) -> Int:
    """The key at position pos (which the stack holds)."""
    v, j = find_at(nd, root, pos)
    key: Int = ck[v, j]
    return key


@plain
def prefix_max(nd: np.ndarray, ck: np.ndarray, root: Int, end: Int) -> Int:
    """The largest key at positions 0..end-1 (-1 for none); the summaries must be flushed."""
    m = np.int64(-1)
    v = root
    while end > 0 and v != 0:
        left = nd[v, LT]
        ls = nd[left, SZ]
        if end <= ls:
            v = left
            continue
        if ls > 0:
            m = max(m, nd[left, MX])
        end -= ls
        c = nd[v, CNT]
        if end <= c:
            for i in range(end):
                m = max(m, ck[v, i])
            return m
        m = max(m, nd[v, CMX])
        end -= c
        v = nd[v, RT]
    return m


@plain
def shifted_run_start(nd: np.ndarray, ck: np.ndarray, root: Int, y: Int, x: Int, k: Int, m: Int) -> Int:
    """Where the next access's run of records starts, its block one depth below the last one's, with
    top key y, x at depth k and m at least every key at depths 1..k-1 (the run goes on from k+1):
    k if x is a record, k+1 if only the run below it is, -1 if the shape does not hold."""
    if m > y:
        return -1
    if x > y:
        return k
    if key_at(nd, ck, root, k + 1) > y:
        return k + 1
    return -1


# A dead run. A block read for the last time goes on top with key n (never); such keys sink and
# gather among a re-read prefix's blocks. Say the block is at depth D + 1, the first dead key above
# it at depth a, and no key at 1..a-1 exceeds the top's key y < n (a bound M kept for them). Then the
# records are the top and depth a (n exceeds y; nothing exceeds n): y goes to depth a, n to depth
# D + 1, and for the next access a moves on to the next dead key below (D + 1 at the latest), M
# taking in the live keys it passes, each of them once. When y is n itself the top alone is a
# record: n goes to D + 1 and a stays. Either way two stores and no change to the tree's shape, as
# in the run above (kvset.core.opt_kernel keeps a, D, M, the top's key and both chunks in registers).
DEAD_SPAN = 64  # a dead run starts only when the next dead key is at most this many depths on


@plain
def next_dead(
    nd: np.ndarray,
    ck: np.ndarray,
    root: Int,
    p: Int,
    v: Int,
    j: Int,
    m: Int,
    inf: Int,
    limit: Int,
    dirty: np.ndarray,
    counts: np.ndarray,
    order: np.ndarray,
) -> tuple[Int, Int, Int, Int]:
    """From position p (chunk v, offset j: perhaps the chunk's end) on to the first key inf within
    limit positions, which must lie on the stack: (its position, chunk, offset, the largest of m and
    the keys passed), position -1 if there is none so near. A chunk the walk leaves is settled (the
    dead run writes into the chunk it starts from)."""
    end = p + limit
    while p < end:
        if j == nd[v, CNT]:
            settle(nd, ck, root, p - 1, v, dirty, counts, order)
            v, j = find_at(nd, root, p)
        k = ck[v, j]
        if k == inf:
            return p, v, j, m
        m = max(m, k)
        p += 1
        j += 1
    return -1, v, j, m
