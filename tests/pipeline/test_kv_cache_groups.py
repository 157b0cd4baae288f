"""A hybrid model's KV cache groups: each group's own accesses from its events (a sliding-window group
reads only its window before the hit point), their exact curve and working sets in the snapshot's JSON,
against a per-group naive replay of the fake engine's own requests."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from kvset.core.analyzer import Analyzer
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.rejects import RejectCounter
from kvset.report import snapshot_json
from kvset.snapshot.builder import Readings, SnapshotBuilder, SnapshotConfig
from kvset.types import SourceHealth
from tests.support.kv_values import message, removed, stored
from tests.support.vllm_engine_sim import SimEngine, agentic_requests

WINDOW = 49  # tokens: a hit needs the ceil(48 / 16) = 3 blocks before its end in the window group


def hybrid_events(events: list) -> list[dict]:
    """One fake-engine step's events as a hybrid model publishes them: once per group, same hashes."""
    out = []
    for group, kind in ((0, "full_attention"), (1, "sliding_window")):
        for e in events:
            if e[0] == "removed":
                out.append(removed(e[1], group_idx=group))
                continue
            ev = stored(e[1], parent=e[2], group_idx=group, spec_kind=kind)
            if group == 1:
                ev["kv_cache_spec_sliding_window"] = WINDOW
            out.append(ev)
    return out


def naive_lru_distances(stream: list[int]) -> list[float]:
    stack: list[int] = []
    out = []
    for key in stream:
        if key in stack:
            i = stack.index(key)
            out.append(len(stack) - i)
            del stack[i]
        else:
            out.append(math.inf)
        stack.append(key)
    return out


def test_each_groups_working_sets_are_exact_against_a_naive_replay_of_its_own_accesses():
    engine = SimEngine(600)
    requests = agentic_requests(6, 8, sessions=2, seed=3)
    batches = engine.run(requests)
    assert engine.preemptions == 0  # (a readmission would be a request of its own)
    tracker = KvEventTracker(["tcp://e"], [None], RejectCounter())
    for i, (step, events) in enumerate(batches):
        tracker.published(0, message(i, hybrid_events(events), 1000.0 + step / 1000), now=0.0, at=0.0)
    update = tracker.take(at=0.0, final=True)
    groups = {g.group_idx: g for g in update.kv_cache_groups}
    assert groups[0].kind == "full_attention" and groups[0].counted
    assert groups[1].kind == "sliding_window" and groups[1].sliding_window == WINDOW
    parts = dict(update.group_accesses)

    def per_request(batch) -> Counter:
        starts = [*batch.request_starts.tolist(), len(batch.keys)]
        keys = batch.keys.tolist()
        return Counter(tuple(keys[a:b]) for a, b in zip(starts, starts[1:], strict=False))

    # the engine's own requests: every block for full attention, the window before the hit on
    assert per_request(parts[0]) == Counter(tuple(r.hashes) for r in requests)
    assert per_request(parts[1]) == Counter(tuple(r.hashes[max(0, r.hit_blocks - 3) :]) for r in requests)

    analyzers = {}
    for g, batch in parts.items():
        analyzers[g] = Analyzer()
        analyzers[g].feed_batch(batch)
    health = SourceHealth("events", "events", True, "connected", reports_hits=tracker.hits_reported)
    snap = SnapshotBuilder(SnapshotConfig()).build(
        analyzers[0],
        Readings(sources=(health,), kv_cache_groups={g: (groups[g], a) for g, a in analyzers.items()}),
        now=0.0,
    )
    js = {g["group_idx"]: g for g in snapshot_json(snap)["kv_cache_groups"]}
    assert set(js) == {0, 1} and js[1]["kind"] == "sliding_window" and js[1]["block_size"] == 16
    for g, batch in parts.items():
        d = np.array(naive_lru_distances(batch.keys.tolist()))
        hits_all = int(np.isfinite(d).sum())
        for row in js[g]["working_sets"]:
            if row["mode"] != "coverage":
                continue
            need = math.ceil(row["target"] * hits_all)
            naive = next(c for c in range(1, len(d) + 1) if (d <= c).sum() >= need)
            assert row["capacity_blocks"] == naive
    # a window group keeps far less: its working set is below full attention's
    ws = {g: next(r["capacity_blocks"] for r in js[g]["working_sets"] if r["target"] == 0.95) for g in js}
    assert ws[1] < ws[0]
