"""The engine model's prediction per tenant, on vLLM 0.33.0's own KV events of a multi-tenant run
(tests/fixtures/vllm_kv_events/README.md): the tracker names each request's tenant, the engine
model's replay keeps each query block's, and each tenant's `predicted_token_hit_rate` (the model at
the pool, that tenant's query blocks alone) is set against the hit rate the engine's scheduler gave
that tenant's requests (its PrefillStats)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.vllm_engine.frames import read as recorded  # the harness's reader of its recordings
from kvset.api import OperatingPoint
from kvset.core.analyzer import Analyzer
from kvset.core.principals import PrincipalCollector
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.engine_model.summed import EngineModel
from kvset.rejects import RejectCounter
from kvset.report import snapshot_json
from kvset.report.as_text import snapshot_text
from kvset.snapshot.builder import Readings, SnapshotBuilder, SnapshotConfig
from kvset.types import EngineReading
from kvset.units import NULL_BLOCKS_VLLM, EnginePool

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm_kv_events"
POOL = 600  # num_gpu_blocks of the recorded run (vLLM's null block included)


def replayed():
    tracker = KvEventTracker(["tcp://127.0.0.1:5557"], [None], RejectCounter())
    for t, frames in recorded(FIXTURES / "vllm0330_tenants_full.zmqframes.gz"):
        tracker.published(0, frames, now=t, at=t)
    return tracker.take(at=1e12, final=True)


def test_without_by_the_engine_model_keeps_no_principals() -> None:
    model = EngineModel()  # a salted stream without --by: nothing more is kept
    model.add(0, replayed().engine_model)
    assert model.query_tokens > 0 and model.principal_hit_rate("tenant", 1, POOL) is None


def test_each_tenants_prediction_is_the_engine_models_for_its_requests() -> None:
    truth = json.loads((FIXTURES / "vllm0330_tenants_truth.json").read_text())["tenants"]
    update = replayed()
    analyzer, model, collector = Analyzer(), EngineModel(by_principal=True), PrincipalCollector(["tenant"])
    collector.feed(analyzer, update.accesses)
    model.add(0, update.engine_model)
    queries = sum(t["prompt_tokens"] for t in truth.values())
    hits = sum(t["cached_tokens"] for t in truth.values())
    reading = EngineReading(
        at=0.0,
        pools=(EnginePool(POOL, 16, NULL_BLOCKS_VLLM),),
        token_hit_rate=hits / queries,
        queries_since_start=queries,
        hits_since_start=hits,
        requests_since_start=sum(t["requests"] for t in truth.values()),
        label="vllm /metrics",
    )
    streams = collector.streams(analyzer)
    readings = Readings(engine=reading, engine_model=model, principals=streams)
    snap = SnapshotBuilder(SnapshotConfig()).build(analyzer, readings, now=0.0)
    op = snap.get(OperatingPoint)
    assert op.model is not None and op.model_pool_blocks == POOL - 1
    rows = {r["name"]: r for r in snapshot_json(snap)["principals"]}
    assert set(rows) == set(truth)
    for name, t in truth.items():
        assert rows[name]["predicted_token_hit_rate"] == pytest.approx(t["hit_rate"], abs=0.02)  # the goal
    # the tenants' predicted hit tokens add up to the model's (every query block has its tenant)
    query = {s.name: model.principal_query_tokens("tenant", s.principal_id) for s in streams["tenant"]}
    hits = sum(rows[n]["predicted_token_hit_rate"] * q for n, q in query.items())
    assert hits == pytest.approx(op.predicted_token_hit_rate * model.query_tokens)
    assert rows["flood"]["predicted_token_hit_rate"] < 0.1 < rows["acme"]["predicted_token_hit_rate"]
    said = next(line for line in snapshot_text(snap).splitlines() if "predicted token hit rate" in line)
    assert "a MODEL" in said and f"acme {100 * rows['acme']['predicted_token_hit_rate']:.1f}" in said
