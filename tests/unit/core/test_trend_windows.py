"""The working-set trends' consecutive windows, summed in the rings, against a naive LRU stack."""

import pytest

from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_stack_distances
from tests.support.timed_trace import timed_trace


def _naive_window(distances, times, first: float, last: float, capacity: int) -> tuple[int, int]:
    """(accesses, hits at `capacity`) of the accesses with a time in [first, last)."""
    inside = [d for d, t in zip(distances, times, strict=True) if first <= t < last]
    return len(inside), sum(1 for d in inside if 1 <= d <= capacity)


@pytest.mark.parametrize(
    ("seconds", "duration", "window", "points"),
    [
        (430, 1, 30.0, 6),  # the fine ring (360 slots) has wrapped: windows straddle its end
        (200, 1, 20.0, 6),  # not yet full: the oldest windows reach before the first slot
        (8000, 25, 600.0, 6),  # the coarse ring (60 s slots), wrapped as well
    ],
)
def test_each_trend_window_holds_exactly_its_accesses(seconds, duration, window, points):
    keys, times = timed_trace(seconds, seed=seconds)
    times = times * duration
    a = Analyzer(horizon=1 << 12, initial_tracked=1)
    a.feed(keys, timestamps=times)
    curves = a.consecutive_window_curves(window, points)
    assert len(curves) == points
    distances = naive_stack_distances(keys.tolist())
    ring = a.fine if window <= a.fine.span_seconds() / 2 else a.coarse
    end = (ring.current + 1) * ring.width
    for k, curve in enumerate(curves):
        first = end - (points - k) * window
        for capacity in (1, 4, 16, 64):  # grid capacities: exact there
            want = _naive_window(distances, times, first, first + window, capacity)
            assert (curve.accesses, curve.hits(capacity)) == want, (k, capacity)
        assert curve.window_seconds == window


def test_a_trend_before_any_access_is_of_empty_windows():
    curves = Analyzer(horizon=1000).consecutive_window_curves(60.0, 6)
    assert len(curves) == 6 and all(c.accesses == 0 for c in curves)
