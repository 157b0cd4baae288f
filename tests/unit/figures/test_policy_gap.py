"""The policy gap read off an LRU curve and Belady MIN's of the same accesses."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_curve, naive_min_curve
from kvset.core.opt import opt_histogram
from kvset.figures.policy_gap import policy_gap
from tests.support.toy import toy_keys


def curves(keys, tokens=None):
    a = Analyzer()
    a.feed(np.asarray(keys, dtype=np.uint64), tokens=tokens, timestamps=0.0)
    return a.curve(), opt_histogram(np.asarray(keys, dtype=np.uint64), tokens).curve()


@given(st.lists(st.integers(0, 9), min_size=1, max_size=80), st.sampled_from(["coverage", "absolute"]))
def test_min_never_needs_more_capacity_and_never_hits_less(keys, mode):
    lru, opt = curves(keys)
    targets = (0.2, 0.5, 0.9, 1.0)
    gap = policy_gap(lru, opt, {mode: targets}, capacity=3, capacity_source="chosen")
    for g in gap.for_mode(mode):
        assert g.lru_blocks == lru.working_set(g.target, mode=mode) and g.opt_blocks == opt.working_set(
            g.target, mode=mode
        )
        if g.lru_blocks is not None:  # MIN reaches whatever LRU reaches, with no more capacity
            assert g.opt_blocks is not None and 0 <= g.gap_blocks == g.lru_blocks - g.opt_blocks
            assert g.ratio is None if not g.opt_blocks else g.ratio >= 1
    at = gap.at_capacity()
    lru_hits, opt_hits = naive_curve(keys, [3])[3][0], naive_min_curve(keys, [3])[3][0]
    assert (at.lru_block_hit_rate, at.opt_block_hit_rate) == (lru_hits / len(keys), opt_hits / len(keys))
    assert at.block_gap >= 0 and at.token_gap >= 0 and not at.beyond_horizon


def test_toy_trace_gap_at_the_knee_and_without_a_capacity():
    lru, opt = curves(toy_keys())
    gap = policy_gap(lru, opt, {"coverage": (0.95,)})
    assert gap.at_capacity() is None and [h.where for h in gap.hit_rates] == ["knee"]
    knee = gap.at("knee")
    assert knee.capacity_blocks == lru.knee() and knee.lru_block_hit_rate == lru.hit_rate(
        knee.capacity_blocks
    )
    [g] = gap.capacities
    assert g.opt_blocks < g.lru_blocks  # on the article's toy trace foresight saves capacity
