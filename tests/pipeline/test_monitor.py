"""The pipeline: sources in threads -> analyzer -> snapshots; failing sources; --once; recording."""

import argparse
import json
import threading
import time
from functools import partial

import numpy as np
import pytest

from kvset.api import Curves, EngineState, ThrashingByWindow, WorkingSets
from kvset.cli.flags import add_monitor_arguments
from kvset.cli.live_monitor import UsageError, build_monitor, once_seconds
from kvset.core.analyzer import Analyzer
from kvset.core.stack_distance import new_analyzer
from kvset.formats import read_trace
from kvset.monitor import Monitor
from kvset.report import snapshot_json, snapshot_text
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.base import Source
from kvset.sources.demo import DemoSource
from kvset.types import AccessBatch, EngineReading, SourceHealth, SourceUpdate
from kvset.units import NULL_BLOCKS_VLLM, EnginePool, StreamUnits
from tests.support.paths import MOONCAKE_TRACE
from tests.support.toy import toy_keys


class ListSource(Source):
    kind = "test"

    def __init__(self, batches, name="list", fail_after=None, engine=None):
        self.batches, self.name, self.fail_after, self.engine = batches, name, fail_after, engine

    def updates(self, stop):
        yield SourceUpdate(health=SourceHealth(self.name, self.kind, True, "connected"), engine=self.engine)
        for i, b in enumerate(self.batches):
            if self.fail_after is not None and i >= self.fail_after:
                raise ConnectionError("engine went away")
            yield SourceUpdate(accesses=b)


def _monitor(*sources, **config):
    return Monitor(
        list(sources),
        partial(new_analyzer, horizon=1000),
        SnapshotBuilder(SnapshotConfig(**config)),
        interval=0.05,
    )


def test_collect_gives_the_same_curve_as_feeding_directly():
    keys = np.array(toy_keys(), dtype=np.uint64)
    src = ListSource([AccessBatch(keys[:20], timestamps=1.0), AccessBatch(keys[20:], timestamps=2.0)])
    snap = _monitor(src).collect()
    c = snap.get(Curves).curve("all")
    assert c.accesses == 50 and c.hits(8) == 37 and c.hits(7) == 30
    assert snap.sources[0].finished
    assert snap.totals.first_time == 13


def test_failing_source_is_reported_and_others_keep_going():
    keys = np.arange(100, dtype=np.uint64)
    bad = ListSource([AccessBatch(keys[:10], timestamps=1.0)] * 3, name="flaky", fail_after=1)
    good = ListSource([AccessBatch(keys, timestamps=1.0)], name="good")
    snap = _monitor(bad, good).collect()
    flaky = next(h for h in snap.sources if h.source == "flaky")
    assert flaky.state.startswith("failed") and "engine went away" in flaky.state
    assert flaky.rejected_total == 1
    assert any(e.kind == "source-failed" for e in snap.events)
    assert snap.totals.accesses == 110


def test_run_publishes_snapshots_until_stopped():
    got = []
    m = Monitor(
        [DemoSource(speed=50)], new_analyzer, SnapshotBuilder(SnapshotConfig(demo=True)), interval=0.1
    )
    stop = threading.Event()
    t = threading.Thread(target=m.run, args=(stop, got.append))
    t.start()
    deadline = time.monotonic() + 20
    while (len(got) < 3 or got[-1].totals.accesses == 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    t.join(5)
    assert not t.is_alive()
    assert len(got) >= 3 and got[-1].demo
    assert [s.seq for s in got] == sorted(s.seq for s in got)
    assert got[-1].totals.accesses > got[0].totals.accesses


def test_engine_capacity_drives_thrashing_and_fits_pool():
    keys = np.tile(np.arange(40, dtype=np.uint64), 20)  # a scan over 40 blocks: every reuse at distance 40
    engine = EngineReading(at=time.time(), pools=(EnginePool(36, 16),))
    snap = _monitor(ListSource([AccessBatch(keys, timestamps=5.0, block_size=16)], engine=engine)).collect()
    th = snap.get(ThrashingByWindow).windows["all"]
    assert th.capacity_blocks == 36 and th.capacity_source == "engine"
    assert th.blocks.hit_rate == 0.0 and th.blocks.gain_25pct > 0.9
    assert (
        th.blocks.near_miss_share == pytest.approx(760 / 800) and th.level == "thrashing"
    )  # first accesses are far misses
    row = snap.get(WorkingSets).rows_for("all", "coverage")[0]
    assert row.capacity_blocks == 40 and row.fits_pool is False


def test_snapshot_json_and_text_round_trip():
    snap = _monitor(ListSource([AccessBatch(np.array(toy_keys(), np.uint64), timestamps=0.0)])).collect()
    j = json.loads(json.dumps(snapshot_json(snap)))
    assert j["accesses"] == 50 and j["distinct_blocks"] == 13
    assert set(j["windows"]) == {"1m", "5m", "1h", "all"}
    assert {"capacity_blocks", "block_hit_rate", "token_hit_rate"} <= set(j["curve"][0])
    text = snapshot_text(snap)
    assert "accesses 50" in text and "working sets" in text and "LRU only" in text


def _args(*argv):
    p = argparse.ArgumentParser()
    add_monitor_arguments(p)
    return p.parse_args(list(argv))


def test_once_replay_equals_offline_analysis():
    args = _args("--once", "--replay", str(MOONCAKE_TRACE))
    m = build_monitor(args)
    snap = m.collect(once_seconds(args, m))
    trace = read_trace(MOONCAKE_TRACE)
    a = Analyzer()
    a.feed(trace.keys, tokens=trace.tokens, timestamps=0.0)
    offline = a.curve()
    live = snap.get(Curves).curve("all")
    assert live.accesses == offline.accesses == 121_877
    for c in (10, 1000, 25_000, 43_000):
        assert live.hits(c) == offline.hits(c) and live.hits(c, "tokens") == offline.hits(c, "tokens")


def test_demo_once_shows_phases_and_pool():
    args = _args("--once")
    m = build_monitor(args)
    m.sources[0].duration = 200.0  # keep the test short
    snap = m.collect(once_seconds(args, m))
    assert snap.demo and snap.get(EngineState).reading.capacity_blocks
    assert any(e.kind == "phase" for e in snap.events)
    assert snap.get(ThrashingByWindow).windows["all"].capacity_source == "engine"


def test_follow_tails_a_growing_trace(tmp_path):
    path = tmp_path / "growing.jsonl"
    lines = MOONCAKE_TRACE.read_text().splitlines()
    path.write_text("\n".join(lines[:100]) + "\n")
    args = _args("--replay", str(path), "--follow")
    m = build_monitor(args)
    got = []
    stop = threading.Event()
    t = threading.Thread(target=m.run, args=(stop, got.append))
    t.start()
    try:
        deadline = time.monotonic() + 10
        while (not got or got[-1].totals.requests < 100) and time.monotonic() < deadline:
            time.sleep(0.05)
        with path.open("a") as f:
            f.write("\n".join(lines[100:200]) + "\n")
        while got[-1].totals.requests < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        t.join(5)
    assert got[-1].totals.requests == 200


def test_record_saves_what_was_seen(tmp_path):
    out = tmp_path / "rec.jsonl.gz"
    args = _args("--once", "--replay", str(MOONCAKE_TRACE), "--record", str(out))
    m = build_monitor(args)
    m.collect(once_seconds(args, m))
    again = read_trace(out)
    original = read_trace(MOONCAKE_TRACE)
    assert again.keys.tolist() == original.keys.tolist()
    assert again.tokens.tolist() == original.tokens.tolist()


def test_usage_errors():
    with pytest.raises(UsageError, match="--follow"):
        build_monitor(_args("--follow"))
    with pytest.raises(UsageError, match="--once"):
        build_monitor(_args("--json"))
    with pytest.raises(UsageError, match="no such"):
        build_monitor(_args("--replay", "/nonexistent/trace.jsonl"))


def test_engine_pool_is_converted_to_the_streams_blocks_through_tokens():
    # a vLLM pool of 61,276 blocks of 16 tokens (its null block among them), against a trace of 512-token blocks
    vllm = EnginePool(61_276, 16, NULL_BLOCKS_VLLM)
    assert vllm.in_stream_blocks(StreamUnits(16, "metrics")) == 61_275
    assert vllm.in_stream_blocks(StreamUnits(512, "format")) == 61_275 * 16 // 512 == 1_914
    assert EnginePool(100, 32).in_stream_blocks(StreamUnits(16, "event")) == 200
    engine = EngineReading(at=0.0, pools=(vllm,))
    assert engine.capacity_blocks == 61_276 and engine.block_size == 16  # as the engine counts it
    keys = np.arange(5000, dtype=np.uint64)
    src = ListSource([AccessBatch(np.tile(keys, 2), timestamps=1.0, block_size=512)], engine=engine)
    src.units = StreamUnits(512, "format")
    snap = _monitor(src).collect()
    assert snap.get(ThrashingByWindow).windows["all"].capacity_blocks == 1_914
    assert snapshot_json(snap)["operating_point"]["capacity_blocks"] == 1_914


class LiveListSource(ListSource):
    kind = "events"

    def __init__(self, *a, reports_hits=None, **kw):
        super().__init__(*a, **kw)
        self.reports_hits = reports_hits

    def updates(self, stop):
        yield SourceUpdate(
            health=SourceHealth(self.name, self.kind, True, "connected", reports_hits=self.reports_hits),
            engine=self.engine,
        )
        for b in self.batches:
            yield SourceUpdate(accesses=b)


def test_a_batch_the_analyzer_refuses_is_counted_and_the_monitor_goes_on():
    keys = np.arange(10, dtype=np.uint64)
    src = ListSource([AccessBatch(keys, timestamps=1e300), AccessBatch(keys, timestamps=5.0)], name="odd")
    snap = _monitor(src).collect()
    assert snap.totals.accesses == 10
    health = snap.sources[0]
    assert health.rejected_total == 10 and "refused" in health.rejected[0].reason


def test_only_the_accesses_with_unusable_timestamps_are_refused():
    keys = np.arange(500, dtype=np.uint64)
    stamps = np.linspace(10.0, 20.0, 500)
    bad = np.arange(5, 500, 50)  # 10 accesses, one in each of 10 requests
    stamps[bad[:5]] = -1e300
    stamps[bad[5:]] = np.nan
    starts = np.arange(0, 500, 50)
    batch = AccessBatch(keys, tokens=np.full(500, 16), request_starts=starts, timestamps=stamps)
    snap = _monitor(ListSource([batch])).collect()
    assert snap.totals.accesses == 490
    assert snap.totals.requests == 10  # every request kept its other accesses
    assert snap.sources[0].rejected_total == 10
    assert snap.sources[0].rejected[0].examples[0] == "timestamp -1e+300"  # a float, not np.float64(...)


def test_a_batch_subset_keeps_whole_requests_where_they_survive():
    batch = AccessBatch(
        np.arange(8, dtype=np.uint64),
        tokens=np.arange(8),
        request_starts=np.array([2, 5]),
        timestamps=np.arange(8.0),
    )
    keep = np.array([True, False, False, True, True, False, False, False])
    part = batch.subset(keep)
    assert part.keys.tolist() == [0, 3, 4] and part.tokens.tolist() == [0, 3, 4]
    assert part.timestamps.tolist() == [0.0, 3.0, 4.0]
    assert part.request_starts.tolist() == [1]  # request 1 now begins at key 3; request 2 is gone


def test_a_live_engine_clock_ahead_of_ours_does_not_freeze_the_windows():
    now = time.time()
    ahead = AccessBatch(np.arange(5, dtype=np.uint64), timestamps=now + 365 * 86400)
    normal = AccessBatch(np.arange(100, 200, dtype=np.uint64), timestamps=now + 2)  # after the re-stamped one
    snap = _monitor(LiveListSource([ahead, normal])).collect()
    assert snap.totals.late_accesses == 0  # the future batch was re-stamped, so nothing lands "late"
    assert snap.get(Curves).curve("1m").accesses == 105
    assert any("ahead of this clock" in r.reason for r in snap.sources[0].rejected)


def test_misses_only_sources_make_the_curve_scope_misses_only():
    from kvset.api import MISSES_ONLY

    engine = EngineReading(at=time.time(), pools=(EnginePool(50, 16),), token_hit_rate=0.5)
    batch = AccessBatch(np.tile(np.arange(40, dtype=np.uint64), 3), timestamps=time.time(), block_size=16)
    snap = _monitor(LiveListSource([batch], reports_hits=False, engine=engine)).collect()
    assert snap.curve_scope == MISSES_ONLY
    op = snapshot_json(snap)["operating_point"]
    assert op["measured_token_hit_rate"] == 0.5 and op["difference"] is None
    assert "MISSES only" in snapshot_text(snap)
    full = _monitor(LiveListSource([batch], reports_hits=True, engine=engine)).collect()
    assert snapshot_json(full)["operating_point"]["difference"] is not None


def test_engine_history_keeps_only_what_the_engine_measured():
    class Readings(Source):
        kind, name = "metrics", "m"

        def updates(self, stop):
            for i in range(20):
                rate = 0.5 if i % 5 == 0 else None
                yield SourceUpdate(engine=EngineReading(at=float(i), token_hit_rate=rate, resident_blocks=i))

    snap = _monitor(Readings()).collect()
    assert len(snap.get(EngineState).history) == 4
    assert all(r.token_hit_rate == 0.5 for r in snap.get(EngineState).history)


def test_before_any_reuse_nothing_is_judged_and_no_working_set_fits():
    # the first blocks of a stream: all first-time, none re-read yet, with an engine pool known
    engine = EngineReading(at=time.time(), pools=(EnginePool(36, 16),))
    snap = _monitor(
        ListSource(
            [AccessBatch(np.arange(40, dtype=np.uint64), timestamps=5.0, block_size=16)], engine=engine
        )
    ).collect()
    assert snap.totals.accesses == 40
    assert snap.get(ThrashingByWindow).windows == {}  # no "OK" for a cache that has not been tried
    rows = snap.get(WorkingSets).rows_for("all", "coverage")
    assert rows and all(r.capacity_blocks == 0 and r.fits_pool is None for r in rows)
