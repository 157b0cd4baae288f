"""vLLM 0.33.0's default ("incremental") KV events, as its real ZmqEventPublisher sent them, against the
same run in "full" report mode, where the engine itself published every lookup's hits.

The two recordings (tests/fixtures/vllm_kv_events/README.md) are one schedule of vLLM's real scheduler
(events change nothing it does), so the requests kvset reconstructs from the default stream must be
requests the full stream shows, hits included, and the engine model on them must predict the hit rate
vLLM's own counters measured.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.vllm_engine.frames import read as recorded  # the harness's reader of its recordings
from kvset.engine.kv_event_health import RECONSTRUCTED_NOTE, kv_event_health
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.engine_model.summed import EngineModel
from kvset.rejects import RejectCounter

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm_kv_events"


def replayed(mode: str):
    tracker = KvEventTracker(["tcp://127.0.0.1:5557"], [None], RejectCounter())
    for t, frames in recorded(FIXTURES / f"vllm0330_agents_{mode}.zmqframes.gz"):
        tracker.published(0, frames, now=t, at=t)
    update = tracker.take(at=1e12, final=True)
    batch = update.accesses
    starts = [*batch.request_starts.tolist(), len(batch.keys)]
    keys = batch.keys.tolist()
    requests = Counter(tuple(keys[a:b]) for a, b in zip(starts, starts[1:], strict=False))
    model = EngineModel()
    model.add(0, update.engine_model)
    return tracker, requests, model


@pytest.fixture(scope="module")
def truth() -> dict:
    return json.loads((FIXTURES / "vllm0330_agents_truth.json").read_text())


def test_the_default_streams_requests_are_the_full_streams_hits_included(truth):
    tracker, requests, _ = replayed("incremental")
    full_tracker, full_requests, _ = replayed("full")
    assert tracker.rejects.total == 0 and full_tracker.rejects.total == 0
    counts = tracker.request_counts()
    assert counts["reports"] == 0 and counts["reconstructed"] > 0 and counts.get("unknown_prefix", 0) == 0
    assert not requests - full_requests  # nothing invented: every one is a request the engine reported
    missing = sum((full_requests - requests).values())
    assert missing <= 0.02 * sum(full_requests.values())
    health = kv_event_health(tracker, at=0.0)
    assert health.hits_reconstructed and RECONSTRUCTED_NOTE in health.notes


@pytest.mark.parametrize("mode", ["incremental", "full"])
def test_the_engine_model_predicts_vllms_own_hit_rate(truth, mode):
    _, _, model = replayed(mode)
    predicted = model.at(truth["usable_blocks"]).hit_rate
    assert predicted == pytest.approx(truth["measured_token_hit_rate"], abs=0.02)
