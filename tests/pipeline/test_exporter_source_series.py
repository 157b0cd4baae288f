"""The exporter's per-source series through the real pipeline (issue 20, items 18, 24 and 25).

Two fake vLLM ranks without a replay endpoint, one losing every fifth batch on the way: the real
KV-events source, the monitor and the exporter's collector say the lost batches and the gaps the
test itself dropped, labelled by kind and address. An engine /metrics whose body carries one
unparsable line with a token that changes every poll: the number of rejection series stays one,
however many polls are refused.
"""

from __future__ import annotations

import threading
import time

from prometheus_client import generate_latest

from kvset.core.stack_distance import new_analyzer
from kvset.exporter import Exporter
from kvset.monitor import Monitor
from kvset.rejects import MAX_REASONS, RejectCounter, reason_code
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.kv_events import KvEventsSource
from kvset.sources.metrics import MetricsSource
from tests.support.engine_metrics_server import FakeEngine, vllm_exposition
from tests.support.kvset_serve import parse_exposition, series
from tests.support.vllm_publisher import FakeVllmPublisher

BATCHES = 23  # per rank; on the lossy one, batches 5, 10, 15 and 20 are dropped, each followed by one
LOSE_EVERY = 5


def _run(source, until, timeout: float = 20.0):
    """The monitor over one source, publishing to an exporter, until `until(exposition samples)`."""
    exporter = Exporter()
    monitor = Monitor([source], new_analyzer, SnapshotBuilder(SnapshotConfig()), interval=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=monitor.run, args=(stop, exporter.publish), daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            samples = parse_exposition(generate_latest(exporter.registry).decode())
            if until(samples):
                return samples
            assert time.monotonic() < deadline, f"not reached; last scrape: {samples}"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=5)
        exporter.close()


def test_a_rank_losing_every_fifth_batch_shows_its_lost_batches_and_gaps():
    ranks = [FakeVllmPublisher(rank=r, replay=False) for r in range(2)]
    source = KvEventsSource([p.endpoint for p in ranks], idle_tick=0.05)
    lost = 0
    delivered_blocks = 0
    published = threading.Event()

    def publish() -> None:
        nonlocal lost, delivered_blocks
        for p in ranks:
            p.wait_for_subscriber()
        for i in range(BATCHES):
            for r, p in enumerate(ranks):
                dropped = r == 1 and i % LOSE_EVERY == LOSE_EVERY - 1
                keys = [10_000 * r + 3 * i + k for k in range(3)]
                p.publish([p.stored(keys)], deliver=not dropped)
                lost += dropped
                delivered_blocks += 0 if dropped else len(keys)
        published.set()

    def counted(samples) -> bool:
        got = series(samples, "kvset_batches_lost_total")
        return published.is_set() and bool(got) and got[0][1] == lost

    sender = threading.Thread(target=publish, daemon=True)
    try:
        sender.start()
        samples = _run(source, counted)
    finally:
        sender.join(timeout=10)
        for p in ranks:
            p.close()
    labels = {"kind": "events", "address": ",".join(p.endpoint for p in ranks)}
    assert lost == 4
    assert series(samples, "kvset_batches_lost_total") == [(labels, 4.0)]
    assert series(samples, "kvset_sequence_gaps_total") == [(labels, 4.0)]
    assert series(samples, "kvset_source_up") == [(labels, 1.0)]  # connected, yet losing batches
    ((backlog_labels, _),) = series(samples, "kvset_backlog_batches")
    ((_, waiting),) = series(samples, "kvset_backlog_accesses")
    assert backlog_labels == labels and 0 <= waiting <= delivered_blocks


def test_a_changing_token_in_rejected_polls_keeps_the_series_bounded():
    engine = FakeEngine()
    polls = {"n": 0}
    good = vllm_exposition(1000.0, 100.0)

    def body() -> bytes:  # every poll's body a new unparsable line: a token never seen before
        polls["n"] += 1
        return (good + f'vllm:odd{{x="{polls["n"]}"}} not-a-number-{polls["n"]}\n').encode()

    engine.body_factory = body
    source = MetricsSource(engine.url, interval=0.02, timeout=0.5, max_backoff=0.02, window_s=60.0)
    try:
        seen_reasons: set[str] = set()

        def many_refused(samples) -> bool:
            seen_reasons.update(lb["reason"] for lb, _ in series(samples, "kvset_rejection_reason_info"))
            rejected = series(samples, "kvset_rejected_total")
            return bool(rejected) and rejected[0][1] >= 20

        samples = _run(source, many_refused)
    finally:
        engine.stop()
    labels = {"kind": "metrics", "address": engine.url}
    ((rej_labels, count),) = series(samples, "kvset_rejected_total")
    assert rej_labels == {**labels, "code": "unparsable_metrics"} and count >= 20
    assert series(samples, "kvset_rejection_reason_info") == [
        ({**rej_labels, "reason": "unparsable metrics text"}, 1.0)
    ]
    assert seen_reasons == {"unparsable metrics text"}  # one series over every poll, not one per token


def test_reasons_quoting_changing_input_are_bounded_and_coded():
    rejects = RejectCounter()
    for i in range(1000):
        rejects.reject(f"weird thing number {i}", f"line {i}")
    summary = rejects.summary()
    assert len(summary) == MAX_REASONS + 1 and rejects.total == 1000
    further = [r for r in summary if r.code == "further_reasons"]
    assert len(further) == 1 and further[0].count == 1000 - MAX_REASONS
    assert further[0].examples[0] == f"weird thing number {MAX_REASONS} (line {MAX_REASONS})"
    assert {r.code for r in summary} == {"other", "further_reasons"}
    assert reason_code("not JSON") == "not_json" and reason_code("event: unknown type") == "bad_event"
