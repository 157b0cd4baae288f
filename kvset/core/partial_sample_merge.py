"""The ordered merge of two sampled partial states (kvset.core.partial_sample, whose docstring gives
the integers it resolves a later partition's firsts with): A's slots against B's firsts, in compiled
code, and the merged state."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from kvset.core import fenwick
from kvset.core import hash_table as HT
from kvset.core import sampling_kernel as SK
from kvset.core.kernel_types import Int
from kvset.core.partial_sample import (
    COLUMNS,
    S_BAND,
    S_BEFORE,
    S_INDEX,
    S_KEY,
    S_LIVE,
    S_TOKENS,
    S_WEIGHT,
    Floats,
    Ints,
    PartialSample,
    _distance,
    _new_table,
    _tally_hit,
    _weights,
)
from kvset.core.sampling_filter import priority_hash
from kvset.core.sampling_rates import seed_salt


@njit(nogil=True, cache=True)
def _resolve(
    a_slots: Ints,
    n_a: int,
    w_a: int,
    l_a: int,
    b_firsts: Ints,
    weights: Floats,
    salt: np.uint64,
    horizon: int,
    hist: Floats,
    ghist: Floats,
    sampled: Floats,
    claimed: npt.NDArray[np.bool_],
    new_firsts: Ints,
) -> tuple[Int, Int, Int]:  # pragma: no cover - compiled
    """B's firsts against A's slots (see the module); the unresolved ones into new_firsts in the merged
    state's coordinates. Returns (their count, the claimed slots' weight, the largest hit distance)."""
    m = a_slots.shape[0]
    table, mask = _new_table(m)
    fen = np.zeros(m + 1, dtype=np.int64)
    for q in range(m):
        h = -HT.table_find(table, mask, np.uint64(a_slots[q, S_KEY])) - 1
        table[2 * h] = np.uint64(a_slots[q, S_KEY])
        table[2 * h + 1] = np.uint64(q)
        fenwick.add(fen, q, a_slots[q, S_WEIGHT])
    remaining = l_a  # A's live weight not yet accessed again in B
    gone = 0
    k = 0
    max_d = 0
    for i in range(b_firsts.shape[0]):
        key = np.uint64(b_firsts[i, S_KEY])
        h = HT.table_find(table, mask, key) if m else -1
        if h < 0:
            for c in range(COLUMNS):
                new_firsts[k, c] = b_firsts[i, c]
            new_firsts[k, S_INDEX] += n_a
            new_firsts[k, S_BEFORE] += w_a
            new_firsts[k, S_LIVE] += remaining
            k += 1
            continue
        q = np.int64(table[2 * h + 1])
        wq = a_slots[q, S_WEIGHT]
        gap = n_a + b_firsts[i, S_INDEX] - a_slots[q, S_INDEX] - 1
        between = w_a + b_firsts[i, S_BEFORE] - a_slots[q, S_BEFORE] - wq
        after = b_firsts[i, S_LIVE] + remaining - fenwick.prefix(fen, q)
        b = b_firsts[i, S_BAND]
        w = weights[b]
        grp = np.int64(priority_hash(key, salt) & np.uint64(SK.GROUPS - 1))
        di = _tally_hit(
            _distance(gap, between, after),
            b,
            grp,
            w,
            w * b_firsts[i, S_TOKENS],
            horizon,
            hist,
            ghist,
            sampled,
        )
        if di > max_d:
            max_d = di
        fenwick.add(fen, q, -wq)
        remaining -= wq
        gone += wq
        claimed[q] = True
    return k, gone, max_d


def merge(a: PartialSample, b: PartialSample) -> PartialSample:
    """The sampled state of A's accesses followed by B's (A earlier). Associative; not commutative."""
    if (a.horizon, a.rate, a.seed) != (b.horizon, b.rate, b.seed):
        raise ValueError("sampled states of different horizons, rates or seeds do not merge")
    hist, ghist, sampled = a.hist + b.hist, a.ghist + b.ghist, a.sampled + b.sampled
    claimed = np.zeros(len(a.slots), dtype=np.bool_)
    new = np.empty_like(b.firsts)
    n_a, w_a, l_a = (int(v) for v in a.totals[:3])
    k, gone, max_d = _resolve(
        a.slots,
        n_a,
        w_a,
        l_a,
        b.firsts,
        _weights(a.rate),
        np.uint64(seed_salt(a.seed)),
        a.horizon,
        hist,
        ghist,
        sampled,
        claimed,
        new,
    )
    later = b.slots.copy()
    later[:, S_INDEX] += n_a
    later[:, S_BEFORE] += w_a
    totals = a.totals + b.totals
    totals[2] -= gone
    totals[5] = max(int(a.totals[5]), int(b.totals[5]), int(max_d))
    scalar = (
        b.scalar_tokens
        if a.scalar_tokens in (None, b.scalar_tokens)
        else a.scalar_tokens
        if b.scalar_tokens is None
        else -1
    )
    return PartialSample(
        horizon=a.horizon,
        rate=a.rate,
        seed=a.seed,
        band_counts=a.band_counts + b.band_counts,
        sampled=sampled,
        hist=hist,
        ghist=ghist,
        slots=np.concatenate([a.slots[~claimed], later]),
        firsts=np.concatenate([a.firsts, new[:k]]),
        totals=totals,
        scalar_tokens=scalar,
        t_first=a.t_first if a.t_first == a.t_first else b.t_first,
        t_last=b.t_last if b.t_last == b.t_last else a.t_last,
    )
