"""The sampled analysis in partitions, merged in order, gives one process's estimate for the same seed."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.core.partial_sample import partial_sample
from kvset.core.partial_sample_merge import merge
from kvset.core.partial_stack import array_units
from kvset.core.stack_distance import Sampling, new_analyzer
from tests.support.merge_tree import merge_in_random_tree


@st.composite
def sampled_traces(draw):
    """Requests re-reading shared prefixes (so heads are shared and boosted), random request starts."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 3000))
    alphabet = draw(st.sampled_from([5, 50, 500, 5000]))
    keys = (rng.integers(0, alphabet, n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
    starts = np.unique(
        np.concatenate([[0], np.flatnonzero(rng.random(n) < draw(st.sampled_from([0.01, 0.1])))])
    )
    tokens = rng.integers(1, 40, n) if draw(st.booleans()) else 16
    return keys, tokens, starts.astype(np.int64), rng


@pytest.fixture(autouse=True, scope="module")
def _intervals_of_tiny_samples_too():
    """These traces are small: compare their intervals too, which a sample under MIN_SAMPLE_BLOCKS
    blocks otherwise drops."""
    import kvset.core.curve as curve_module

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(curve_module, "MIN_SAMPLE_BLOCKS", 0)
        yield


def _one_process(keys, tokens, starts, horizon, rate, seed, order):
    a = new_analyzer(
        array_units(tokens), horizon, order, Sampling(rate=rate, seed=seed, watch_positions=False)
    )
    a.feed(keys, tokens=tokens, request_starts=starts, timestamps=0.0)
    return a


def _assert_same_estimate(merged, a):
    c, m = a.curve(), merged.curve()
    for name in ("capacities", "block_hits", "token_hits"):
        assert np.array_equal(getattr(m, name), getattr(c, name)), name
    assert m.sample.tracked_blocks == c.sample.tracked_blocks
    for name in ("block_hit_rate", "token_hit_rate", "block_coverage", "token_coverage"):
        assert np.array_equal(getattr(m.errors, name), getattr(c.errors, name)), name
    assert (m.beyond_horizon_blocks, m.beyond_horizon_tokens) == (
        c.beyond_horizon_blocks,
        c.beyond_horizon_tokens,
    )
    assert merged.sampling == a.sampling
    assert (merged.first_time, merged.beyond_horizon, merged.requests) == (
        a.first_time,
        a.beyond_horizon,
        a.requests,
    )


@settings(max_examples=120, deadline=None)
@given(
    sampled_traces(),
    st.sampled_from([0.01, 0.05, 0.2, 0.5]),  # rates whose band weights are binary fractions
    st.integers(0, 7),
    st.sampled_from([8, 100, 1 << 20]),
    st.sampled_from(["forward", "reverse"]),
)
def test_partitions_of_whole_requests_merge_to_the_one_process_estimate(trace, rate, seed, horizon, order):
    keys, tokens, starts, rng = trace
    n = len(keys)
    whole = _one_process(keys, tokens, starts, horizon, rate, seed, order)
    cuts = sorted({int(s) for s in starts[1:] if rng.random() < 0.3})
    bounds = [0, *cuts, n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        tok = tokens if np.ndim(tokens) == 0 else tokens[lo:hi]
        rel = starts[(starts >= lo) & (starts < hi)] - lo
        parts.append(partial_sample(keys[lo:hi], tok, horizon, rate, seed, order, rel))
    _assert_same_estimate(merge_in_random_tree(parts, merge, rng), whole)


@settings(max_examples=60, deadline=None)
@given(sampled_traces(), st.sampled_from([0.01, 0.05]), st.integers(0, 7))
def test_cuts_inside_requests_carry_the_position(trace, rate, seed):
    """A cut inside a request: the next partition's accesses keep their positions (and position bands)."""
    keys, tokens, starts, rng = trace
    n = len(keys)
    whole = _one_process(keys, tokens, starts, 1 << 20, rate, seed, "forward")
    bounds = [0, *sorted(set(rng.integers(1, n + 1, 6).tolist()) - {n}), n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        begun = int(starts[np.searchsorted(starts, lo, side="right") - 1])
        rel = starts[(starts >= lo) & (starts < hi)] - lo
        tok = tokens if np.ndim(tokens) == 0 else tokens[lo:hi]
        parts.append(partial_sample(keys[lo:hi], tok, 1 << 20, rate, seed, "forward", rel, carry=lo - begun))
    _assert_same_estimate(merge_in_random_tree(parts, merge, rng), whole)


def test_a_rate_without_binary_weights_agrees_to_rounding():
    """At 3 % the weights (33.33...) are not binary fractions: sums in another order may differ in the last bits."""
    rng = np.random.default_rng(5)
    keys = rng.zipf(1.2, 40_000).astype(np.uint64)
    starts = np.arange(0, 40_000, 40)
    whole = _one_process(keys, 16, starts, 1 << 20, 0.03, 1, "forward").curve()
    parts = [
        partial_sample(keys[lo : lo + 8000], 16, 1 << 20, 0.03, 1, "forward", np.arange(0, 8000, 40))
        for lo in range(0, 40_000, 8000)
    ]
    merged = parts[0]
    for p in parts[1:]:
        merged = merge(merged, p)
    m = merged.curve()
    assert np.array_equal(m.capacities, whole.capacities)
    assert np.max(np.abs(m.block_hits - whole.block_hits)) <= 1
    assert np.allclose(m.errors.block_hit_rate, whole.errors.block_hit_rate, rtol=1e-9, atol=1e-15)
