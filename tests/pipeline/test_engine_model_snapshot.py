"""The engine model from KV events to the snapshot's operating point, its JSON and its text: a fake
vLLM engine's events through the tracker, the monitor's accumulator and the snapshot builder."""

from __future__ import annotations

import pytest

from kvset.core.analyzer import Analyzer
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.rejects import RejectCounter
from kvset.report import snapshot_json
from kvset.report.as_text import snapshot_text
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.snapshot.engine_model import MODEL_NAME, EngineModel
from kvset.snapshot.model import MISSES_ONLY
from kvset.types import EngineReading, SourceHealth
from tests.support.kv_values import message, removed, stored
from tests.support.vllm_engine_sim import SimEngine, agentic_requests

USABLE = 250


def replayed(report_hits: bool = True):
    engine = SimEngine(USABLE, report_hits=report_hits)
    batches = engine.run(agentic_requests(8, 10, sessions=3, seed=5))
    tracker = KvEventTracker(["tcp://e"], [None], RejectCounter())
    analyzer, model = Analyzer(), EngineModel()
    for i, (step, events) in enumerate(batches):
        frames = message(i, [stored(e[1], parent=e[2]) if e[0] == "stored" else removed(e[1]) for e in events],
                         1000.0 + step / 1000)  # fmt: skip
        tracker.published(0, frames, now=0.0, at=0.0)
    update = tracker.take(at=0.0, final=True)
    analyzer.feed_batch(update.accesses)
    model.add(0, update.engine_model)
    reading = EngineReading(at=0.0, capacity_blocks=USABLE + 1, block_size=16, token_hit_rate=engine.measured_token_hit_rate,
                            kv_usage=0.8, running_requests=8, waiting_requests=3, label="vllm /metrics")  # fmt: skip
    health = SourceHealth("events", "events", True, "connected", reports_hits=tracker.hits_reported)
    snap = SnapshotBuilder(SnapshotConfig()).build(analyzer, (health,), reading, (), 0.0, now=0.0, engine_model=model)
    return engine, snap


def test_the_operating_point_holds_the_model_its_inputs_and_the_misses_by_cause():
    engine, snap = replayed()
    op = snap.operating_point
    assert op.model == MODEL_NAME and op.capacity_blocks == USABLE + 1
    assert op.predicted_token_hit_rate == pytest.approx(engine.measured_token_hit_rate, abs=0.02)
    assert op.difference() == pytest.approx(engine.measured_token_hit_rate - op.predicted_token_hit_rate)
    breakdown = dict(op.miss_breakdown)
    assert sum(breakdown.values()) == pytest.approx(1.0)
    assert breakdown["hit"] == pytest.approx(op.predicted_token_hit_rate)
    # the effective capacity is where the exact LRU curve has the model's hits
    curve = snap.curve("all")
    assert curve.hit_rate(op.effective_capacity_blocks, "tokens") >= curve.hit_rate(op.effective_capacity_blocks - 1, "tokens")
    assert op.effective_capacity_blocks < USABLE
    inputs = dict(op.model_inputs)
    assert "250 usable" in inputs["pool"] and "201 blocks in use (kv_cache_usage_perc)" in inputs["pinned now"]
    assert inputs["engine now"] == "8 running, 3 waiting (/metrics)"
    js = snapshot_json(snap)["operating_point"]
    assert js["predicted_by"] == MODEL_NAME and js["predicted_token_hit_rate"] == op.predicted_token_hit_rate
    assert js["effective_capacity_blocks"] == op.effective_capacity_blocks
    assert js["lru_token_hit_rate"] == pytest.approx(curve.hit_rate(USABLE + 1, "tokens"))
    assert js["dedupe"]["not_admitted"] > 0 and set(js["miss_breakdown"]) == set(breakdown)
    text = snapshot_text(snap)
    assert f"predicted (a MODEL: {MODEL_NAME}, whole stream)" in text
    assert "exact LRU curve of the accesses seen, at the pool" in text


def test_misses_only_says_what_cannot_be_predicted():
    _, snap = replayed(report_hits=False)  # vLLM's default: its hits are not in the events
    op = snap.operating_point
    assert snap.curve_scope == MISSES_ONLY
    assert op.predicted_token_hit_rate is None and op.model is None and op.effective_capacity_blocks is None
    assert any("cannot be predicted" in n for n in op.notes)
    assert snapshot_json(snap)["operating_point"]["predicted_token_hit_rate"] is None
