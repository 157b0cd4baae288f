"""A sampled analyzer behind the monitor: the snapshot, its JSON and its metrics say they are estimates."""

from __future__ import annotations

from functools import partial

from kvset.api import Curves
from kvset.core.stack_distance import Sampling, new_analyzer
from kvset.exporter.collector import snapshot_families
from kvset.monitor import Monitor
from kvset.report import snapshot_json
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.replay import ReplaySource
from tests.support.paths import MOONCAKE_TRACE


def _snapshot(sampling):
    analyzer = partial(new_analyzer, sampling=sampling)
    return Monitor(
        [ReplaySource(str(MOONCAKE_TRACE), speed=None)], analyzer, SnapshotBuilder(SnapshotConfig())
    ).collect()


def test_snapshot_of_a_sample_carries_it_into_json_and_metrics():
    snap = _snapshot(Sampling(rate=0.1, seed=3))
    assert snap.sample is not None and (snap.sample.rate, snap.sample.seed) == (0.1, 3)
    assert all(w.curve.estimate for w in snap.get(Curves).windows.values())
    assert snap.totals.accesses == 121_877  # counted, not estimated
    js = snapshot_json(snap)
    assert js["estimate"]["tracked_blocks"] == snap.sample.tracked_blocks
    families = {f.name: f for f in snapshot_families(snap)}
    assert families["kvset_sample_rate"].samples[0].value == 0.1
    assert families["kvset_sample_tracked_blocks"].samples[0].value == snap.sample.tracked_blocks
    assert families["kvset_sample_head_boost"].samples[0].value == 1.0  # prefix-chained: heads boosted


def test_snapshot_of_every_block_says_nothing_of_a_sample():
    snap = _snapshot(None)
    assert snap.sample is None and snapshot_json(snap)["estimate"] is None
    assert "kvset_sample_rate" not in {f.name for f in snapshot_families(snap)}


def test_a_ranks_analyzer_samples_as_the_merged_one_does():
    for sampling in (Sampling(rate=0.05, seed=4), Sampling(size=700, seed=2), None):
        monitor = Monitor(
            [ReplaySource(str(MOONCAKE_TRACE), speed=None)],
            partial(new_analyzer, sampling=sampling),
            SnapshotBuilder(SnapshotConfig()),
        )
        monitor.collect()
        merged, rank = monitor.analyzer, monitor._rank_analyzer(1)
        assert rank.units == merged.units and rank.units.block_size == 512
        if sampling is None:
            assert rank.sampling is None and merged.sampling is None
        elif sampling.size is not None:  # the rate falls as the sample fills: the same size, seed
            assert (
                (rank.sampling.size, rank.sampling.seed)
                == (700, 2)
                == (merged.sampling.size, merged.sampling.seed)
            )
        else:
            mine, theirs = rank.sampling, merged.sampling
            assert (mine.rate, mine.size, mine.seed) == (theirs.rate, theirs.size, theirs.seed)
