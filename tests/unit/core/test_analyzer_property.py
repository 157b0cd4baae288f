"""One-pass analyzer == naive LRU simulation at every capacity, on many random traces."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_curve, naive_stack_distances, reverse_within_requests


@st.composite
def traces(draw):
    alphabet = draw(st.sampled_from([1, 2, 3, 5, 8, 20, 60, 300]))
    n = draw(st.integers(0, 400))
    style = draw(st.sampled_from(["uniform", "skewed", "big-ids"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if style == "uniform":
        keys = rng.integers(0, alphabet, n)
    elif style == "skewed":
        keys = np.minimum(rng.zipf(1.3, n) - 1, alphabet * 4)
    else:  # arbitrary 64-bit keys incl. 0 and 2**64-1
        pool = rng.integers(0, 2**63, alphabet, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(
            1
        )
        pool[0] = np.uint64(0)
        if alphabet > 1:
            pool[1] = np.uint64(2**64 - 1)
        keys = pool[rng.integers(0, alphabet, n)]
    keys = np.asarray(keys).astype(np.uint64)
    tokens = rng.integers(1, 600, n)
    # random request boundaries and random batch splits
    starts = np.flatnonzero(rng.random(n) < 0.2)
    if n:
        starts = np.unique(np.concatenate([[0], starts]))
    cuts = sorted(set(int(s) for s in starts if rng.random() < 0.4))
    return keys, tokens, starts, cuts


def _feed_in_batches(a, keys, tokens, starts, cuts):
    bounds = [0, *[c for c in cuts if 0 < c < len(keys)], len(keys)]
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        rel = starts[(starts >= lo) & (starts < hi)] - lo
        a.feed(keys[lo:hi], tokens=tokens[lo:hi], request_starts=rel, timestamps=float(lo))


def _check_against_naive(a, keys, tokens, horizon):
    c = a.curve()
    caps = range(1, horizon + 2)
    naive = naive_curve(keys, caps, tokens)
    for C in caps:
        hb, ht = naive[C]
        if horizon >= C:
            assert c.hits(C) == hb, f"blocks at C={C}"
            assert c.hits(C, unit="tokens") == ht, f"tokens at C={C}"
    assert c.accesses == len(keys)
    assert c.tokens == int(np.sum(tokens))


@given(traces(), st.integers(1, 40), st.sampled_from(["forward", "reverse"]), st.integers(1, 16))
def test_one_pass_equals_naive_at_every_capacity(trace, horizon, order, initial):
    keys, tokens, starts, cuts = trace
    a = Analyzer(horizon=horizon, order=order, initial_tracked=initial)
    _feed_in_batches(a, keys, tokens, starts, cuts)
    if order == "reverse" and len(keys):
        perm = np.array(reverse_within_requests(range(len(keys)), starts.tolist()))
        keys, tokens = keys[perm], tokens[perm]
    _check_against_naive(a, keys.tolist(), tokens.tolist(), horizon)


@given(traces())
def test_distances_equal_explicit_stack_when_horizon_is_large(trace):
    keys, tokens, starts, cuts = trace
    a = Analyzer(horizon=1 << 20, initial_tracked=2)
    d = a.feed(keys, tokens=tokens, timestamps=0.0, return_distances=True)
    assert d.tolist() == naive_stack_distances(keys.tolist())
    assert a.first_time == len(set(keys.tolist()))
    assert a.beyond_horizon == 0
