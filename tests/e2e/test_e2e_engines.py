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
from kvset.workload import AgenticWorkload, WorkloadConfig
from tests.support.engine_metrics_server import FakeEngine
from tests.support.paths import ROOT
from tests.support.vllm_publisher import FakeVllmPublisher


def start_kvset_top(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kvset_tui", "--once", "--json", *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


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


def agent_requests(n: int) -> list[list[int]]:
    wl = AgenticWorkload(WorkloadConfig(seed=7, concurrency=6, prefix_blocks=8, tool_blocks=(1, 4), documents=50))
    return [wl.next_request()[0].tolist() for _ in range(n)]


def test_kv_events_once_json_equals_offline():
    requests = agent_requests(150)
    with FakeVllmPublisher() as pub:
        proc = start_kvset_top("--events", pub.endpoint, "--replay-endpoint", pub.replay_endpoint, "--duration", "6")
        pub.wait_for_subscriber(timeout=20)
        for i in range(0, len(requests), 10):  # 10 requests per batch, every access reported
            pub.publish([pub.stored(r) for r in requests[i : i + 10]])
        report = finish(proc)
    assert_same_curve(report, [k for r in requests for k in r], 16)
    events = next(s for s in report["sources"] if s["kind"] == "events")
    assert events["rejected"] == 0
    assert any("hits reported" in n for n in events["notes"])


def vllm_request_line(i: int, ids: list[int], second: int) -> str:
    return (f"(APIServer pid=2311) DEBUG 03-14 09:{second // 60:02d}:{second % 60:02d} [logger.py:48] Request "
            f"chatcmpl-{i:08x} details: prompt: None, prompt_token_ids: {ids}, prompt_embeds shape: None.\n")  # fmt: skip


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
        proc = start_kvset_top("--log", str(log), "--metrics", engine.url, "--metrics-interval", "0.3",
                               "--duration", "6")  # fmt: skip
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
    assert op["capacity_blocks"] == 61275  # num_gpu_blocks of the fixture's cache_config_info
    assert op["measured_token_hit_rate"] == pytest.approx(0.6)
    offline = Analyzer()
    offline.feed(np.array(keys, dtype=np.uint64), tokens=16, timestamps=0.0)
    assert op["predicted_token_hit_rate"] == pytest.approx(offline.curve().hit_rate(61275, "tokens"))
    assert op["difference"] == pytest.approx(0.6 - op["predicted_token_hit_rate"])
