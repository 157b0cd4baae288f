"""Each working set says what it buys: the block and token hit rates at that capacity, which a naive
LRU of that size measures on the same trace, and which reach the target they were sized for."""

from __future__ import annotations

import numpy as np
import pytest

from kvset.core.naive import simulate_lru
from kvset.core.stack_distance import new_analyzer
from kvset.figures.base import Sizes
from kvset.figures.working_sets import row_json, working_set_row
from kvset.units import StreamUnits


def test_the_hit_rates_at_a_working_set_are_a_naive_lrus_of_that_size():
    rng = np.random.default_rng(11)
    keys = rng.zipf(1.2, 30_000) % 4_000
    tokens = rng.integers(1, 17, len(keys))
    a = new_analyzer(StreamUnits(16, "default"))
    a.feed(keys.astype(np.uint64), tokens=tokens)
    curve = a.curve()
    for target, mode in ((0.95, "coverage"), (0.5, "absolute"), (0.99, "coverage")):
        row = working_set_row(curve, "all", target, mode, Sizes(16, None), pool=None)
        assert row.capacity_blocks
        hits, hit_tokens = simulate_lru(keys.tolist(), row.capacity_blocks, tokens.tolist())
        assert row.block_hit_rate == pytest.approx(hits / len(keys))
        assert row.token_hit_rate == pytest.approx(hit_tokens / tokens.sum())
        reached = row.block_hit_rate / (curve.infinite_capacity_hit_rate() if mode == "coverage" else 1)
        assert reached >= target
        assert row_json(row, Sizes(16, None))["block_hit_rate"] == row.block_hit_rate


def test_a_target_not_reached_has_no_hit_rate():
    a = new_analyzer(StreamUnits(16, "default"))
    a.feed(np.arange(1_000, dtype=np.uint64))  # nothing is re-read: 50 % absolute is out of reach
    row = working_set_row(a.curve(), "all", 0.5, "absolute", Sizes(16, None), pool=None)
    assert row.capacity_blocks is None and row.block_hit_rate is None and row.token_hit_rate is None
