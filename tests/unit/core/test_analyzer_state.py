"""Compaction, growth, the horizon and the time slots, driven hard on longer traces."""

import numpy as np
import pytest

from kvset.core import kernel_layout as KL
from kvset.core.analyzer import Analyzer
from kvset.core.log_grid import FINE_GRID, WINDOW_GRID, bucket_of
from kvset.core.naive import naive_curve, naive_stack_distances


def _zipf_trace(n, alphabet, seed):
    rng = np.random.default_rng(seed)
    return (np.minimum(rng.zipf(1.2, n), alphabet) + 1000).astype(np.uint64)


def test_compaction_and_growth_keep_distances_exact():
    keys = _zipf_trace(20_000, 3_000, 1)
    a = Analyzer(horizon=1 << 20, initial_tracked=1)
    d = a.feed(keys, timestamps=0.0, return_distances=True)
    assert a._t.meta[KL.M_COMPACTIONS] >= 5
    assert a._t.max_tracked >= len(set(keys.tolist()))
    assert d.tolist() == naive_stack_distances(keys.tolist())


@pytest.mark.parametrize("horizon", [1, 7, 64, 500])
def test_horizon_forgets_lru_and_curve_stays_exact(horizon):
    keys = _zipf_trace(8_000, 2_000, horizon)
    tokens = np.random.default_rng(0).integers(1, 17, len(keys))
    a = Analyzer(horizon=horizon, initial_tracked=1)
    d = a.feed(keys, tokens=tokens, timestamps=0.0, return_distances=True)
    assert a.tracked_blocks <= horizon
    caps = sorted({c for c in (1, 2, horizon // 2, horizon - 1, horizon) if 1 <= c <= horizon})
    naive = naive_curve(keys.tolist(), caps, tokens.tolist())
    c = a.curve()
    for C in caps:
        assert (c.hits(C), c.hits(C, "tokens")) == naive[C]
    # beyond-horizon: exactly the accesses whose true distance exceeds H; first times exactly the
    # distinct blocks (the forgotten set remembers every forgotten block)
    true_d = np.array(naive_stack_distances(keys.tolist()))
    assert a.forgotten_blocks > 0 and a.misses_split_exact
    assert a.beyond_horizon == int(np.count_nonzero(true_d > horizon))
    assert a.first_time == int(np.count_nonzero(true_d == 0)) == len(set(keys.tolist()))
    assert np.array_equal(d, np.where(true_d > horizon, -1, true_d))


def test_an_all_distinct_stream_past_the_horizon_has_no_re_reference():
    """A Bloom filter said some never-seen blocks were seen: 3,079 of 10^7 at the default horizon."""
    keys = np.random.default_rng(5).permutation(np.arange(1, 400_001, dtype=np.uint64) * 0x9E3779B97F4A7C15)
    a = Analyzer(horizon=1 << 12, initial_tracked=1)
    for part in np.array_split(keys, 7):
        a.feed(part, timestamps=0.0)
    assert (a.first_time, a.beyond_horizon, a.rereferences) == (len(keys), 0, 0)
    assert a.misses_split_exact and a.curve().attainable() == 0.0


def test_a_block_forgotten_long_ago_is_still_a_re_reference():
    """The Bloom filter forgot after 2 x 65,536 forgettings and took such a block for a new one."""
    horizon = 64
    first = np.arange(1, 101, dtype=np.uint64)  # forgotten early
    middle = np.arange(10_000, 150_000, dtype=np.uint64)  # 140,000 forgettings between
    top = np.uint64(2**64 - 1)  # the forgotten set's empty-cell marker, as a key
    keys = np.concatenate([first, [top], middle, first, [top]])
    a = Analyzer(horizon=horizon, initial_tracked=1)
    d = a.feed(keys, timestamps=0.0, return_distances=True)
    assert d[-101:].tolist() == [-1] * 101  # each re-read lies beyond the horizon
    assert (a.first_time, a.beyond_horizon, a.rereferences) == (101 + len(middle), 101, 0)


def test_past_its_budget_the_forgotten_set_is_full_and_the_split_a_bound():
    keys = _zipf_trace(30_000, 20_000, 3)
    true_d = np.array(naive_stack_distances(keys.tolist()))
    a = Analyzer(horizon=50, initial_tracked=1, max_forgotten=300)
    a.feed(keys, timestamps=0.0)
    assert not a.misses_split_exact  # more than 300 distinct blocks were forgotten
    assert a.first_time >= int(np.count_nonzero(true_d == 0))  # never a false "seen": bounds
    assert a.beyond_horizon <= int(np.count_nonzero(true_d > 50))
    assert a.first_time + a.beyond_horizon == int(np.count_nonzero((true_d == 0) | (true_d > 50)))
    assert a.rereferences == int(np.count_nonzero((true_d >= 1) & (true_d <= 50)))


def test_a_preallocated_analyzer_never_rebuilds_its_tables_and_stays_exact():
    """A live stream's analyzer: sized for its horizon at start, so no growth ever stalls the stream."""
    horizon = 500
    keys = _zipf_trace(30_000, 8_000, 4)
    a = Analyzer(horizon=horizon, preallocate=True)
    arrays = (a._t.table, a._t.slot_keys, a._t.live, a._t.gone)
    for part in np.array_split(keys, 9):
        a.feed(part, timestamps=0.0)
    assert all(
        x is y for x, y in zip(arrays, (a._t.table, a._t.slot_keys, a._t.live, a._t.gone), strict=True)
    )
    true_d = np.array(naive_stack_distances(keys.tolist()))
    caps = [1, 10, 100, horizon]
    naive = naive_curve(keys.tolist(), caps)
    assert [a.curve().hits(c) for c in caps] == [naive[c][0] for c in caps]
    assert a.first_time + a.beyond_horizon == int(np.count_nonzero((true_d == 0) | (true_d > horizon)))
    assert a.forgotten_blocks > 0 and a.misses_split_exact  # within its forgotten budget: exact
    assert a.first_time == len(set(keys.tolist()))


def test_coverage_target_not_reached_when_reuse_lies_beyond_horizon():
    # a cyclic scan over 50 blocks: every re-reference has distance 50
    keys = np.tile(np.arange(50, dtype=np.uint64), 10)
    small = Analyzer(horizon=20)
    small.feed(keys, timestamps=0.0)
    c = small.curve()
    assert c.attainable() == 0.0
    assert c.working_set(0.95) is None
    big = Analyzer(horizon=100)
    big.feed(keys, timestamps=0.0)
    assert big.curve().working_set(0.95) == 50


def test_windows_count_only_recent_slots():
    a = Analyzer(horizon=1000, slot_seconds=1.0, fine_slots=10, coarse_seconds=5.0, coarse_slots=4)
    for t in range(30):  # one access per second to a block seen 3 s earlier (distance 3)
        a.feed(np.array([t % 3], dtype=np.uint64), timestamps=float(t))
    w = a.curve(window=5)
    assert w.accesses == 5 and w.hits(3) == 5 and w.hits(2) == 0
    long = a.curve(window=20)  # served by the coarse ring (5 s slots, 4 of them)
    assert 15 < long.accesses <= 20
    assert a.curve().accesses == 30


def test_late_timestamps_are_counted_in_the_current_slot():
    a = Analyzer(horizon=100)
    a.feed(np.array([1, 2], dtype=np.uint64), timestamps=100.0)
    a.feed(np.array([3], dtype=np.uint64), timestamps=np.array([50.0]))
    assert a.late_accesses == 1
    assert a.curve(window=1).accesses == 3


@pytest.mark.parametrize("grid", [WINDOW_GRID, FINE_GRID])
def test_kernel_grid_bucket_matches_reference(grid):
    for d in [1, 2, 127, 128, 129, 131, 132, 255, 256, 257, 1000, 65535, 65536, 2**22 + 7, 2**40 + 3]:
        assert bucket_of(d, grid.exact_bits, grid.octave_bits) == grid.bucket(d)
        b = grid.bucket(d)
        assert (grid.upper_edge(b - 1) if b else 0) < d <= grid.upper_edge(b)


def test_window_curve_is_a_lower_bound_exact_on_grid():
    keys = _zipf_trace(5_000, 4_000, 3)
    a = Analyzer(horizon=1 << 16)
    a.feed(keys, timestamps=0.0)
    exact, grid = a.curve(), a.curve(window=60)
    for C in grid.capacities[:200]:
        assert grid.hits(int(C)) == exact.hits(int(C))
    for C in (130, 1000, 3000):
        assert grid.hits(C) <= exact.hits(C)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="horizon"):
        Analyzer(horizon=0)
    with pytest.raises(ValueError, match="order"):
        Analyzer(order="sideways")
    a = Analyzer()
    with pytest.raises(ValueError, match="tokens"):
        a.feed(np.arange(3, dtype=np.uint64), tokens=[1, 2])
    with pytest.raises(ValueError, match="request_starts"):
        a.feed(np.arange(3, dtype=np.uint64), request_starts=[2, 1])


def test_late_accesses_are_counted_once_even_when_the_state_grows_among_them():
    a = Analyzer(horizon=1 << 16, initial_tracked=1)
    a.feed(np.array([1, 2], dtype=np.uint64), timestamps=np.array([100.0, 100.5]))
    late = np.arange(10, 3010, dtype=np.uint64)  # new blocks: the tables grow several times mid-batch
    a.feed(late, timestamps=np.full(len(late), 50.0))
    assert a.late_accesses == 3000
    assert a.curve(window=1).accesses == 3002


def test_windows_after_long_gaps_hold_only_their_own_slots():
    # slots are cleared lazily: a row written long ago must never leak into a later window
    a = Analyzer(horizon=1000)
    for t, n in ((0.0, 10), (359.0, 20), (720.0, 40), (725.0, 80), (1081.0, 160)):
        a.feed(np.arange(n, dtype=np.uint64) + int(t) * 1000, timestamps=t)
    assert a.curve(window=60).accesses == 160  # 1081 only
    assert a.curve(window=360).accesses == 160 + 80  # slots 722..1081: 725 and 1081
    series = a.slot_series(360.0)
    assert series.accesses.sum() == 160 + 80
    assert a.curve(window=3600).accesses == 310  # the coarse ring holds them all


def test_per_access_timestamps_land_in_their_own_slots():
    a = Analyzer(horizon=1000)
    # 3 accesses in slot 10, 2 in slot 11, 1 in slot 13 (1 s slots), all in one feed
    a.feed(np.arange(6, dtype=np.uint64), timestamps=np.array([10.1, 10.5, 10.9, 11.0, 11.7, 13.2]))
    series = a.slot_series(6.0)
    by_slot = dict(
        zip(
            range(series.end_slot - len(series) + 1, series.end_slot + 1),
            series.accesses.tolist(),
            strict=True,
        )
    )
    assert {s: n for s, n in by_slot.items() if n} == {10: 3, 11: 2, 13: 1}
