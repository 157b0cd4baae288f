"""The sampled analyzer: the filter, rate 1 against the naive LRU replay, fixed size, its windows."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvset.core import sampling_kernel as SK
from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_curve, naive_stack_distances, reverse_within_requests
from kvset.core.sampling import SampledAnalyzer
from kvset.core.sampling_curve import working_set_bounds
from kvset.core.sampling_filter import sample_filter
from kvset.core.sampling_rates import band_rates, head_shifts
from kvset.workload import WorkloadConfig, generate


@st.composite
def traces(draw):
    alphabet = draw(st.sampled_from([1, 3, 20, 60, 300]))
    n = draw(st.integers(0, 400))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        keys = rng.integers(0, alphabet, n).astype(np.uint64)
    else:
        pool = rng.integers(0, 2**63, alphabet, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(
            1
        )
        keys = pool[rng.integers(0, alphabet, n)]
    tokens = rng.integers(1, 600, n)
    starts = np.unique(np.concatenate([[0], np.flatnonzero(rng.random(n) < 0.2)])) if n else np.zeros(0, int)
    cuts = sorted(int(s) for s in starts if rng.random() < 0.4)
    return keys, tokens, starts, cuts


def _feed_in_batches(a, keys, tokens, starts, cuts, stamps=None):
    bounds = [0, *[c for c in cuts if 0 < c < len(keys)], len(keys)]
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        rel = starts[(starts >= lo) & (starts < hi)] - lo
        ts = stamps[lo:hi] if stamps is not None else float(lo)
        a.feed(keys[lo:hi], tokens=tokens[lo:hi], request_starts=rel, timestamps=ts)


# -- the filter ----------------------------------------------------------------------------------
@given(st.floats(0.02, 0.9), st.integers(0, 2**32), st.integers(0, 2**32))
def test_filter_keeps_each_key_with_probability_rate(rate, seed, keys_seed):
    keys = np.random.default_rng(keys_seed).integers(0, 2**63, 4000, dtype=np.int64).astype(np.uint64)
    kept = int(sample_filter(keys, rate, seed).sum())
    sd = math.sqrt(len(keys) * rate * (1 - rate))
    assert abs(kept - len(keys) * rate) <= 6 * sd + 1  # six standard deviations: fails about 1 in 10^9


@given(st.integers(0, 2**32), st.floats(0.01, 1.0))
def test_filter_is_a_function_of_key_and_seed(seed, rate):
    keys = np.arange(5000, dtype=np.uint64)
    first = sample_filter(keys, rate, seed)
    assert np.array_equal(first, sample_filter(keys.copy(), rate, seed))
    # a key's verdict does not depend on the other keys around it
    assert np.array_equal(first[::-1], sample_filter(keys[::-1].copy(), rate, seed))
    assert sample_filter(keys, 1.0, seed).all()


def test_seeds_pick_different_blocks_and_dense_ids_spread():
    keys = np.arange(20_000, dtype=np.uint64)  # dense ids, as Mooncake traces have
    a, b = sample_filter(keys, 0.1, 1), sample_filter(keys, 0.1, 2)
    assert 0.05 < (a & b).sum() / a.sum() < 0.2  # independent: about 10 % in common
    # kept ids are spread over the whole range, not bunched
    halves = [a[: len(a) // 2].sum(), a[len(a) // 2 :].sum()]
    assert abs(halves[0] - halves[1]) < 0.1 * sum(halves)


def test_analyzer_tracks_exactly_the_filtered_blocks_past_the_request_head():
    rng = np.random.default_rng(5)
    tail = rng.integers(0, 2**63, 3000, dtype=np.int64).astype(np.uint64)
    head = np.full(256, 7, dtype=np.uint64)  # positions 0..255: one block, always kept at position 0
    a = SampledAnalyzer(sample_rate=0.05, seed=9)
    a.feed(np.concatenate([head, tail]), request_starts=[0], timestamps=0.0)
    assert a.tracked_blocks == 1 + int(sample_filter(tail, 0.05, 9).sum())


# -- rate 1: every block, so the distances and the curve are exact ------------------------------
@given(traces(), st.integers(1, 40), st.sampled_from(["forward", "reverse"]), st.integers(1, 16))
def test_rate_one_equals_naive_lru_at_every_capacity(trace, horizon, order, initial):
    keys, tokens, starts, cuts = trace
    a = SampledAnalyzer(sample_rate=1.0, horizon=horizon, order=order, initial_tracked=initial)
    assert isinstance(a, SampledAnalyzer)
    _feed_in_batches(a, keys, tokens, starts, cuts)
    if order == "reverse" and len(keys):
        perm = np.array(reverse_within_requests(range(len(keys)), starts.tolist()))
        keys, tokens = keys[perm], tokens[perm]
    c = a.curve()
    naive = naive_curve(keys.tolist(), range(1, horizon + 1), tokens.tolist())
    for C in range(1, horizon + 1):  # the grid is exact up to 256 blocks
        assert (c.hits(C), c.hits(C, "tokens")) == naive[C], f"C={C}"
    assert (c.accesses, c.tokens) == (len(keys), int(tokens.sum()))
    assert c.estimate and c.sample.rate == 1.0
    assert not np.any(c.errors.block_hit_rate)  # a sample of everything has no sampling error
    true_d = np.array(naive_stack_distances(keys.tolist()), dtype=np.int64)
    assert a.first_time == int(np.count_nonzero(true_d == 0))
    assert a.beyond_horizon == int(np.count_nonzero(true_d > horizon))


@given(traces(), st.lists(st.sampled_from([None, 1, 16, 17]), min_size=1, max_size=6))
def test_rate_one_token_hits_when_batches_give_one_token_count_then_another(trace, per_batch):
    """A batch's tokens as one count (the same for all its accesses), the same or another count per
    batch, or per access (None): the token hits stay the naive replay's, also after a change."""
    keys, _, starts, cuts = trace
    bounds = [0, *[c for c in cuts if 0 < c < len(keys)], len(keys)]
    a = SampledAnalyzer(sample_rate=1.0, horizon=30)
    tokens = []
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        count = per_batch[i % len(per_batch)]
        tok = np.arange(lo, hi) % 7 + 1 if count is None else count
        tokens += list(tok) if count is None else [count] * (hi - lo)
        rel = starts[(starts >= lo) & (starts < hi)] - lo
        a.feed(keys[lo:hi], tokens=tok, request_starts=rel, timestamps=float(lo))
    c = a.curve()
    naive = naive_curve(keys.tolist(), range(1, 31), tokens)
    for C in range(1, 31):
        assert (c.hits(C), c.hits(C, "tokens")) == naive[C], f"C={C}"
    assert c.tokens == sum(tokens)


def test_rate_one_equals_the_exact_analyzer_at_its_grid_on_the_workload():
    b = generate(200_000, WorkloadConfig(seed=4))
    exact, sampled = Analyzer(), SampledAnalyzer(sample_rate=1.0)
    for a in (exact, sampled):
        a.feed_batch(b)
    e, s = exact.curve(), sampled.curve()
    assert np.array_equal(e.hit_rates(s.capacities), s.hit_rates(s.capacities))
    assert np.array_equal(e.hit_rates(s.capacities, "tokens"), s.hit_rates(s.capacities, "tokens"))
    assert (sampled.first_time, sampled.rereferences, sampled.requests) == (
        exact.first_time,
        exact.rereferences,
        exact.requests,
    )
    assert s.working_set(0.95) >= e.working_set(0.95)  # the grid's step, never below


def test_rate_one_windows_equal_the_slots_of_the_true_distances():
    b = generate(120_000, WorkloadConfig(seed=2, requests_per_second=20.0))
    d = Analyzer().feed(b.keys, request_starts=b.request_starts, timestamps=0.0, return_distances=True)
    a = SampledAnalyzer(sample_rate=1.0)
    for lo in range(0, len(b), 7_000):  # batches that cut requests' time slots apart
        part = b.subset(np.isin(np.arange(len(b)), np.arange(lo, min(lo + 7_000, len(b)))))
        a.feed_batch(part)
    series = a.slot_series(a.fine_span_seconds)
    slot = np.floor(b.timestamps).astype(np.int64)
    first = series.end_slot - len(series) + 1
    expected_accesses = np.bincount(slot - first, minlength=len(series))
    assert np.array_equal(series.accesses, expected_accesses)
    hits_at_100 = np.bincount(slot - first, weights=(d > 0) & (d <= 100), minlength=len(series))
    assert np.array_equal(series.block_hits_at(100), hits_at_100)
    window = a.curve(window=30.0)
    in_window = slot > series.end_slot - 30
    assert window.accesses == int(in_window.sum())
    assert window.hits(100) == int(((d > 0) & (d <= 100) & in_window).sum())
    assert window.estimate


def test_rate_one_window_tokens_equal_the_exact_windows_before_and_after_tokens_vary():
    # the first batches have the same tokens on every access (the rings' tokens are then left
    # unwritten and filled from the blocks when read); the last ones vary
    b = generate(60_000, WorkloadConfig(seed=4, requests_per_second=20.0))
    tokens = np.random.default_rng(4).integers(1, 17, len(b))
    exact, sampled = Analyzer(), SampledAnalyzer(sample_rate=1.0)
    for lo in range(0, len(b), 10_000):
        hi = min(lo + 10_000, len(b))
        rel = b.request_starts[(b.request_starts >= lo) & (b.request_starts < hi)] - lo
        tok = 16 if lo < 30_000 else tokens[lo:hi]
        for a in (exact, sampled):
            a.feed(b.keys[lo:hi], tokens=tok, request_starts=rel, timestamps=b.timestamps[lo:hi])
        if lo in (20_000, 50_000):  # once with the tokens the same so far, once after they varied
            for window in (30.0, 600.0):
                e, s = exact.curve(window=window), sampled.curve(window=window)
                assert s.tokens == e.tokens
                assert np.array_equal(
                    s.hit_rates(s.capacities, "tokens"), e.hit_rates(s.capacities, "tokens")
                )
            es, ss = exact.slot_series(60.0), sampled.slot_series(60.0)
            assert np.array_equal(ss.tokens, es.tokens)


# -- fixed size ----------------------------------------------------------------------------------
@given(st.integers(1, 300), st.integers(0, 2**32), st.sampled_from([64, 1000, 6000]))
def test_fixed_size_never_tracks_more_than_its_size(size, seed, alphabet):
    rng = np.random.default_rng(seed)
    a = SampledAnalyzer(sample_size=size, seed=seed, initial_tracked=4)
    most = 0
    for _ in range(6):
        n = int(rng.integers(1, 3000))
        keys = rng.integers(0, alphabet, n).astype(np.uint64)
        a.feed(keys, request_starts=np.flatnonzero(rng.random(n) < 0.05), timestamps=0.0)
        most = max(most, a.tracked_blocks)
    assert most <= size
    c = a.curve()
    assert c.accesses == a.accesses and c.sample.size == size
    if len(np.unique(keys)) > 2 * size:
        assert a.sample_rate < 1.0


@given(st.integers(8, 200), st.integers(0, 2**32))
def test_a_fixed_size_sample_holds_only_blocks_its_lowered_rates_keep(size, seed):
    # the limit falls in the middle of a batch whose sampled accesses were gathered at the old
    # rates: the ones after the fall that the new rates drop must not enter the sample
    from kvset.core.sampling_slots import live_priorities

    rng = np.random.default_rng(seed)
    a = SampledAnalyzer(sample_size=size, seed=seed, initial_tracked=4)
    for _ in range(3):
        n = 5_000
        a.feed(
            rng.integers(0, 50_000, n).astype(np.uint64), request_starts=np.arange(0, n, 40), timestamps=0.0
        )
    s = a._s
    priorities = live_priorities(a._salt, a._shifts, *s.slots(), int(s.meta[SK.S_NOW]))
    assert len(priorities) == a.tracked_blocks <= size
    assert np.all(priorities <= np.uint64(a._limit))


def test_fixed_size_rate_falls_as_the_stream_grows_and_the_curve_holds():
    b = generate(400_000, WorkloadConfig(seed=6))
    exact = Analyzer()
    exact.feed_batch(b)
    a = SampledAnalyzer(sample_size=3000, seed=1)
    rates = []
    for lo in range(0, len(b), 50_000):
        a.feed(
            b.keys[lo : lo + 50_000],
            request_starts=b.request_starts[(b.request_starts >= lo) & (b.request_starts < lo + 50_000)] - lo,
            timestamps=float(lo),
        )
        rates.append(a.sample_rate)
        assert a.tracked_blocks <= 3000
    assert rates == sorted(rates, reverse=True) and rates[-1] < 0.2
    caps = exact.curve().log_capacities(20)
    assert np.abs(a.curve().hit_rates(caps) - exact.curve().hit_rates(caps)).mean() < 0.02


# -- the estimate says what it is -----------------------------------------------------------------
def test_estimates_are_labelled_with_their_sample_and_error():
    b = generate(200_000, WorkloadConfig(seed=3))
    a = SampledAnalyzer(sample_rate=0.05, seed=11)
    a.feed_batch(b)
    c = a.curve()
    assert c.estimate and (c.sample.rate, c.sample.seed, c.sample.size) == (0.05, 11, None)
    assert c.sample.tracked_blocks == a.tracked_blocks and 0.05 < c.sample.tracked_share < 1
    err = c.hit_rate_stderrs(c.log_capacities(10))
    assert err is not None and np.all(err >= 0) and err.max() > 0
    assert a.curve(window=60).estimate and a.consecutive_window_curves(10, 3)[0].estimate
    assert Analyzer().sampling is None and not Analyzer().curve().estimate
    low, high = working_set_bounds(c, 0.9)
    assert low <= c.working_set(0.9) <= high


def test_head_rates_are_boosted_powers_of_two_capped_at_one():
    rates = band_rates(2**64 // 100 - 1, head_shifts(8))  # rate 1 %
    assert list(rates[:9]) == pytest.approx([0.64, 0.64, 0.64, 0.16, 0.16, 0.08, 0.04, 0.02, 0.01])
    assert rates[-1] == pytest.approx(0.01) and np.all(np.diff(rates) <= 0)
    rates_2pct = band_rates(2**64 // 50 - 1, head_shifts(7))  # the boosted rates stay put at another rate
    assert list(rates_2pct[:7]) == pytest.approx(list(rates[:7])) and rates_2pct[7] == pytest.approx(0.02)
    assert np.all(band_rates(2**64 // 2 - 1, head_shifts(14))[:8] == 1.0)  # capped at one
    rates_01pct = band_rates(2**64 // 1000 - 1, head_shifts(11))  # at a lower rate the boost reaches further
    assert list(rates_01pct[:8]) == pytest.approx(list(rates[:8]), rel=0.25)  # K is rounded
    assert rates_01pct[7] > rates_01pct[8] > rates_01pct[10] > rates_01pct[11] == pytest.approx(0.001)


def test_bad_input_is_refused_as_the_exact_analyzer_refuses_it():
    for kwargs in ({"tokens": -1}, {"timestamps": [float("nan")] * 3}, {"request_starts": [2, 1]}):
        with pytest.raises(ValueError) as exact:
            Analyzer().feed(np.arange(3, dtype=np.uint64), **kwargs)
        with pytest.raises(ValueError) as sampled:
            SampledAnalyzer(sample_rate=0.5).feed(np.arange(3, dtype=np.uint64), **kwargs)
        assert str(exact.value) == str(sampled.value)
    for bad in (
        {"sample_rate": 0.0},
        {"sample_rate": 1.5},
        {"sample_size": 0},
        {"sample_rate": 0.1, "sample_size": 9},
    ):
        with pytest.raises(ValueError):
            SampledAnalyzer(**bad)


@given(
    st.lists(st.floats(0, 50, allow_nan=False), max_size=300),
    st.floats(-1, 51),
    st.integers(0, 300),
    st.integers(-10, 400),
)
def test_the_sorted_search_for_a_slot_end_is_numpy_searchsorted_from_any_guess(stamps, t_end, x, guess):
    from kvset.core.sampling_filter import first_at_or_after_sorted

    stamps = np.sort(np.array(stamps, dtype=np.float64))
    x = min(x, len(stamps))
    expected = x + int(np.searchsorted(stamps[x:], t_end, side="left"))
    assert first_at_or_after_sorted(stamps, x, len(stamps), t_end, guess) == expected


@given(
    st.integers(1, 400),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["sorted", "one step back", "nan", "huge"]),
    st.booleans(),
)
def test_the_gathering_pass_checks_every_timestamp(n, seed, kind, reverse):
    # the check runs inside the filter's chunks (aligned to request positions); every timestamp,
    # whatever chunk it falls in, must count
    from kvset.core.sampling_filter import band_thresholds, gather_batch
    from kvset.core.sampling_rates import MAX_HASH, head_shifts, seed_salt

    rng = np.random.default_rng(seed)
    stamps = np.sort(rng.random(n) * 100)
    bad_at = int(rng.integers(0, n))
    if kind == "one step back" and n > 1:
        bad_at = max(1, bad_at)
        stamps[bad_at] = stamps[bad_at - 1] - 1.0
    elif kind == "nan":
        stamps[bad_at] = np.nan
    elif kind == "huge":
        stamps[bad_at] = 1e300
    starts = np.unique(np.concatenate([[0], np.flatnonzero(rng.random(n) < 0.05)])).astype(np.int64)
    keys = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64)
    found, band, key = (np.empty(n, dtype=t) for t in (np.int64, np.int64, np.uint64))
    thresholds = band_thresholds(np.uint64(MAX_HASH), head_shifts(0))  # rate 1: every access is found
    m, ok, ordered = gather_batch(
        keys, stamps, True, 1e12, starts, reverse, 0, seed_salt(seed), thresholds, found, band, key
    )
    within = bool(np.all((stamps >= -1e12) & (stamps <= 1e12)))
    assert (m, ok) == (n, within)
    if within:
        assert ordered == bool(np.all(np.diff(stamps) >= 0))
    assert np.array_equal(found[:m], np.arange(n)) and np.array_equal(key[:m], keys)
