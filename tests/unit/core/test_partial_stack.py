"""The ordered merge of partial stacks gives the one-process histogram bit for bit, however the stream is cut."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.core.analyzer import Analyzer
from kvset.core.feed_args import reverse_within_requests
from kvset.core.naive import naive_curve
from kvset.core.partial_stack import (
    P_BEYOND,
    P_FIRST_TIME,
    P_HITS,
    P_REQUESTS,
    empty_stack,
    partial_stack,
)
from kvset.core.partial_stack_merge import as_root, merge, merge_all
from tests.support.merge_tree import merge_in_random_tree


@st.composite
def cut_traces(draw):
    """A random trace, its request starts, and random cut points (inside requests too)."""
    alphabet = draw(st.sampled_from([1, 2, 3, 7, 20, 60, 300]))
    n = draw(st.integers(0, 400))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    style = draw(st.sampled_from(["uniform", "skewed", "loop"]))
    if style == "uniform":
        keys = rng.integers(0, alphabet, n)
    elif style == "skewed":
        keys = np.minimum(rng.zipf(1.3, n) - 1, alphabet * 4)
    else:  # a loop over the alphabet: every key spans every partition
        keys = np.arange(n) % alphabet
    keys = (np.asarray(keys, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
    tokens = rng.integers(1, 600, n) if draw(st.booleans()) else np.full(n, 16)
    starts = np.unique(np.concatenate([[0], np.flatnonzero(rng.random(n) < 0.2)])) if n else np.zeros(0, int)
    k = draw(st.integers(0, 12))
    cuts = sorted(set(rng.integers(0, n + 1, k).tolist())) if n else []
    return keys, tokens, starts.astype(np.int64), [0, *cuts, n]


def _one_process(keys, tokens, horizon):
    a = Analyzer(horizon=horizon)
    if len(keys):
        a.feed(keys, tokens=tokens, timestamps=0.0)
    return a


@settings(max_examples=300, deadline=None)
@given(cut_traces(), st.integers(1, 50), st.sampled_from(["forward", "reverse"]), st.integers(0, 2**32 - 1))
def test_merged_histogram_equals_one_process_for_every_cut(trace, horizon, order, seed):
    keys, tokens, starts, bounds = trace
    if order == "reverse" and len(keys):  # cut the stream as analysed: a cut may fall inside a request
        perm = reverse_within_requests(starts, len(keys))
        keys, tokens = keys[perm], tokens[perm]
    whole = _one_process(keys, tokens, horizon)
    parts = [
        partial_stack(keys[lo:hi], tokens[lo:hi], horizon)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    merged = merge_in_random_tree(parts, merge, np.random.default_rng(seed))
    c, m = whole.curve(), merged.curve()
    assert np.array_equal(m.capacities, c.capacities)
    assert np.array_equal(m.block_hits, c.block_hits)
    assert np.array_equal(m.token_hits, c.token_hits)
    assert (m.accesses, m.tokens) == (c.accesses, c.tokens)
    assert merged.counts[P_HITS] == whole.rereferences
    assert merged.misses == whole.first_time + whole.beyond_horizon
    assert merged.forgotten_blocks == whole.forgotten_blocks
    if whole.forgotten_blocks == 0:  # nothing forgotten: the split of the misses is exact too
        assert merged.counts[P_FIRST_TIME] == whole.first_time == len(set(keys.tolist()))
        assert merged.counts[P_BEYOND] == 0
    # and against the independent reference, at every capacity up to the horizon
    naive = naive_curve(keys.tolist(), range(1, horizon + 1), tokens.tolist())
    for cap, (hb, ht) in naive.items():
        assert (m.hits(cap), m.hits(cap, "tokens")) == (hb, ht)


@settings(max_examples=100, deadline=None)
@given(cut_traces(), st.integers(1, 50))
def test_requests_cut_at_their_starts_with_reverse_order(trace, horizon):
    """Partitions of whole requests, each reversed by its own analyzer, merge to the one-process curve."""
    keys, tokens, starts, _ = trace
    n = len(keys)
    whole = Analyzer(horizon=horizon, order="reverse")
    if n:
        whole.feed(keys, tokens=tokens, request_starts=starts, timestamps=0.0)
    bounds = [0, *[int(s) for s in starts[1::3]], n]
    merged = empty_stack(horizon)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        rel = starts[(starts >= lo) & (starts < hi)] - lo
        merged = merge(merged, partial_stack(keys[lo:hi], tokens[lo:hi], horizon, "reverse", rel))
    c, m = whole.curve(), merged.curve()
    assert np.array_equal(m.block_hits, c.block_hits) and np.array_equal(m.token_hits, c.token_hits)
    assert merged.counts[P_REQUESTS] == whole.requests


def test_merge_resolves_firsts_against_the_earlier_stack():
    """A: a b c (stack c b a). B: x b: x is new, b sits under x and c, at distance 3."""
    a = partial_stack(np.array([1, 2, 3], dtype=np.uint64), 1, horizon=10)
    b = partial_stack(np.array([9, 2], dtype=np.uint64), 1, horizon=10)
    assert a.stack.tolist() == [3, 2, 1] and b.firsts.tolist() == [9, 2]
    m = merge(a, b)
    assert m.hist[:, 0].tolist() == [0, 0, 0, 1]
    assert m.stack.tolist() == [2, 9, 3, 1]
    assert m.firsts.tolist() == [1, 2, 3, 9] and m.complete
    with pytest.raises(ValueError, match="different horizons"):
        merge(a, empty_stack(5))


@given(st.lists(st.integers(0, 30), max_size=200), st.integers(1, 40))
def test_stack_keys_are_the_lru_stack(keys, horizon):
    """Analyzer.stack_keys: the tracked blocks most recent first, the horizon's worth (an explicit LRU list)."""
    a = Analyzer(horizon=horizon, initial_tracked=2)
    stack: list[int] = []
    if keys:
        a.feed(np.array(keys, dtype=np.uint64), timestamps=0.0)
    for k in keys:
        if k in stack:
            stack.remove(k)
        stack.insert(0, k)
        del stack[horizon:]
    assert a.stack_keys().tolist() == stack


def test_large_states_merge_through_many_buckets():
    """Stacks of tens of thousands of blocks: the join runs over many radix buckets."""
    rng = np.random.default_rng(11)
    keys = (rng.zipf(1.05, 120_000) % 40_000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    tokens = rng.integers(1, 64, len(keys))
    for horizon in (1 << 20, 9_000):
        whole = _one_process(keys, tokens, horizon)
        merged = empty_stack(horizon)
        for lo in range(0, len(keys), 30_000):
            merged = merge(merged, partial_stack(keys[lo : lo + 30_000], tokens[lo : lo + 30_000], horizon))
        c, m = whole.curve(), merged.curve()
        assert len(merged.stack) > min(horizon, 4 * 2048) and np.array_equal(m.block_hits, c.block_hits)
        assert np.array_equal(m.token_hits, c.token_hits)


def _conversations(rng: np.random.Generator, turns: int) -> np.ndarray:
    """Agents' turns: each re-reads its conversation's context in order (all of it, a prefix, or with
    one block left out) and appends new blocks; contexts grow past a thousand blocks, so that a merge
    finds long runs of A's positions crossing bitmap words and superblocks of its count tree."""
    contexts: list[list[int]] = [[] for _ in range(5)]
    out: list[int] = []
    fresh = 0
    for _ in range(turns):
        c = contexts[int(rng.integers(0, len(contexts)))]
        read = c[: int(rng.integers(0, len(c) + 1))] if rng.random() < 0.3 else list(c)
        if read and rng.random() < 0.3:
            del read[int(rng.integers(0, len(read)))]
        new = list(range(fresh, fresh + int(rng.integers(1, 400))))
        fresh += len(new)
        out += read + new
        c += new
    return (np.asarray(out, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 9))
def test_rereads_in_long_runs_merge_to_the_one_process_histogram(seed, cuts):
    """The merge follows runs of B's firsts found at A's positions q, q-1, ... (partial_stack_merge):
    runs of hundreds to thousands of positions, broken by a block left out or a shorter prefix, cut at
    random points (inside a run too) and merged in a random tree, at a horizon above and one below
    the distinct blocks."""
    rng = np.random.default_rng(seed)
    keys = _conversations(rng, 40)
    tokens = rng.integers(1, 64, len(keys))
    bounds = [0, *sorted(set(rng.integers(0, len(keys) + 1, cuts).tolist())), len(keys)]
    for horizon in (1 << 20, max(1, len(set(keys.tolist())) // 2)):
        whole = _one_process(keys, tokens, horizon)
        parts = [
            partial_stack(keys[lo:hi], tokens[lo:hi], horizon)
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        merged = merge_in_random_tree(parts, merge, rng)
        c, m = whole.curve(), merged.curve()
        assert np.array_equal(m.block_hits, c.block_hits) and np.array_equal(m.token_hits, c.token_hits)
        assert merged.counts[P_HITS] == whole.rereferences


def _same_but_the_stack(root, kept):
    """A root state (no stack or firsts kept) against the state of the same merges keeping them."""
    assert root.root_sizes is not None and kept.root_sizes is None
    assert len(root.stack) == len(root.firsts) == len(root.first_tokens) == len(root.windows.first_slots) == 0
    assert np.array_equal(root.hist, kept.hist) and np.array_equal(root.counts, kept.counts)
    assert (root.tracked_blocks, root.distinct, root.complete) == (
        kept.tracked_blocks,
        kept.distinct,
        kept.complete,
    )
    assert (root.forgotten_blocks, root.max_distance) == (kept.forgotten_blocks, kept.max_distance)
    assert np.array_equal([root.t_first, root.t_last], [kept.t_first, kept.t_last], equal_nan=True)
    for ring in ("fine", "coarse"):
        r, k = getattr(root.windows, ring), getattr(kept.windows, ring)
        assert r.current == k.current
        for name in ("blocks", "tokens", "counts", "requests", "ids"):
            assert np.array_equal(getattr(r, name), getattr(k, name)), (ring, name)
    w, k = root.windows, kept.windows
    assert np.array_equal(w.on_time_slots, k.on_time_slots) and np.array_equal(w.on_time, k.on_time)
    assert w.late == k.late


@settings(max_examples=100, deadline=None)
@given(cut_traces(), st.integers(1, 50), st.integers(0, 2**32 - 1))
def test_the_root_keeps_no_stack_and_the_same_counts(trace, horizon, seed):
    """The tree's last merge builds no stack or firsts; what the reports read is the same, and the
    lengths of the stack and firsts it did not build are the built ones'."""
    keys, tokens, _, bounds = trace
    parts = [
        partial_stack(keys[lo:hi], tokens[lo:hi], horizon, timestamps=np.arange(lo, hi) * 7.0)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, len(parts))) if len(parts) > 1 else 1
    left = merge_in_random_tree(parts[:k], merge, rng)
    if k == len(parts):  # one state: the root is that state without its stack
        _same_but_the_stack(as_root(left), left)
        return
    right = merge_in_random_tree(parts[k:], merge, rng)
    root, kept = merge(left, right, root=True), merge(left, right)
    _same_but_the_stack(root, kept)
    _same_but_the_stack(merge_all(parts, root=True), merge_all(parts))
    assert as_root(root) is root
    with pytest.raises(ValueError, match="merges no further"):
        merge(root, empty_stack(horizon))


def test_a_state_pickles_with_its_used_distance_rows_only():
    """A loop over 5,000 blocks has every re-access at distance 5,000: one used row of 5,001. Pickled
    (as Dask moves states), only that row goes; read back, the histogram and every merge are the same."""
    import pickle

    keys = np.tile(np.arange(5000, dtype=np.uint64), 3)
    a, b = partial_stack(keys[:9000], 16), partial_stack(keys[9000:], 16)
    back = [pickle.loads(pickle.dumps(s)) for s in (a, b)]
    assert len(a.hist) == 5001 and np.count_nonzero(a.hist[:, 0]) == 1
    assert len(pickle.dumps(a)) < a.nbytes() - a.hist.nbytes + 1000
    for s, r in zip((a, b), back, strict=True):
        assert r.hist.dtype == s.hist.dtype and np.array_equal(r.hist, s.hist)
    assert np.array_equal(merge(*back).hist, merge(a, b).hist)
    dense = partial_stack(np.array([1, 2, 1, 2, 3, 1], dtype=np.uint64), 16)  # rows 2 and 3 of 0-3 used
    assert np.array_equal(pickle.loads(pickle.dumps(dense)).hist, dense.hist)
