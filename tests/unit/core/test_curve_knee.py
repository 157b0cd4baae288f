"""The knee of a hit-rate curve: past it, doubling the capacity gains less than one point.

Checked against the definition applied to a naive LRU replay at every capacity (no HitRateCurve
involved), and on shapes whose knee is known by construction."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.core.analyzer import Analyzer
from kvset.core.curve import KNEE_MIN_GAIN
from kvset.core.naive import naive_curve


def curve_of(keys, horizon: int = 1 << 22):
    a = Analyzer(horizon=horizon)
    a.feed(np.asarray(keys, dtype=np.uint64), tokens=1, timestamps=0.0)
    return a.curve()


def naive_knee(keys, min_gain: float = KNEE_MIN_GAIN) -> int | None:
    """The definition, literally: the smallest C such that every C' >= C gains < min_gain by doubling."""
    n = len(keys)
    distinct = len(set(keys))
    hits = naive_curve(keys, range(1, 2 * distinct + 2))
    rate = {c: Fraction(h, n) for c, (h, _) in hits.items()}  # exact: a gain of exactly min_gain is steep
    top = max(rate)

    def gain(c: int) -> Fraction:
        return rate[min(2 * c, top)] - rate[c]

    steep = [c for c in range(1, distinct + 1) if gain(c) >= Fraction(str(min_gain))]
    return None if not steep else max(steep) + 1


def test_a_loop_over_n_blocks_has_its_knee_at_n():
    # LRU misses everything below n blocks, hits everything but the first pass from n on
    n = 300
    keys = list(range(n)) * 20
    c = curve_of(keys)
    assert c.knee() == n
    assert c.hit_rate(n) - c.hit_rate(n // 2) > 0.9  # the cliff it marks


def test_the_flat_start_of_a_curve_does_not_make_a_knee():
    # a hot set of 50 blocks behind a cold loop of 2,000: flat from 1 block, then a rise at 2,050
    rng = np.random.default_rng(1)
    keys = [int(k) for k in np.concatenate([np.arange(2000) + 1000, rng.integers(0, 50, 2000)])] * 5
    c = curve_of(keys)
    knee = c.knee()
    assert knee is not None and knee > 1000  # past the last steep doubling, not at 1 block
    assert c.hit_rate(2 * knee) - c.hit_rate(knee) < KNEE_MIN_GAIN


def test_no_reuse_means_no_knee():
    assert curve_of(list(range(500))).knee() is None
    assert curve_of([]).knee() is None


@settings(max_examples=40, deadline=None)
@given(
    keys=st.lists(st.integers(0, 60), min_size=1, max_size=300),
    min_gain=st.sampled_from([0.005, 0.01, 0.05]),
)
def test_the_knee_is_the_definition_applied_to_a_naive_replay(keys, min_gain):
    assert curve_of(keys).knee(min_gain=min_gain) == naive_knee(keys, min_gain)


def test_a_knee_past_the_horizon_is_not_claimed():
    # a loop of 1,000 blocks seen through a horizon of 400: its cliff lies beyond what is tracked
    keys = list(range(1000)) * 5
    c = curve_of(keys, horizon=400)
    assert c.knee() is None
    assert curve_of(keys, horizon=4000).knee() == 1000


def test_a_windowed_curve_reads_its_knee_on_its_grid():
    a = Analyzer()
    keys = np.asarray(list(range(300)) * 20, dtype=np.uint64)
    a.feed(keys, tokens=1, timestamps=np.linspace(0, 10, len(keys)))
    windowed = a.curve(window=60)
    knee = windowed.knee()
    assert knee is not None and knee in set(windowed.capacities.tolist())
    assert knee >= 300  # an upper bound on a grid: never before the true cliff


def test_a_gain_of_exactly_the_threshold_counts_as_steep():
    # 14/20 - 13/20 is 0.05 exactly, 0.04999... in floats (found by hypothesis)
    keys = [0] * 14 + [1, 3, 4, 5, 0, 2]
    assert curve_of(keys).knee(min_gain=0.05) == naive_knee(keys, min_gain=0.05) == 5


def _knee_by_definition(curve, unit: str = "blocks") -> int | None:
    """The knee of an all-time curve (every capacity 1..top) read one capacity at a time, top down, in
    exact fractions: the last capacity whose doubling gains min_gain (a doubling past the horizon up to
    the infinite-cache hits), plus one."""
    hits = [int(h) for h in (curve.block_hits if unit == "blocks" else curve.token_hits)]
    total = curve.accesses if unit == "blocks" else curve.tokens
    top = len(hits)
    for c in range(top, 0, -1):
        doubled = curve.infinite_capacity_hits(unit) if 2 * c > curve.horizon else hits[min(2 * c, top) - 1]
        if Fraction(doubled - hits[c - 1], total) >= Fraction(str(KNEE_MIN_GAIN)):
            return None if c >= top else c + 1
    return None


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([2_000, 70_000]), st.sampled_from([1_000, 150_000]))
def test_the_knee_of_a_curve_longer_than_a_search_chunk(seed, loop, far):
    """The knee is looked for from the top a chunk of capacities at a time (kvset.core.curve): curves of
    up to hundreds of thousands of capacities, the knee in the top chunk or chunks below it (a few
    blocks read again past `far` new ones make a long flat tail), at a horizon above the distinct
    blocks and at one a doubling reaches past."""
    rng = np.random.default_rng(seed)
    hot = rng.integers(loop, loop + 500, 3_000)
    keys = np.concatenate([np.tile(np.arange(loop), 6), hot, np.arange(10**7, 10**7 + far), np.arange(40)])
    assert curve_of(keys).capacities[-1] >= far  # the tail reaches that far
    for horizon in (1 << 22, int(1.5 * loop)):
        a = Analyzer(horizon=horizon)
        a.feed(keys.astype(np.uint64), tokens=rng.integers(1, 20, len(keys)), timestamps=0.0)
        c = a.curve()
        for unit in ("blocks", "tokens"):
            assert c.knee(unit) == _knee_by_definition(c, unit)
