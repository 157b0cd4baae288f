"""vLLM 0.33.0's own KV events of a multi-tenant run (tests/fixtures/vllm_kv_events/README.md): each
request kvset hands out is named by the cache salt and session id the engine's request carried."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.vllm_engine.frames import read as recorded  # the harness's reader of its recordings
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.rejects import RejectCounter
from kvset.types import PRINCIPAL_LEVELS, UNKNOWN_PRINCIPAL

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm_kv_events"
TENANT, SESSION = PRINCIPAL_LEVELS.index("tenant"), PRINCIPAL_LEVELS.index("session")


def test_each_request_is_named_by_the_salt_and_session_its_engine_request_carried() -> None:
    truth = json.loads((FIXTURES / "vllm0330_tenants_truth.json").read_text())
    # the engine's requests by the key of their prompt's last full block (a session's later turns
    # hold its earlier turns' keys: the same salt and session)
    by_key = {r["prompt_last_hash"]: (r["cache_salt"], r["session_id"]) for r in truth["requests"].values()}
    tracker = KvEventTracker(["tcp://127.0.0.1:5557"], [None], RejectCounter())
    for t, frames in recorded(FIXTURES / "vllm0330_tenants_full.zmqframes.gz"):
        tracker.published(0, frames, now=t, at=t)
    batch = tracker.take(at=1e12, final=True).accesses
    assert batch is not None and batch.principals is not None and tracker.rejects.total == 0
    names = batch.principal_names
    starts = [*batch.request_starts.tolist(), len(batch)]
    checked = 0
    for a, b in zip(starts, starts[1:], strict=False):
        engine = {by_key[k] for k in batch.keys[a:b].tolist() if k in by_key}
        if not engine:
            continue  # a request whose prompt fills no block of its own
        row = batch.principals[a]
        assert (batch.principals[a:b] == row).all()  # one request, one principal per level
        assert engine == {(names.name(int(row[TENANT])), names.name(int(row[SESSION])))}
        checked += 1
    assert checked >= 0.9 * len(truth["requests"])
    tenants = {names.name(int(p)) for p in batch.principals[:, TENANT]}
    assert tenants == set(truth["tenants"])  # every access attributed: no UNKNOWN_PRINCIPAL
    assert UNKNOWN_PRINCIPAL not in tenants
