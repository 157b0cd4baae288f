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
from kvset.core.opt_rope import CNT, LT, RT, SZ, flush, inline_plain, locate, refresh_chunk


@inline_plain
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


@inline_plain
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
