import numpy as np
import pytest

from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_curve, naive_stack_distances
from tests.support.toy import PUBLISHED, toy_keys


@pytest.fixture
def toy_curve():
    a = Analyzer(horizon=64)
    a.feed(np.array(toy_keys(), dtype=np.uint64), timestamps=0.0)
    return a, a.curve()


def test_toy_trace_shape():
    keys = toy_keys()
    assert len(keys) == 50 and len(set(keys)) == 13


def test_toy_trace_gives_the_published_curve(toy_curve):
    a, c = toy_curve
    assert c.accesses == 50
    assert [round(c.hit_rate(C), 2) for C in range(1, 9)] == PUBLISHED
    for C in range(8, 40):
        assert c.hits(C) == 37
    assert a.first_time == 13 and a.rereferences == 37


def test_toy_working_set_absolute_070_is_8(toy_curve):
    _, c = toy_curve
    assert c.working_set(0.70, mode="absolute") == 8
    assert c.working_set(0.75, mode="absolute") is None  # above the attainable 0.74
    assert c.attainable() == pytest.approx(0.74)


def test_toy_coverage_working_sets_match_definition(toy_curve):
    _, c = toy_curve
    # coverage t: smallest C with hits(C) >= ceil(t * 37)
    naive = naive_curve(toy_keys(), range(1, 14))
    for t in (0.5, 0.8, 0.95, 1.0):
        need = -(-int(t * 1000) * 37 // 1000)
        expected = min(C for C, (h, _) in naive.items() if h >= need)
        assert c.working_set(t, mode="coverage") == expected


def test_toy_distances_equal_an_explicit_stack():
    a = Analyzer(horizon=64)
    d = a.feed(np.array(toy_keys(), dtype=np.uint64), timestamps=0.0, return_distances=True)
    assert d.tolist() == naive_stack_distances(toy_keys())


def test_public_api_as_documented():
    from kvset import Analyzer as PublicAnalyzer
    from kvset import HitRateCurve

    a = PublicAnalyzer(horizon=64, order="forward")
    a.feed(np.array(toy_keys(), dtype=np.uint64))
    c = a.curve()
    assert isinstance(c, HitRateCurve)
    assert c.hit_rate(8) == pytest.approx(0.74) and c.hit_rate(8, unit="tokens") == pytest.approx(0.74)
    assert c.working_set(0.70, mode="absolute") == 8
