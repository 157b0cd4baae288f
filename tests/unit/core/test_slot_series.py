"""The per-slot series the churn panel reads, against a naive LRU stack, and what reading it copies."""

import tracemalloc

import numpy as np
import pytest

from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_stack_distances
from tests.support.timed_trace import timed_trace


@pytest.mark.parametrize("seconds", [430, 200])  # the fine ring (360 slots) wrapped; not yet full
def test_each_slot_holds_exactly_its_accesses_and_hits(seconds):
    keys, times = timed_trace(seconds, seed=seconds)
    a = Analyzer(horizon=1 << 12, initial_tracked=1)
    a.feed(keys, timestamps=times)
    series = a.slot_series(300.0)
    distances = np.array(naive_stack_distances(keys.tolist()))
    slot_of = np.floor(times).astype(np.int64)
    first = series.end_slot - len(series) + 1
    for capacity in (1, 4, 16, 64):  # grid capacities: exact there
        hits = series.block_hits_at(capacity)
        for k in range(len(series)):
            inside = slot_of == first + k
            assert series.accesses[k] == inside.sum()
            assert hits[k] == ((distances >= 1) & (distances <= capacity) & inside).sum(), (k, capacity)
    assert series.first_time.sum() == (distances[slot_of >= first] == 0).sum()
    k = len(series) - 3  # one slot's curve, as the churn panel's working set reads the coarse ones
    inside = slot_of == first + k
    assert series.curve(k, k + 1).hits(16) == ((distances >= 1) & (distances <= 16) & inside).sum()
    assert np.array_equal(series.blocks.sum(axis=1), series.rereferences)  # the histograms, copied out


def test_reading_the_churn_series_copies_no_histogram_out_of_the_ring():
    # A live snapshot reads 300 fine slots and the coarse ones every second: copying their
    # histograms out (2 arrays of 300 x ~670 buckets) cost more than everything else it does.
    keys, times = timed_trace(430, seed=3)
    a = Analyzer(horizon=1 << 12, initial_tracked=1)
    a.feed(keys, timestamps=times)
    one_copy = a.fine.blocks[:300].nbytes
    tracemalloc.start()
    try:
        fine = a.slot_series(300.0)
        fine.block_hits_at(64)
        coarse = a.slot_series(a.coarse_span_seconds, coarse=True)
        for k in np.flatnonzero(coarse.accesses).tolist():
            coarse.curve(k, k + 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < one_copy / 4, (peak, one_copy)
