"""The pure-Python baseline: the same stack-distance algorithm as kvset's kernel, in plain Python.

A dict maps each block to the time of its latest access; a Fenwick tree (a Python list) over
access times counts the times that are still some block's latest access. The stack distance of
a re-access is 1 + the number of such times after the block's previous access. No numpy or
numba in the loop; the Fenwick loops are written inline because a Python call per tree step
would make the baseline slower than it needs to be.

The tree has one slot per access of the input (no compaction): fine for the prefix it runs on.
"""

from __future__ import annotations

from collections.abc import Sequence


def stack_distance_histogram(keys: Sequence[int]) -> tuple[list[int], int]:
    """(hist, first_accesses): hist[d] = accesses with stack distance d (hist[0] unused)."""
    n = len(keys)
    tree = [0] * (n + 1)  # Fenwick over access times 1..n
    latest: dict[int, int] = {}
    hist = [0] * (n + 1)
    tracked = 0  # blocks seen so far == times currently marked
    first = 0
    for now, key in enumerate(keys, 1):
        prev = latest.get(key)
        if prev is None:
            first += 1
            tracked += 1
        else:
            # marked times in [1, prev]
            marked = 0
            i = prev
            while i > 0:
                marked += tree[i]
                i &= i - 1
            hist[tracked - marked + 1] += 1
            # unmark prev
            i = prev
            while i <= n:
                tree[i] -= 1
                i += i & -i
        latest[key] = now
        i = now
        while i <= n:
            tree[i] += 1
            i += i & -i
    return hist, first
