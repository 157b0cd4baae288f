"""Cache tiers read off the one-pass curve == a naive multi-level LRU simulation, on random traces."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvset.core.analyzer import Analyzer
from kvset.core.naive import simulate_lru, simulate_tiers
from kvset.figures.curve import in_blocks as tier_blocks
from kvset.figures.tiers import next_tier, plan_tiers, tier_reaches


@st.composite
def traces(draw):
    alphabet = draw(st.sampled_from([2, 5, 12, 40, 150]))
    n = draw(st.integers(0, 300))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    skewed = draw(st.booleans())  # a few hot blocks and a long tail, so that every tier gets hits
    keys = np.minimum(rng.zipf(1.4, n) - 1, alphabet) if skewed else rng.integers(0, alphabet, n)
    return keys.astype(np.uint64), rng.integers(1, 64, n)


def _curve(keys, tokens):
    a = Analyzer(horizon=1 << 16)
    a.feed(keys, tokens=tokens, timestamps=0.0)
    return a.curve()


sizes = st.lists(st.integers(0, 25), min_size=1, max_size=4)


@given(traces(), sizes)
def test_exclusive_tiers_equal_a_demote_on_eviction_simulation(trace, caps):
    keys, tokens = trace
    plan = plan_tiers(_curve(keys, tokens), caps, "exclusive")
    naive = simulate_tiers(keys.tolist(), caps, "exclusive", tokens.tolist())
    assert [(t.block_hits, t.token_hits) for t in plan.tiers] == naive
    n = len(keys)
    for t, (hits, token_hits) in zip(plan.tiers, naive, strict=True):
        assert t.block_hit_rate == pytest.approx(hits / n if n else 0.0)
        assert t.token_hit_rate == pytest.approx(token_hits / tokens.sum() if n else 0.0)
        assert t.exact


@given(traces(), sizes)
def test_inclusive_tiers_equal_one_lru_per_tier_fed_every_access(trace, caps):
    keys, tokens = trace
    caps = sorted(caps)
    plan = plan_tiers(_curve(keys, tokens), caps, "inclusive")
    naive = simulate_tiers(keys.tolist(), caps, "inclusive", tokens.tolist())
    assert [(t.block_hits, t.token_hits) for t in plan.tiers] == naive


@given(
    traces(),
    st.integers(0, 30),
    st.sampled_from(["exclusive", "inclusive"]),
    st.sampled_from([0.5, 0.8, 0.95, 1.0]),
    st.sampled_from(["coverage", "absolute"]),
)
def test_next_tier_is_the_smallest_that_reaches_the_target(trace, first, mode, target, target_mode):
    keys, tokens = trace
    curve = _curve(keys, tokens)
    nxt = next_tier(curve, [first], mode, target, target_mode)
    need = curve.required_hits(target, target_mode)
    total = lambda size: sum(h for h, _ in simulate_tiers(keys.tolist(), [first, size], mode))  # noqa: E731
    if nxt.capacity_blocks is None:  # not reached: not even with every block behind the first tier
        assert total(max(first, len(set(keys.tolist())))) < need or len(keys) == 0
        return
    size = nxt.capacity_blocks
    if size == 0:
        assert simulate_lru(keys.tolist(), first)[0] >= need
        return
    assert total(size) >= need
    assert total(size - 1) < need
    assert nxt.block_hit_rate == pytest.approx(total(size) / len(keys))


def test_tier_shares_and_misses_add_up_to_all_accesses():
    keys = np.array([1, 2, 3, 1, 2, 3, 4, 1, 5, 1], dtype=np.uint64)
    plan = plan_tiers(_curve(keys, np.ones(10, dtype=np.int64)), [1, 2], "exclusive")
    # stack distances: 1, 2, 3 first; then 3, 3, 3; 4 first; then 4; 5 first; then 2
    assert [t.block_hits for t in plan.tiers] == [0, 4]
    assert [t.reach_blocks for t in plan.tiers] == [1, 3]
    assert plan.miss_block_rate == pytest.approx(0.6)
    inclusive = plan_tiers(_curve(keys, np.ones(10, dtype=np.int64)), [2, 4], "inclusive")
    assert [t.block_hits for t in inclusive.tiers] == [1, 4]
    assert inclusive.miss_block_rate == pytest.approx(0.5)


def test_tiers_beyond_the_horizon_are_lower_bounds_and_say_so():
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 60, 2000).astype(np.uint64)
    a = Analyzer(horizon=20)
    a.feed(keys, tokens=1, timestamps=0.0)
    plan = plan_tiers(a.curve(), [10, 10, 10], "exclusive")
    assert [t.exact for t in plan.tiers] == [True, True, False]
    naive = simulate_tiers(keys.tolist(), [10, 10, 10], "exclusive")
    assert [t.block_hits for t in plan.tiers[:2]] == [h for h, _ in naive[:2]]
    assert plan.tiers[2].block_hits <= naive[2][0]


def test_inclusive_tiers_must_grow_and_the_message_says_why():
    with pytest.raises(
        ValueError, match=r"tier 2 \(1,000 blocks\) must be at least as large as tier 1 \(5,000"
    ):
        tier_reaches([5000, 1000], "inclusive")
    assert tier_reaches([5000, 1000], "exclusive") == [5000, 6000]
    with pytest.raises(ValueError, match="tier mode"):
        tier_reaches([1], "victim")
    with pytest.raises(ValueError, match="no tier"):
        tier_reaches([], "exclusive")


def test_tier_sizes_in_bytes_become_whole_blocks():
    gib = 1 << 30
    per_block = 16 * 327_680  # Llama-3.1-70B, 16-token blocks
    assert tier_blocks([80 * gib, 512 * gib], "bytes", per_block) == (16384, 104857)
    assert tier_blocks([1000], "bytes", per_block) == (0,)  # smaller than a block: holds none
    assert tier_blocks([80 * gib], "bytes", None) is None  # block size not known yet
    assert tier_blocks([7, 9], "blocks", None) == (7, 9)
