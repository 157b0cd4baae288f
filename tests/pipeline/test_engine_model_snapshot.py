"""The engine model from KV events to the snapshot's operating point, its JSON and its text: a fake
vLLM engine's events through the tracker, the monitor's accumulator and the snapshot builder."""

from __future__ import annotations

import pytest

from kvset.api import MISSES_ONLY, RECONSTRUCTED, Curves, OperatingPoint
from kvset.core.analyzer import Analyzer
from kvset.engine.kv_event_health import kv_event_health
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.engine_model.summed import MODEL_NAME, EngineModel
from kvset.rejects import RejectCounter
from kvset.report import snapshot_json
from kvset.report.as_text import snapshot_text
from kvset.snapshot.builder import Readings, SnapshotBuilder, SnapshotConfig
from kvset.types import EngineReading, SourceHealth
from kvset.units import NULL_BLOCKS_VLLM, EnginePool
from tests.support.kv_values import sim_messages
from tests.support.vllm_engine_sim import SimEngine, agentic_requests

USABLE = 250


def replayed(report_hits: bool = True, reconstruct: bool = True, reach: int | None = None):
    engine = SimEngine(USABLE, report_hits=report_hits)
    requests = agentic_requests(8, 10, sessions=3, seed=5)
    batches = engine.run(requests)
    tracker = KvEventTracker(["tcp://e"], [None], RejectCounter())
    analyzer, model = Analyzer(), EngineModel()
    for frames in sim_messages(batches):
        tracker.published(0, frames, now=0.0, at=0.0)
    update = tracker.take(at=0.0, final=True)
    analyzer.feed_batch(update.accesses)
    model.add(0, update.engine_model)
    if reach is not None:  # as if the pool were larger than the replays' horizon
        model.reach_blocks = reach
    reading = EngineReading(
        at=0.0,
        pools=(EnginePool(USABLE + 1, 16, NULL_BLOCKS_VLLM),),  # num_gpu_blocks counts the null block
        token_hit_rate=engine.measured_token_hit_rate,
        kv_usage=0.8,
        running_requests=8,
        waiting_requests=3,
        queries_since_start=engine.query_tokens,  # vllm:prefix_cache_queries since kvset started
        hits_since_start=engine.hit_tokens,
        requests_since_start=len(requests),  # vllm:request_success
        label="vllm /metrics",
    )
    parts = kv_event_health(tracker, at=0.0)
    health = SourceHealth(
        "events",
        "events",
        True,
        "connected",
        reports_hits=parts.reports_hits,
        hits_reconstructed=parts.hits_reconstructed and reconstruct,
    )
    snap = SnapshotBuilder(SnapshotConfig()).build(
        analyzer, Readings(sources=(health,), engine=reading, engine_model=model), now=0.0
    )
    return engine, snap


def test_the_operating_point_holds_the_model_its_inputs_and_the_misses_by_cause():
    engine, snap = replayed()
    op = snap.get(OperatingPoint)
    assert op.model == MODEL_NAME and op.capacity_blocks == USABLE  # the blocks that can cache
    assert op.predicted_token_hit_rate == pytest.approx(engine.measured_token_hit_rate, abs=0.02)
    assert op.difference() == pytest.approx(engine.measured_token_hit_rate - op.predicted_token_hit_rate)
    breakdown = dict(op.miss_breakdown)
    assert sum(breakdown.values()) == pytest.approx(1.0)
    assert breakdown["hit"] == pytest.approx(op.predicted_token_hit_rate)
    # the effective capacity is where the exact LRU curve has the model's hits
    curve = snap.get(Curves).curve("all")
    assert curve.hit_rate(op.effective_capacity_blocks, "tokens") >= curve.hit_rate(
        op.effective_capacity_blocks - 1, "tokens"
    )
    assert op.effective_capacity_blocks < USABLE
    inputs = dict(op.model_inputs)
    assert (
        inputs["pool"] == "250 blocks that can hold a cached prefix (vLLM's null block left out)"
        and "200 blocks in use (kv_cache_usage_perc)" in inputs["pinned now"]
    )
    assert inputs["engine now"] == "8 running, 3 waiting (/metrics)"
    js = snapshot_json(snap)["operating_point"]
    assert js["predicted_by"] == MODEL_NAME and js["predicted_token_hit_rate"] == op.predicted_token_hit_rate
    assert js["effective_capacity_blocks"] == op.effective_capacity_blocks
    assert js["lru_token_hit_rate"] == pytest.approx(curve.hit_rate(USABLE, "tokens"))
    assert js["dedupe"]["not_admitted"] > 0 and set(js["miss_breakdown"]) == set(breakdown)
    text = snapshot_text(snap)
    assert f"predicted (a MODEL: {MODEL_NAME}, whole stream)" in text
    assert "exact LRU curve of the accesses seen, at the pool" in text


def test_a_pool_beyond_the_models_reach_is_said_to_be_predicted_as_a_lower_bound():
    _, within = replayed()
    _, beyond = replayed(reach=USABLE // 2)
    assert not any("beyond the engine model's reach" in n for n in within.get(OperatingPoint).notes)
    [note] = [n for n in beyond.get(OperatingPoint).notes if "beyond the engine model's reach" in n]
    assert f"({USABLE:,} blocks)" in note and "lower bound" in note
    assert note in snapshot_json(beyond)["operating_point"]["notes"]


def test_in_the_default_mode_the_hits_are_reconstructed_and_the_unseen_share_stated():
    engine, snap = replayed(report_hits=False)  # vLLM's default: its hits are not in the events
    op = snap.get(OperatingPoint)
    assert snap.curve_scope == RECONSTRUCTED and op.model == MODEL_NAME
    assert op.predicted_token_hit_rate == pytest.approx(engine.measured_token_hit_rate, abs=0.02)
    # the requests that stored no block are what the events could not show: the model's query tokens
    # fall short of the engine's counters by about their prompts
    full_engine, full = replayed()
    shown = op.seen_token_share
    assert full.get(OperatingPoint).seen_token_share == pytest.approx(1.0, abs=0.01)
    assert 0.9 < shown < 1.0 and op.unseen_token_share == pytest.approx(1 - shown)
    assert op.engine_requests == 240 and op.seen_requests < op.engine_requests
    js = snapshot_json(snap)["operating_point"]
    assert js["events_showed"]["unseen_token_share"] == op.unseen_token_share
    assert "hits reconstructed" in js["curve_scope"]
    assert any("the events showed" in n for n in op.notes)
    assert "hits were RECONSTRUCTED" in snapshot_text(snap)


def test_misses_only_says_what_cannot_be_predicted():
    # hits neither reported nor reconstructed (kvset joined a running engine: no chain known)
    _, snap = replayed(report_hits=False, reconstruct=False)
    op = snap.get(OperatingPoint)
    assert snap.curve_scope == MISSES_ONLY
    assert op.predicted_token_hit_rate is None and op.model is None and op.effective_capacity_blocks is None
    assert any("cannot be predicted" in n for n in op.notes)
    assert snapshot_json(snap)["operating_point"]["predicted_token_hit_rate"] is None


def test_data_parallel_ranks_are_predicted_each_at_its_own_pool():
    # two ranks, each its own engine with its own pool; /metrics gives both pools and their hit rate
    engines = [SimEngine(USABLE), SimEngine(USABLE)]
    runs = [
        e.run(agentic_requests(8, 10, sessions=3, seed=seed)) for e, seed in zip(engines, (5, 6), strict=True)
    ]
    tracker = KvEventTracker(["tcp://a", "tcp://b"], [None, None], RejectCounter())
    for rank, batches in enumerate(runs):
        for frames in sim_messages(batches):
            tracker.published(rank, frames, now=0.0, at=0.0)
    update = tracker.take(at=0.0, final=True)
    merged, per_rank, model = Analyzer(), {0: Analyzer(), 1: Analyzer()}, EngineModel()
    merged.feed_batch(update.accesses)
    for rank, part in update.accesses.by_rank():
        per_rank[rank].feed_batch(part)
    model.add(0, update.engine_model)
    measured = sum(e.hit_tokens for e in engines) / sum(e.query_tokens for e in engines)
    pool = 2 * USABLE
    pools = tuple(EnginePool(USABLE + 1, 16, NULL_BLOCKS_VLLM, str(rank)) for rank in (0, 1))
    reading = EngineReading(at=0.0, pools=pools, token_hit_rate=measured, label="vllm /metrics")
    health = SourceHealth("events", "events", True, "connected", reports_hits=tracker.hits_reported)
    snap = SnapshotBuilder(SnapshotConfig()).build(
        merged, Readings(sources=(health,), engine=reading, engine_model=model, ranks=per_rank), now=0.0
    )
    op = snap.get(OperatingPoint)
    # each rank's block pool is replayed at its own size: read at the merged pool it would be far too high
    assert op.predicted_token_hit_rate == pytest.approx(measured, abs=0.02)
    assert model.at(pool).hit_rate > measured + 0.05
    assert "over 2 ranks, 250 in each" in dict(op.model_inputs)["pool"]
    # the LRU figure is each rank's own LRU at its pool, not one shared LRU of both pools
    own = [a.curve() for a in per_rank.values()]
    separate = sum(c.hits(USABLE, "tokens") for c in own) / sum(c.tokens for c in own)
    assert op.lru("all") == pytest.approx(separate)
    assert op.lru("all") != pytest.approx(snap.get(Curves).curve("all").hit_rate(pool, "tokens"))
    assert any("2 data-parallel ranks" in n for n in op.notes)
    # the effective capacity is each rank's: their own LRUs of that size hit what the model hits
    eff = op.effective_capacity_blocks
    assert 0 < eff < USABLE
    tokens = sum(c.tokens for c in own)
    need = model.at(USABLE).hit_tokens * tokens / (model.query_tokens - model.partial_tail_tokens)
    assert sum(c.hits(eff - 1, "tokens") for c in own) < need <= sum(c.hits(eff, "tokens") for c in own)


def test_an_sglang_stream_is_predicted_by_sglangs_own_policy():
    """SGLang 0.5.23's own events (tests/fixtures/sglang_kv_events) through the tracker, the summed model
    and the snapshot: the operating point names SGLang's radix cache, predicts within 2 points of what
    SGLang counted, and gives no advice meant for vLLM."""
    from kvset.engine.kv_event_health import kv_event_health
    from kvset.engine_model.radix_cache import MODEL_NAME as SGLANG_MODEL_NAME
    from tests.support.sglang_fixtures import consume, messages, truth

    t = truth("coalesced")
    pages = t["pool_tokens"] // t["page_size"]
    rejects = RejectCounter()
    tracker = KvEventTracker(["tcp://sglang"], [None], rejects)
    analyzer, model = Analyzer(), EngineModel()
    for ts, frames in messages("coalesced"):
        tracker.published(0, frames, now=ts, at=ts)
    update = tracker.take(at=0.0, final=True)
    analyzer.feed_batch(update.accesses)
    model.add(0, update.engine_model)
    assert consume(messages("coalesced")).accesses == len(update.accesses.keys)
    reading = EngineReading(
        at=0.0,
        pools=(EnginePool(pages, t["page_size"]),),
        token_hit_rate=t["hit_rate"],
        label="sglang /metrics",
    )
    parts = kv_event_health(tracker, 0.0)
    health = SourceHealth(
        "events", "events", True, "connected", notes=parts.notes, reports_hits=parts.reports_hits
    )
    snap = SnapshotBuilder(SnapshotConfig()).build(
        analyzer, Readings(sources=(health,), engine=reading, engine_model=model), now=0.0
    )
    op = snap.get(OperatingPoint)
    assert op.model == SGLANG_MODEL_NAME and op.model_label == "SGLang model"
    assert op.predicted_token_hit_rate == pytest.approx(t["hit_rate"], abs=0.02)
    assert snap.curve_scope != MISSES_ONLY
    js = snapshot_json(snap)
    assert js["operating_point"]["predicted_by"] == SGLANG_MODEL_NAME
    assert "vllm_xargs" not in str(js)
    assert f"predicted (a MODEL: {SGLANG_MODEL_NAME}, whole stream)" in snapshot_text(snap)
