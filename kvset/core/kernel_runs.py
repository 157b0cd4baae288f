"""Runs of re-read blocks, for the exact kernel (kvset.core.kernel): a stretch of accesses that re-read,
in order, the blocks of consecutive live slots is taken at once, all at one stack distance
(docs/method.md, section 3, "Runs of re-read blocks")."""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core import fenwick
from kvset.core.kernel_types import Int
from kvset.core.live_slots import SB_SHIFT, live_test, lowest_bit


@njit(inline="always")
def resolve_slot(live: np.ndarray, slot_keys: np.ndarray, p: Int) -> Int:
    """The live slot of a block whose table entry says p: a run moved it on from p if p is free."""
    while not live_test(live, p):
        p = np.int64(slot_keys[p])
    return p


ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(inline="always")
def _ones_from(x: np.uint64, b: Int) -> Int:
    """How many consecutive set bits x has from bit b up (bit b set)."""
    y = x >> np.uint64(b)
    return 64 - b if y == ALL_ONES >> np.uint64(b) else lowest_bit(~y)


@njit(inline="always")
def _bits(lo: Int, n: Int) -> np.uint64:
    """Bits lo..lo+n-1 of a word (1 <= n <= 64 - lo)."""
    return (ALL_ONES >> np.uint64(64 - n)) << np.uint64(lo)


@njit(inline="always")
def _segment_matches(
    keys: np.ndarray,
    stamps: np.ndarray,
    per_access: bool,
    slot_width: float,
    slot: Int,
    slot_begin: float,
    slot_end: float,
    j: Int,
    slot_keys: np.ndarray,
    nq: Int,
    n: Int,
) -> tuple[Int, Int]:
    """How many of accesses j..j+n-1 re-read the blocks of slots nq..nq+n-1, in order, stamped no
    later than the current time slot; and how many of those were stamped before it."""
    m = late = 0
    while m < n:
        if slot_keys[nq + m] != keys[j + m]:
            break
        if per_access:
            t = stamps[j + m]
            if t >= slot_end or t < slot_begin:
                s = np.int64(np.floor(t / slot_width))
                if s > slot:
                    break
                if s < slot:
                    late += 1
        m += 1
    return m, late


@njit(nogil=True)
def extend_run(
    keys: np.ndarray,
    tokens: np.ndarray,
    stamps: np.ndarray,
    per_access: bool,
    slot_width: float,
    slot: Int,
    i: Int,
    stop: Int,
    q: Int,
    now: Int,
    slot_keys: np.ndarray,
    live: np.ndarray,
    fen: np.ndarray,
    d: Int,
    out: np.ndarray,
) -> tuple[Int, Int, Int, Int]:
    """Take accesses i, i+1, ... as one run: block j of it is the block in the next live slot after
    the previous one's (q, the slot access i-1 hit, is freed already), so every access of the run
    has the distance d of access i-1. Each block moves to a new slot at the top (now, now+1, ...);
    its old slot is freed and keeps the new slot's number in slot_keys, so that the hash table,
    which still says the old slot, is not written (`resolve_slot` follows the numbers). The tree gets
    one update per superblock of slots freed or filled, not one per block.

    The run goes by segments: consecutive live old slots within one word whose new slots lie
    within one word, so that the live bits, the tree's tallies and the bounds are settled once a
    segment and the loop over its blocks only compares keys and stamps (_segment_matches) and
    moves them.

    The caller has put every live bit into the tree. Stops at a block that is not the next, at the
    first access of a later time slot, or where the slots run out. Returns (accesses taken, their
    tokens, how many were stamped before the current slot, the last slot freed)."""
    per_access_tokens = tokens.shape[0] == keys.shape[0]
    want_out = out.shape[0] == keys.shape[0]
    slot_begin = slot * slot_width
    slot_end = (slot + 1) * slot_width
    # The run's old slots lie below the newest word (a run in it is short and left to the
    # per-block path), so the word being freed and the word being filled are never the same and
    # both stay in registers, written back when the run leaves them.
    limit = min(now - 1, (now >> 6) << 6)
    end = min(stop, i + slot_keys.shape[0] - now)  # accesses the free slots at the top can take
    first = now
    n_tok = late = 0
    freed = filled = 0
    freed_sb: Int = q >> SB_SHIFT
    filled_sb: Int = now >> SB_SHIFT
    w = q >> 6
    word = live[w]  # the freed word, as it will be written back
    ahead = word & ~(ALL_ONES >> np.uint64(63 - (q & 63)))  # live bits above q
    dw = now >> 6
    dword = live[dw] if dw < live.shape[0] else np.uint64(0)
    j = i
    while j < end:
        if ahead == 0:
            # a word of freed slots, or more, ends the run: the per-block path takes the access
            if ((w + 1) << 6) >= limit:
                break
            live[w] = word
            w += 1
            word = live[w]
            ahead = word
            if ahead == 0:
                break
        b = lowest_bit(ahead)
        nq = (w << 6) + b
        n = min(_ones_from(ahead, b), 64 - (now & 63), end - j, limit - nq)
        if n <= 0:
            break
        m, m_late = _segment_matches(
            keys, stamps, per_access, slot_width, slot, slot_begin, slot_end, j, slot_keys, nq, n
        )
        if m == 0:
            break
        for k in range(m):
            slot_keys[now + k] = keys[j + k]
            slot_keys[nq + k] = np.uint64(now + k)
        if per_access_tokens:
            for k in range(j, j + m):
                n_tok += tokens[k]
        else:
            n_tok += m * tokens[0]
        if want_out:
            for k in range(j, j + m):
                out[k] = d
        late += m_late
        gone = _bits(b, m)
        ahead &= ~gone
        word &= ~gone
        if (nq >> SB_SHIFT) != freed_sb:
            fenwick.add(fen, freed_sb, -freed)
            freed_sb = nq >> SB_SHIFT
            freed = 0
        freed += m
        dword |= _bits(now & 63, m)
        if (now >> SB_SHIFT) != filled_sb:
            fenwick.add(fen, filled_sb, filled)
            filled_sb = now >> SB_SHIFT
            filled = 0
        filled += m
        q = nq + m - 1
        now += m
        j += m
        if (now & 63) == 0:
            live[dw] = dword
            dw += 1
            dword = live[dw] if dw < live.shape[0] else np.uint64(0)
        if m < n:
            break
    live[w] = word
    if dw < live.shape[0]:
        live[dw] = dword
    fenwick.add(fen, freed_sb, -freed)
    fenwick.add(fen, filled_sb, filled)
    return j - i, n_tok, late, q if now > first else -1
