"""The time windows of a merged state (the rings the snapshot reads: windowed curves, slot series, trends,
late accesses) equal one process's, however the timed stream is cut, into partitions and batches."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.core import kernel_layout as KL
from kvset.core.analyzer import Analyzer
from kvset.core.partial_stack import PartitionAnalyzer, empty_stack
from kvset.core.partial_stack import array_batch as batch_of
from kvset.core.partial_stack_merge import as_root, merge
from kvset.core.stack_distance import StackDistanceAnalyzer
from kvset.distributed.result import MergedAnalysis
from kvset.units import DEFAULT_UNITS
from tests.support.merge_tree import merge_in_random_tree

WINDOWS = (1.0, 60.0, 300.0, 3600.0, 7200.0)


@st.composite
def timed_traces(draw):
    """Keys, tokens and timestamps (in order, shuffled, or in order with late stragglers; over seconds to
    hours, so slots fall out of both rings), and cut points: between partitions and between batches."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 600))
    alphabet = draw(st.sampled_from([2, 10, 60, 400]))
    keys = (rng.integers(0, alphabet, n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
    tokens = rng.integers(1, 40, n)
    span = draw(st.sampled_from([0.5, 30.0, 500.0, 10_000.0, 50_000.0]))
    style = draw(st.sampled_from(["ordered", "shuffled", "stragglers", "steps"]))
    ts = np.sort(rng.uniform(0, span, n))
    if style == "shuffled":
        ts = rng.permutation(ts)
    elif style == "stragglers":
        late = rng.random(n) < 0.1
        ts[late] -= rng.uniform(0, span / 3, int(late.sum()))
    elif style == "steps":  # many accesses per slot: cuts fall inside slots
        ts = np.floor(ts / max(1.0, span / 20))
    starts = np.unique(np.concatenate([[0], np.flatnonzero(rng.random(n) < 0.25)]))
    # cut anywhere, or (reverse order: a request is reversed within one batch) at request starts only
    at = np.arange(n + 1) if draw(st.booleans()) else np.append(starts, n)
    cuts = sorted(set(rng.choice(at, draw(st.integers(0, 9))).tolist()))
    batch_cuts = set(rng.choice(at, draw(st.integers(0, 6))).tolist())
    return keys, tokens, ts, starts, [0, *cuts, n], batch_cuts


def _batches(lo, hi, cuts):
    bounds = [lo, *sorted(c for c in cuts if lo < c < hi), hi]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _starts_in(starts, a, b):
    return starts[(starts >= a) & (starts < b)] - a


def _partition(keys, tokens, ts, lo, hi, horizon, cuts, starts=None, order="forward"):
    starts = np.zeros(0, int) if starts is None else starts
    if lo == hi:
        return empty_stack(horizon)
    p = PartitionAnalyzer(horizon, order)
    for a, b in _batches(lo, hi, cuts):
        p.feed_batch(batch_of(keys[a:b], tokens[a:b], _starts_in(starts, a, b), ts[a:b]))
    return p.state()


def _same_curve(c, m, split_exact):
    assert np.array_equal(c.capacities, m.capacities)
    assert np.array_equal(c.block_hits, m.block_hits)
    assert np.array_equal(c.token_hits, m.token_hits)
    assert (c.accesses, c.tokens, c.window_seconds) == (m.accesses, m.tokens, m.window_seconds)
    if split_exact:
        assert (c.beyond_horizon_blocks, c.beyond_horizon_tokens) == (
            m.beyond_horizon_blocks,
            m.beyond_horizon_tokens,
        )


def _misses_together(counts):
    """The counters with the misses' split (first access or beyond the horizon) summed."""
    c = np.array(counts, dtype=np.int64, copy=True)
    c[:, KL.C_FIRST_TIME] += c[:, KL.C_BEYOND]
    c[:, KL.C_FIRST_TIME_TOKENS] += c[:, KL.C_BEYOND_TOKENS]
    c[:, [KL.C_BEYOND, KL.C_BEYOND_TOKENS]] = 0
    return c


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    timed_traces(),
    st.sampled_from([3, 40, 1000]),
    st.sampled_from(["forward", "reverse"]),
    st.integers(0, 2**32 - 1),
)
def test_merged_windows_equal_one_process_windows(trace, horizon, order, seed):
    keys, tokens, ts, starts, bounds, batch_cuts = trace
    if order == "reverse" and any(c not in starts for c in [*bounds[1:-1], *batch_cuts] if 0 < c < len(keys)):
        order = "forward"  # a cut inside a request: only forward order takes it
    whole = Analyzer(horizon=horizon, order=order)
    for a, b in _batches(0, len(keys), batch_cuts):
        whole.feed(keys[a:b], tokens=tokens[a:b], request_starts=_starts_in(starts, a, b), timestamps=ts[a:b])
    parts = [  # as Dask moves them between processes: pickled (the rings with only their used rows)
        pickle.loads(pickle.dumps(_partition(keys, tokens, ts, lo, hi, horizon, batch_cuts, starts, order)))
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    # as the driver merges: the root keeps no stack or firsts (nor their slots)
    root = merge_in_random_tree(
        parts, merge, np.random.default_rng(seed), lambda a, b: merge(a, b, root=True)
    )
    merged = MergedAnalysis(as_root(root), order, DEFAULT_UNITS)
    # nothing forgotten at the horizon: the split of the misses is exact too (else as in the all-time
    # histogram, kvset.core.partial_stack)
    split_exact = whole.forgotten_blocks == 0
    assert merged.late_accesses == whole.late_accesses
    assert (merged.first_time_at, merged.last_time_at) == (whole.first_time_at, whole.last_time_at)
    assert merged.requests == whole.requests
    for window in WINDOWS:
        _same_curve(whole.curve(window=window), merged.curve(window=window), split_exact)
    for coarse in (False, True):
        for seconds in (60.0, 3600.0, 10**6):
            s, m = whole.slot_series(seconds, coarse), merged.slot_series(seconds, coarse)
            assert (s.width, s.end_slot) == (m.width, m.end_slot)
            assert np.array_equal(s.blocks, m.blocks) and np.array_equal(s.tokens, m.tokens)
            assert np.array_equal(s.requests, m.requests)
            if split_exact:
                assert np.array_equal(s.counts, m.counts)
            else:
                assert np.array_equal(_misses_together(s.counts), _misses_together(m.counts))
    for seconds in (10.0, 60.0, 600.0):
        ours, theirs = (
            merged.consecutive_window_curves(seconds, 6),
            whole.consecutive_window_curves(seconds, 6),
        )
        assert len(ours) == len(theirs)
        for c, m in zip(theirs, ours, strict=True):
            _same_curve(c, m, split_exact)


def test_a_later_partition_stamped_before_the_earlier_one_counts_late_in_its_newest_slot():
    keys = np.arange(6, dtype=np.uint64)
    a = _partition(keys, np.ones(6, int), np.array([100.0, 101, 102, 0, 0, 0]), 0, 3, 10, set())
    b = _partition(keys, np.ones(6, int), np.array([100.0, 101, 102, 0, 1, 102]), 3, 6, 10, set())
    m = MergedAnalysis(merge(a, b), "forward", DEFAULT_UNITS)
    assert m.late_accesses == 2  # stamped at 0 and 1, after slot 102
    s = m.slot_series(3.0)
    assert s.end_slot == 102 and s.accesses.tolist() == [1, 1, 4]


def test_a_ring_pickles_with_its_used_rows_only():
    keys = np.arange(5000, dtype=np.uint64) % 700
    state = _partition(keys, np.ones(5000, int), np.linspace(0.0, 9.5, 5000), 0, 5000, 1 << 22, {2500})
    for ring in (state.windows.fine, state.windows.coarse):
        back = pickle.loads(pickle.dumps(ring))
        assert (back.width, back.current) == (ring.width, ring.current)
        for name in ("blocks", "tokens", "counts", "requests", "ids"):
            got, want = getattr(back, name), getattr(ring, name)
            assert got.dtype == want.dtype and np.array_equal(got, want), name
    # 10 of the fine ring's 361 rows used, 1 of the coarse ring's 121
    assert len(pickle.dumps(state.windows.fine)) < state.windows.fine.nbytes() / 20


def test_a_merged_analysis_takes_no_more_accesses():
    m = MergedAnalysis(empty_stack(8), "forward", DEFAULT_UNITS)
    assert isinstance(m, StackDistanceAnalyzer)  # every name the snapshot reads off an analyzer
    assert m.curve(window=60.0).accesses == 0 and m.last_time_at is None and m.late_accesses == 0
    with pytest.raises(TypeError, match="no more accesses"):
        m.feed(np.arange(3, dtype=np.uint64))
