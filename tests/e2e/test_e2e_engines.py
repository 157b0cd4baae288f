"""End to end: a fake engine on 127.0.0.1 (vLLM's ZMQ KV events, a growing vLLM log, a /metrics server)
and the real `kvset-top --once --json`: the curve and operating point equal what the same accesses
give offline."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from kvset.core.analyzer import Analyzer
from kvset.formats.vllm_hash import block_keys
from tests.support.engine_metrics_server import FakeEngine
from tests.support.paths import ROOT
from tests.support.vllm_engine_sim import SimEngine, agentic_requests
from tests.support.vllm_publisher import FakeVllmPublisher


def start_kvset_top(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kvset_tui", "--once", "--json", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out)


def assert_same_curve(report: dict, keys: list[int], tokens_per_block: int) -> None:
    offline = Analyzer()
    offline.feed(np.array(keys, dtype=np.uint64), tokens=tokens_per_block, timestamps=0.0)
    c = offline.curve()
    assert report["accesses"] == len(keys)
    assert report["distinct_blocks"] == len(set(keys))
    assert len(report["curve"]) > 5
    for point in report["curve"]:
        cap = point["capacity_blocks"]
        assert point["block_hit_rate"] == pytest.approx(c.hit_rate(cap)), cap
        assert point["token_hit_rate"] == pytest.approx(c.hit_rate(cap, "tokens")), cap


def publish_engine(pub: FakeVllmPublisher, batches: list[tuple[int, list]]) -> None:
    """The simulated engine's event batches over the fake publisher, as vLLM 0.33 sends them (a step a ms)."""
    for step, events in batches:
        pub.publish(
            [pub.stored(e[1], parent=e[2]) if e[0] == "stored" else pub.removed(e[1]) for e in events],
            ts=1000.0 + step / 1000,
        )


def test_kv_events_once_json_is_the_exact_curve_of_the_requests_seen(tmp_path):
    requests = agentic_requests(4, 8, sessions=2, seed=4)
    engine = SimEngine(usable=400)
    batches = engine.run(requests)
    record = tmp_path / "seen.jsonl"
    with FakeVllmPublisher() as pub:
        proc = start_kvset_top(
            "--events",
            pub.endpoint,
            "--replay-endpoint",
            pub.replay_endpoint,
            "--duration",
            "6",
            "--record",
            str(record),
        )
        pub.wait_for_subscriber(timeout=20)
        publish_engine(pub, batches)
        report = finish(proc)
    # each engine request is one request, its blocks in chain order, as the engine held them
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert sorted(tuple(line["hash_ids"]) for line in lines) == sorted(tuple(r.hashes) for r in requests)
    # its prompt blocks carry their tokens; its output blocks none (the engine does not query them)
    # (an output block filled in the very next step, after a prompt of 15 tokens past its last full
    # block, looks like the prompt's last chunk: no event tells them apart)
    by_chain = {tuple(r.hashes): r for r in requests}
    for line in lines:
        r = by_chain[tuple(line["hash_ids"])]
        assert line["input_length"] - len(r.prompt) * 16 in ((0, 16) if r.tail_tokens == 15 else (0,))
    # and the curve is the exact LRU curve of that stream
    keys = [k for line in lines for k in line["hash_ids"]]
    tokens = [t for line in lines for t in line.get("block_tokens") or [16] * len(line["hash_ids"])]
    offline = Analyzer()
    offline.feed(np.array(keys, dtype=np.uint64), tokens=np.array(tokens), timestamps=0.0)
    c = offline.curve()
    assert report["accesses"] == len(keys) and report["requests"] == len(requests)
    for point in report["curve"]:
        cap = point["capacity_blocks"]
        assert point["block_hit_rate"] == pytest.approx(c.hit_rate(cap)), cap
        assert point["token_hit_rate"] == pytest.approx(c.hit_rate(cap, "tokens")), cap
    events = next(s for s in report["sources"] if s["kind"] == "events")
    assert events["rejected"] == 0
    assert any("hits reported" in n for n in events["notes"])


def test_kv_events_and_metrics_predict_the_engines_own_hit_rate():
    # eight agents on a pool where running requests pin most blocks and waiting ones are looked up
    # again every step: the prediction is for the engine, not for an LRU of its pool
    engine = SimEngine(usable=300)
    batches = engine.run(agentic_requests(8, 10, sessions=6, seed=1))
    metrics = FakeEngine()
    metrics.num_gpu_blocks = 301  # vLLM's null block on top
    metrics.queries, metrics.hits = 0.0, 0.0
    try:
        with FakeVllmPublisher() as pub:
            proc = start_kvset_top(
                "--events",
                pub.endpoint,
                "--replay-endpoint",
                pub.replay_endpoint,
                "--metrics",
                metrics.url,
                "--metrics-interval",
                "0.3",
                "--metrics-window",
                "600",
                "--duration",
                "8",
            )
            pub.wait_for_subscriber(timeout=20)
            deadline = time.monotonic() + 30
            while not metrics.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            publish_engine(pub, batches)
            metrics.queries, metrics.hits = float(engine.query_tokens), float(engine.hit_tokens)
            report = finish(proc)
    finally:
        metrics.stop()
    op = report["operating_point"]
    # the pool is the blocks that can cache: num_gpu_blocks less vLLM's null block
    assert op["capacity_blocks"] == 300 and op["model"] == "vLLM block-pool replay"
    assert op["measured_token_hit_rate"] == pytest.approx(engine.measured_token_hit_rate)
    assert op["predicted_token_hit_rate"] == pytest.approx(engine.measured_token_hit_rate, abs=0.015)
    assert op["difference"] == pytest.approx(op["measured_token_hit_rate"] - op["predicted_token_hit_rate"])
    # the ideal LRU of the whole pool promises more than the engine gives (part of it is pinned), and the
    # prediction is the engine's, nearer to it than that LRU
    lru_over = op["lru_token_hit_rate"] - op["measured_token_hit_rate"]
    assert lru_over > 0
    assert abs(op["predicted_token_hit_rate"] - op["measured_token_hit_rate"]) < lru_over
    assert 0 < op["effective_capacity_blocks"] < 300
    # the lookups of waiting requests that were not admitted were dropped, and counted (a few are taken
    # for another's: two waiting requests whose cached prefixes nest look alike)
    assert op["dedupe"]["not_admitted"] == pytest.approx(engine.not_admitted_reports, rel=0.01)
    assert engine.not_admitted_reports > 1000
    breakdown = op["miss_breakdown"]
    assert sum(breakdown.values()) == pytest.approx(1.0)
    assert breakdown["hit"] == pytest.approx(op["predicted_token_hit_rate"])
    assert breakdown["pinned"] > 0 and breakdown["first_time"] > 0
    assert {"pool", "finishes", "pinned now"} <= set(op["model_inputs"])


def vllm_request_line(i: int, ids: list[int], second: int) -> str:
    return (
        f"(APIServer pid=2311) DEBUG 03-14 09:{second // 60:02d}:{second % 60:02d} [logger.py:48] Request "
        f"chatcmpl-{i:08x} details: prompt: None, prompt_token_ids: {ids}, prompt_embeds shape: None.\n"
    )


def test_growing_log_and_metrics_once_json_equal_offline(tmp_path):
    rng = np.random.default_rng(3)
    system = rng.integers(1000, 30000, 64).tolist()
    prompts, histories = [], [[] for _ in range(4)]
    for turn in range(40):
        s = turn % 4
        histories[s] += rng.integers(1000, 30000, int(rng.integers(10, 50))).tolist()
        prompts.append(system + histories[s])
    log = tmp_path / "vllm.log"
    log.write_text("".join(vllm_request_line(i, p, i) for i, p in enumerate(prompts[:20])))
    engine = FakeEngine()
    try:
        engine.queries, engine.hits = 1000.0, 0.0
        proc = start_kvset_top(
            "--log", str(log), "--metrics", engine.url, "--metrics-interval", "0.3", "--duration", "6"
        )
        deadline = time.monotonic() + 30  # a loaded machine starts kvset-top slowly: wait for its first poll
        while not engine.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        with log.open("a") as f:  # the log grows while kvset-top follows it
            f.write("".join(vllm_request_line(i, p, i) for i, p in enumerate(prompts[20:], 20)))
        engine.queries, engine.hits = 3000.0, 1200.0  # 1200 hits of 2000 new queries: 60 %
        report = finish(proc)
    finally:
        engine.stop()
    keys = [int(k) for p in prompts for k in block_keys(p, 16)]
    assert_same_curve(report, keys, 16)
    op = report["operating_point"]
    # num_gpu_blocks of the fixture's cache_config_info, less the null block
    assert op["capacity_blocks"] == 61274
    assert op["measured_token_hit_rate"] == pytest.approx(0.6)
    offline = Analyzer()
    offline.feed(np.array(keys, dtype=np.uint64), tokens=16, timestamps=0.0)
    assert op["predicted_token_hit_rate"] == pytest.approx(offline.curve().hit_rate(61274, "tokens"))
    assert op["difference"] == pytest.approx(0.6 - op["predicted_token_hit_rate"])
