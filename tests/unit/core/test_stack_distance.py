"""One face for both analyzers (StackDistanceAnalyzer), one way to make either (new_analyzer), and
the stream's units given at construction: a batch of another block size is refused, not adopted."""

from __future__ import annotations

import numpy as np
import pytest

from kvset.core.analyzer import Analyzer, MixedBlockSizes
from kvset.core.naive import simulate_lru
from kvset.core.sampling import SampledAnalyzer
from kvset.core.stack_distance import Sampling, StackDistanceAnalyzer, new_analyzer
from kvset.types import AccessBatch
from kvset.units import StreamUnits

UNITS = StreamUnits(32, "event")


@pytest.mark.parametrize("sampling", [None, Sampling(rate=1.0), Sampling(size=10_000, seed=3)])
def test_the_factory_makes_either_analyzer_behind_one_face(sampling):
    a = new_analyzer(UNITS, horizon=1000, order="reverse", sampling=sampling)
    assert isinstance(a, StackDistanceAnalyzer)
    assert isinstance(a, SampledAnalyzer if sampling else Analyzer)
    assert (a.units, a.block_size, a.horizon, a.order) == (UNITS, 32, 1000, "reverse")
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 60, 2000).astype(np.uint64)
    a.feed_batch(AccessBatch(keys, timestamps=1.0))
    c = a.curve()
    # every block of the sample at rate 1 and every block under the size: both exact, as a naive LRU
    for capacity in (1, 7, 30, 60):
        assert c.hits(capacity) == simulate_lru(keys.tolist(), capacity)[0]
    # an access without its own token count covers the stream's block size
    assert a.tokens == 32 * len(keys) and c.token_hits[-1] == 32 * c.block_hits[-1]


@pytest.mark.parametrize("sampling", [None, Sampling(rate=0.5)])
def test_a_batch_of_another_block_size_is_refused_and_the_units_stay(sampling):
    a = new_analyzer(UNITS, sampling=sampling)
    a.feed_batch(AccessBatch(np.arange(4, dtype=np.uint64), timestamps=1.0, block_size=32))
    with pytest.raises(MixedBlockSizes, match="blocks of 16 tokens in a stream of 32-token blocks"):
        a.feed_batch(AccessBatch(np.arange(4, dtype=np.uint64), timestamps=2.0, block_size=16))
    assert a.units == UNITS and a.accesses == 4


def test_a_sampling_says_rate_or_size_not_both_nor_neither():
    assert Sampling.of(None, None) is None
    assert Sampling.of(0.01, None, 5) == Sampling(rate=0.01, seed=5)
    for rate, size in ((None, None), (0.1, 10)):
        with pytest.raises(ValueError, match="not both"):
            Sampling(rate, size)
