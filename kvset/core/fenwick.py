"""Fenwick trees (binary indexed trees) over int64 arrays, for the compiled kernels.

fen[1..n] holds the tree of n entries (fen[0] unused): add() and prefix() are the two textbook walks.
append() and remove_below() serve a tree kept valid only up to its newest entry (the sampled
analyzer's slot weights): a new entry's node is computed from its children, amortized O(1) instead
of a walk to the root, and a removal walks only up to the newest node; nodes beyond it are
computed when their entry is appended.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core.kernel_types import Int


@njit(inline="always")
def add(fen: np.ndarray, i: Int, v: Int) -> None:
    """Entry i gains v."""
    n = fen.shape[0] - 1
    i += 1
    while i <= n:
        fen[i] += v
        i += i & (-i)


@njit(inline="always")
def prefix(fen: np.ndarray, i: Int) -> Int:
    """Sum of entries [0, i]; 0 for i < 0."""
    s = 0
    i += 1
    while i > 0:
        s += fen[i]
        i -= i & (-i)
    return s


@njit(inline="always")
def append(fen: np.ndarray, s: Int, v: Int) -> None:
    """Entry s (the newest) gets v."""
    m = s + 1
    total = v
    k = 1
    while k < (m & (-m)):
        total += fen[m - k]
        k <<= 1
    fen[m] = total


@njit(inline="always")
def remove_below(fen: np.ndarray, s: Int, v: Int, now: Int) -> None:
    """Entry s (older than `now`, the next entry to append) loses v."""
    i = s + 1
    while i <= now:
        fen[i] -= v
        i += i & (-i)
