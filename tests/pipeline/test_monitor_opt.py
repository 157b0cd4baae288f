"""The monitor with --opt: it keeps the accesses it analyzes, and once every source has read its whole
input it computes Belady MIN's curve of them (in its own thread) for every later snapshot."""

import threading
from functools import partial

import numpy as np
import pytest

from kvset.api import BeladyMin, Curves, WorkingSets
from kvset.core.naive import naive_min_curve, reverse_within_requests
from kvset.core.opt import opt_histogram
from kvset.core.stack_distance import new_analyzer
from kvset.formats import read_trace
from kvset.monitor import OPT_COMPUTING, OPT_WAITING, Monitor
from kvset.report import snapshot_json
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.base import Source
from kvset.sources.replay import ReplaySource
from kvset.types import AccessBatch, SourceHealth, SourceUpdate
from tests.support.paths import MOONCAKE_TRACE


class GatedSource(Source):
    """Delivers its batches, then waits for `release` before it finishes: the file is not known whole
    until then."""

    kind = "replay"
    name = "gated replay"

    def __init__(self, batches):
        self.batches = batches
        self.release = threading.Event()

    def updates(self, stop):
        yield SourceUpdate(health=SourceHealth(self.name, self.kind, True, "replaying"))
        for b in self.batches:
            yield SourceUpdate(accesses=b)
        while not (self.release.is_set() or stop.is_set()):
            stop.wait(0.01)


def _monitor(sources, order="forward", **config):
    return Monitor(
        sources,
        partial(new_analyzer, order=order),
        SnapshotBuilder(SnapshotConfig(**config)),
        interval=0.02,
        opt=True,
    )


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_replayed_file_gets_the_min_curve_of_exactly_what_was_analyzed(order):
    trace = read_trace(MOONCAKE_TRACE)
    snap = _monitor([ReplaySource(str(MOONCAKE_TRACE), speed=None)], order).collect()
    assert snap.get(BeladyMin).note is None and snap.get(BeladyMin).curve is not None
    keys, tokens = [], []
    for b in trace.batches():
        k, t = b.keys.tolist(), b.tokens.tolist()
        if order == "reverse":  # the naive reference's own reversal, request by request
            k, t = reverse_within_requests(k, b.request_starts), reverse_within_requests(t, b.request_starts)
        keys += k
        tokens += t
    c = snap.get(BeladyMin).curve
    assert c.accesses == len(keys) == snap.totals.accesses and c.tokens == sum(tokens) == snap.totals.tokens
    caps = [1, 7, 100, 2_000, 9_000, 30_000]
    for cap, (hits, token_hits) in naive_min_curve(keys, caps, tokens).items():
        assert (c.hits(cap), c.hits(cap, "tokens")) == (hits, token_hits), cap
    assert all(c.hits(cap) >= snap.get(Curves).curve("all").hits(cap) for cap in caps)


def test_min_waits_for_the_whole_file_then_every_snapshot_has_it():
    rng = np.random.default_rng(3)
    batches = [
        AccessBatch(rng.integers(0, 400, 500).astype(np.uint64), timestamps=float(i)) for i in range(6)
    ]
    source = GatedSource(batches)
    monitor = _monitor([source], options={"capacity": 100})
    seen, stop = [], threading.Event()

    def publish(snap):
        seen.append(snap)
        if (
            snap.get(BeladyMin).curve is not None
            and len([s for s in seen if s.get(BeladyMin).curve is not None]) >= 2
        ):
            stop.set()

    worker = threading.Thread(target=monitor.run, args=(stop, publish), daemon=True)
    worker.start()
    while not any(s.totals.accesses == 3000 for s in seen):  # every batch analyzed, the file not yet ended
        stop.wait(0.01)
    waiting = [s for s in seen if s.totals.accesses == 3000][-1]
    assert (
        waiting.get(BeladyMin).curve is None
        and waiting.get(BeladyMin).gap is None
        and waiting.get(BeladyMin).note == OPT_WAITING
    )
    source.release.set()
    worker.join(10)
    assert not worker.is_alive()
    notes = [s.get(BeladyMin).note for s in seen]
    assert OPT_COMPUTING in notes and notes[-1] is None  # said so while computing, then the curve
    final = seen[-1]
    keys = np.concatenate([b.keys for b in batches])
    assert np.array_equal(final.get(BeladyMin).curve.block_hits, opt_histogram(keys).curve().block_hits)
    gap = final.get(BeladyMin).gap.at_capacity()
    assert (gap.capacity_blocks, gap.where) == (100, "chosen")
    assert (
        gap.opt_block_hit_rate
        == final.get(BeladyMin).curve.hit_rate(100)
        >= gap.lru_block_hit_rate
        == final.get(Curves).curve().hit_rate(100)
    )
    rows = final.get(WorkingSets).rows_for("all", "coverage")
    assert [r.opt_capacity_blocks for r in rows] == [
        final.get(BeladyMin).curve.working_set(r.target) for r in rows
    ]
    assert all(r.opt_capacity_blocks is None for r in final.get(WorkingSets).rows_for("5m", "coverage"))


def test_a_replay_cut_short_gets_no_min_curve_and_says_why():
    source = GatedSource([AccessBatch(np.arange(50, dtype=np.uint64), timestamps=1.0)])
    snap = _monitor([source]).collect(seconds=0.3)  # --once --duration: the source never finished
    assert snap.get(BeladyMin).curve is None and "not read to its end" in snap.get(BeladyMin).note


def test_without_opt_nothing_is_kept_and_nothing_is_said():
    monitor = Monitor(
        [ReplaySource(str(MOONCAKE_TRACE), speed=None)], new_analyzer, SnapshotBuilder(SnapshotConfig())
    )
    snap = monitor.collect()
    assert snap.get(BeladyMin) is None  # MIN was not asked for: no result, and its JSON keys are null
    assert snapshot_json(snap)["opt"] is None and snapshot_json(snap)["opt_note"] is None
