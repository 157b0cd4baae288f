"""The ordered merge of partial stacks (kvset.core.partial_stack, whose docstring gives the method):
B's firsts resolved against A's stack, B's stack absorbing A's blocks it did not touch, histograms
and time slots added; merge_all runs the ordered tree of them.

The root of the tree is the last merge: nothing merges into its result, which is only read as the
analysis, so it keeps neither a stack nor firsts (at the default horizon up to 4M blocks of each,
about 100 MB built, moved to the client and dropped); it keeps their lengths, which the reports read.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import numpy.typing as npt
from numba import njit

from kvset.core import fenwick
from kvset.core import hash_table as HT
from kvset.core.intrinsics import popcount
from kvset.core.kernel_types import Int
from kvset.core.partial_slots import PartialSlots, merge_slots
from kvset.core.partial_stack import (
    P_BEYOND,
    P_BEYOND_TOKENS,
    P_FIRST_TIME,
    P_FIRST_TIME_TOKENS,
    P_HITS,
    Ints,
    Keys,
    PartialStack,
)

# The merge's join of B's firsts with A's stack is radix-partitioned: both sides are scattered by the
# top bits of their hash into buckets of about BUCKET of A's keys, and each bucket is joined through a
# hash table that stays in the L2 cache (one table over a whole stack of millions of keys sent every
# insert and probe to memory: 1.6x the time). The distances then take one pass in B's order, counting
# A's positions already taken in a bitmap with a Fenwick tree over its superblocks of 512 positions.
BUCKET = 2048
SB_SHIFT = 9  # positions per superblock = 2**9
SB_WORDS = 8


@njit(inline="always")
def _marked_below(marks: Keys, fen: Ints, q: Int) -> Int:  # pragma: no cover - compiled
    """Marked positions in [0, q)."""
    w = q >> 6
    s = fenwick.prefix(fen, (q >> SB_SHIFT) - 1)
    for k in range(w & ~(SB_WORDS - 1), w):
        s += popcount(marks[k])
    if q & 63:
        s += popcount(marks[w] & ((np.uint64(1) << np.uint64(q & 63)) - np.uint64(1)))
    return s


@njit(inline="always")
def _scatter(keys: Keys, shift: np.uint64, buckets: int) -> tuple[Ints, Keys, Ints]:  # pragma: no cover
    """The keys grouped by bucket (the top bits of their hash): bucket starts, keys, their indices.
    The hash is taken again in the second pass rather than kept: a merge's temporaries are fresh
    pages, faulted in, and a key's hash is cheaper than its 8 bytes more."""
    n = keys.shape[0]
    start = np.zeros(buckets + 1, dtype=np.int64)
    for i in range(n):
        start[np.int64(HT.mix(keys[i]) >> shift) + 1] += 1
    for b in range(buckets):
        start[b + 1] += start[b]
    fill = start[:buckets].copy()
    grouped = np.empty(n, dtype=np.uint64)
    at = np.empty(n, dtype=np.int64)
    for i in range(n):
        b = np.int64(HT.mix(keys[i]) >> shift)
        j = fill[b]
        grouped[j] = keys[i]
        at[j] = i
        fill[b] = j + 1
    return start, grouped, at


@njit(nogil=True, cache=True)
def _positions_in(stack_a: Keys, firsts_b: Keys, found: Ints) -> None:  # pragma: no cover - compiled
    """found[i] = the position of firsts_b[i] in stack_a, or -1."""
    m = stack_a.shape[0]
    found[:] = -1
    if m == 0 or firsts_b.shape[0] == 0:
        return
    bits = 1
    while (m >> bits) > BUCKET and bits < 20:
        bits += 1
    buckets = 1 << bits
    shift = np.uint64(64 - bits)
    sa, ka, qa = _scatter(stack_a, shift, buckets)
    sb, kb, ib = _scatter(firsts_b, shift, buckets)
    most = 1
    for b in range(buckets):
        while most < 2 * (sa[b + 1] - sa[b]):
            most <<= 1
    table = np.empty(2 * most, dtype=np.uint64)
    for b in range(buckets):
        count = sa[b + 1] - sa[b]
        if count == 0 or sb[b + 1] == sb[b]:
            continue
        cells = 1
        while cells < 2 * count:
            cells <<= 1
        mask = cells - 1
        for c in range(cells):
            table[2 * c + 1] = HT.EMPTY
        for j in range(sa[b], sa[b + 1]):
            h = -HT.table_find(table, mask, ka[j]) - 1
            table[2 * h] = ka[j]
            table[2 * h + 1] = np.uint64(qa[j])
        for j in range(sb[b], sb[b + 1]):
            h = HT.table_find(table, mask, kb[j])
            if h >= 0:
                found[ib[j]] = np.int64(table[2 * h + 1])


@njit(inline="always")
def _mark_run(marks: Keys, fen: Ints, lo: Int, hi: Int) -> None:  # pragma: no cover - compiled
    """Positions lo..hi of A's stack (a run, see _resolve) marked taken, in the bitmap and the tree."""
    q = lo
    while q <= hi:
        w = q >> 6
        end = min(hi, (w << 6) + 63)  # the run's part in this word
        width = end - q + 1
        ones = ~np.uint64(0) if width == 64 else (np.uint64(1) << np.uint64(width)) - np.uint64(1)
        marks[w] |= ones << np.uint64(q & 63)
        q = end + 1
    sb = lo >> SB_SHIFT
    while sb <= hi >> SB_SHIFT:
        first = max(lo, sb << SB_SHIFT)
        last = min(hi, ((sb + 1) << SB_SHIFT) - 1)
        fenwick.add(fen, sb, last - first + 1)
        sb += 1


@njit(nogil=True, cache=True)
def _resolve(
    stack_a: Keys,
    firsts_b: Keys,
    tokens_b: Ints,
    horizon: int,
    hist: Ints,
    distance: Ints,
    used_a: npt.NDArray[np.bool_],
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """B's firsts against A's stack: distance[i] = d (found at d <= H: a hit, added to hist), -1
    (found deeper: a miss beyond the horizon) or 0 (not in A's stack); used_a[q] marks A's blocks B
    touched. Returns the hits' count and tokens, and the largest hit distance.

    B re-reading what A read, in order, finds it at A's positions q, q-1, q-2, ... (A's stack holds
    its last block first); all but 0.1 % of the found firsts continue such a run on the 80M-access
    agentic trace. Along a run the positions taken below the next one do not change (q-1 is not
    taken: each of A's blocks is found once), so neither does the distance, and the run's positions
    are marked taken once it ends, before the next count."""
    m = stack_a.shape[0]
    n = firsts_b.shape[0]
    found = np.empty(n, dtype=np.int64)
    _positions_in(stack_a, firsts_b, found)
    marks = np.zeros((m >> 6) + 1, dtype=np.uint64)
    fen = np.zeros((m >> SB_SHIFT) + 2, dtype=np.int64)
    hits = hit_tokens = max_d = 0
    run_lo = run_hi = -2  # the positions of the run being followed, not marked yet
    below = 0  # positions taken below run_lo
    for i in range(n):
        q = found[i]
        if q < 0:
            distance[i] = 0
            continue
        if q != run_lo - 1:  # a new run: the last one marked, the taken ones below q counted
            if run_hi >= 0:
                _mark_run(marks, fen, run_lo, run_hi)
            below = _marked_below(marks, fen, q)
            run_hi = q
        run_lo = q
        d = i + q + 1 - below
        used_a[q] = True
        if d <= horizon:
            distance[i] = d
            hist[d, 0] += 1
            hist[d, 1] += tokens_b[i]
            hits += 1
            hit_tokens += tokens_b[i]
            if d > max_d:
                max_d = d
        else:
            distance[i] = -1
    return hits, hit_tokens, max_d


class _Laps:
    """This thread's CPU seconds per phase of a merge, added into a dict (None: not measured)."""

    def __init__(self, into: dict[str, float] | None) -> None:
        self.into = into
        self.t = time.thread_time() if into is not None else 0.0

    def __call__(self, phase: str) -> None:
        if self.into is not None:
            now = time.thread_time()
            self.into[phase] = self.into.get(phase, 0.0) + now - self.t
            self.t = now


def merge(
    a: PartialStack, b: PartialStack, *, root: bool = False, laps: dict[str, float] | None = None
) -> PartialStack:
    """The state of A's accesses followed by B's (A earlier). Associative; not commutative. root: the
    last merge of the tree, whose state keeps no stack or firsts (see the module); laps: this
    thread's CPU seconds per phase (histograms, resolve, absorb, windows) are added into it."""
    if a.horizon != b.horizon:
        raise ValueError(
            f"partial stacks of different horizons ({a.horizon:,} and {b.horizon:,}) do not merge"
        )
    if a.root_sizes is not None or b.root_sizes is not None:
        raise ValueError("the root of a merge tree keeps no stack: it merges no further")
    lap = _Laps(laps)
    horizon = a.horizon
    rows = max(len(a.hist), len(b.hist), min(horizon, len(b.firsts) + len(a.stack)) + 1)
    hist = np.zeros((rows, 2), dtype=np.int64)
    hist[: len(a.hist)] += a.hist
    hist[: len(b.hist)] += b.hist
    distance = np.zeros(len(b.firsts), dtype=np.int64)
    used_a = np.zeros(len(a.stack), dtype=np.bool_)
    lap("histograms")
    hits, hit_tokens, max_d = _resolve(a.stack, b.firsts, b.first_tokens, horizon, hist, distance, used_a)
    lap("resolve")
    hist = hist[: max(max_d, a.max_distance, b.max_distance) + 1]
    beyond = distance < 0
    counts = a.counts + b.counts
    beyond_tokens = int(b.first_tokens[beyond].sum())
    counts[P_HITS] += hits
    counts[P_FIRST_TIME] -= hits + int(beyond.sum())
    counts[P_FIRST_TIME_TOKENS] -= int(hit_tokens) + beyond_tokens
    counts[P_BEYOND] += int(beyond.sum())
    counts[P_BEYOND_TOKENS] += beyond_tokens
    new = distance == 0
    n_new = int(new.sum())
    if root:  # the lengths of the stack and firsts the lines below would build
        kept = len(b.stack) + len(a.stack) - int(used_a.sum())
        firsts_len = min(len(a.firsts) + n_new, horizon) if a.complete else len(a.firsts)
        sizes = (min(kept, horizon) if b.complete else len(b.stack), firsts_len)
        stack, firsts, first_tokens = _NO_KEYS, _NO_KEYS, _NO_INTS
    else:
        sizes = None
        stack = np.concatenate([b.stack, a.stack[~used_a]])[:horizon] if b.complete else b.stack
        if a.complete:
            firsts = np.concatenate([a.firsts, b.firsts[new]])[:horizon]
            first_tokens = np.concatenate([a.first_tokens, b.first_tokens[new]])[:horizon]
        else:
            firsts, first_tokens = a.firsts, a.first_tokens
    lap("absorb")
    merged = PartialStack(
        horizon=horizon,
        hist=hist,
        counts=counts,
        stack=np.ascontiguousarray(stack),
        firsts=np.ascontiguousarray(firsts),
        first_tokens=np.ascontiguousarray(first_tokens),
        complete=a.complete and b.complete and len(a.firsts) + n_new <= horizon,
        t_first=float(np.fmin(a.t_first, b.t_first)),
        t_last=float(np.fmax(a.t_last, b.t_last)),
        windows=_merge_windows(a, b, distance, new, keep_firsts=not root),
        root_sizes=sizes,
    )
    lap("windows")
    return merged


_NO_KEYS = np.zeros(0, dtype=np.uint64)
_NO_INTS = np.zeros(0, dtype=np.int64)


def as_root(state: PartialStack) -> PartialStack:
    """A state read as the whole analysis (a tree of one partition): its stack and firsts dropped, their
    lengths kept, as merge(..., root=True) gives them."""
    if state.root_sizes is not None:
        return state
    windows = state.windows
    return replace(
        state,
        stack=_NO_KEYS,
        firsts=_NO_KEYS,
        first_tokens=_NO_INTS,
        windows=None if windows is None else replace(windows, first_slots=_NO_INTS),
        root_sizes=(len(state.stack), len(state.firsts)),
    )


def _merge_windows(
    a: PartialStack, b: PartialStack, distance: Ints, new: npt.NDArray[np.bool_], keep_firsts: bool
) -> PartialSlots | None:
    if a.windows is None or b.windows is None:
        return None
    return merge_slots(
        a.windows, b.windows, distance, b.first_tokens, new, a.complete, a.horizon, keep_firsts
    )


def merge_all(states: list[PartialStack], root: bool = False) -> PartialStack:
    """The ordered merge of consecutive partitions' states, pairwise in rounds (as a tree reduction);
    root: the result keeps no stack or firsts (see the module)."""
    if not states:
        raise ValueError("no partition to merge")
    while len(states) > 1:
        last = root and len(states) == 2
        states = [
            merge(*states[i : i + 2], root=last) if i + 1 < len(states) else states[i]
            for i in range(0, len(states), 2)
        ]
    return as_root(states[0]) if root else states[0]
