"""The split of misses into distinct blocks and re-references beyond the horizon, as the reports
show it: exact (no "at most" anywhere) while every forgotten block is remembered, and labelled as
bounds in the text, the JSON and the exporter once the forgotten set is full."""

from __future__ import annotations

import numpy as np
import pytest

from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_stack_distances
from kvset.exporter.collector import snapshot_families
from kvset.report import snapshot_json, snapshot_text
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig


def _keys() -> np.ndarray:
    rng = np.random.default_rng(11)
    return (np.minimum(rng.zipf(1.2, 20_000), 15_000) + 7).astype(np.uint64)


def _metric(snapshot, name: str) -> float:
    family = next(f for f in snapshot_families(snapshot, ()) if f.name == name)
    return family.samples[0].value


@pytest.mark.parametrize("max_forgotten", [None, 200])
def test_the_split_is_exact_or_labelled_a_bound(max_forgotten):
    keys = _keys()
    true_d = np.array(naive_stack_distances(keys.tolist()))
    analyzer = Analyzer(horizon=40, initial_tracked=1, max_forgotten=max_forgotten)
    analyzer.feed(keys, timestamps=np.linspace(0.0, 50.0, len(keys)))
    snap = SnapshotBuilder(SnapshotConfig()).build(analyzer, now=100.0)
    t, js, text = snap.totals, snapshot_json(snap), snapshot_text(snap)
    distinct, beyond = int(np.count_nonzero(true_d == 0)), int(np.count_nonzero(true_d > 40))
    assert t.first_time + t.beyond_horizon == distinct + beyond  # every miss, either way
    if max_forgotten is None:
        assert (t.first_time, t.beyond_horizon) == (distinct, beyond)
        assert js["misses_split_exact"] is True and _metric(snap, "kvset_misses_split_exact") == 1.0
        assert f"distinct blocks {distinct:,}" in text and "at least" not in text
        assert "bounds (at most" not in text
    else:
        assert t.first_time > distinct and t.beyond_horizon < beyond  # an upper and a lower bound
        assert js["misses_split_exact"] is False and _metric(snap, "kvset_misses_split_exact") == 0.0
        assert f"distinct blocks at most {t.first_time:,}" in text
        assert f"at least {t.beyond_horizon:,} re-references beyond it" in text
        assert "are bounds (at most, at least)" in text
