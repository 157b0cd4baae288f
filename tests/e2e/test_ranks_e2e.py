"""End to end: three fake vLLM data-parallel ranks on 127.0.0.1 (rank r on port + r) and the real
`kvset-top --once --json` and `kvset serve`: each rank's own figures equal an offline analysis of what
it published, and the pooling gain is the shared pool's hit rate minus the ranks' own."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from kvset.core.analyzer import Analyzer
from kvset.core.naive import simulate_lru
from kvset.exporter.collector import stack_distance_edges
from tests.support.kvset_serve import KvsetServe, sample, series
from tests.support.paths import ROOT
from tests.support.vllm_publisher import FakeVllmPublisher

RANKS = 3
RANK_POOL = 50


def traffic(seed: int = 21, requests: int = 150) -> list[tuple[int, list[int]]]:
    """A shared prompt and per-session histories, each request to a random rank."""
    rng = np.random.default_rng(seed)
    histories: list[list[int]] = [[] for _ in range(5)]
    out, fresh = [], 10_000
    for _ in range(requests):
        s = int(rng.integers(len(histories)))
        histories[s] += list(range(fresh, fresh + 3))
        fresh += 3
        out.append((int(rng.integers(RANKS)), list(range(1, 7)) + histories[s][-24:]))
    return out


def per_rank(requests) -> dict[int, list[int]]:
    sent: dict[int, list[int]] = {r: [] for r in range(RANKS)}
    for rank, keys in requests:
        sent[rank] += keys
    return sent


def publish(publishers, requests) -> None:
    for p in publishers:
        p.wait_for_subscriber(timeout=30)
    for rank, keys in requests:
        p = publishers[rank]
        p.publish([p.stored(keys)])


def endpoints(publishers) -> list[str]:
    return [a for p in publishers for a in ("--events", p.endpoint)]


@pytest.fixture
def publishers():
    pubs = [FakeVllmPublisher(rank=r) for r in range(RANKS)]
    yield pubs
    for p in pubs:
        p.close()


def test_once_json_has_each_ranks_own_curve_and_the_pooling_gain(publishers):
    requests = traffic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kvset_tui",
            "--once",
            "--json",
            *endpoints(publishers),
            "--capacity",
            str(RANK_POOL),
            "--duration",
            "5",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    publish(publishers, requests)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    report = json.loads(out)
    sent = per_rank(requests)
    assert report["accesses"] == sum(len(k) for k in sent.values())
    assert [r["rank"] for r in report["ranks"]] == list(range(RANKS))
    separate = 0
    for r in report["ranks"]:
        keys = sent[r["rank"]]
        offline = Analyzer()
        offline.feed(np.array(keys, dtype=np.uint64), tokens=16, timestamps=0.0)
        c = offline.curve()
        assert r["accesses"] == len(keys) and r["distinct_blocks"] == len(set(keys))
        for row in r["curve"]:
            assert row["block_hit_rate"] == pytest.approx(c.hit_rate(row["capacity_blocks"]))
        hits = simulate_lru(keys, RANK_POOL)[0]
        assert r["pool"]["block_hit_rate"] == pytest.approx(hits / len(keys))
        separate += hits
    p = report["pooling"]
    assert p["computed"] and p["capacity_blocks"] == RANKS * RANK_POOL and p["capacity_source"] == "chosen"
    assert p["separate_block_hit_rate"] == pytest.approx(separate / report["accesses"])
    # the shared pool's figure is the merged curve at the ranks' pools added up
    shared_row = next(row for row in report["curve"] if row["capacity_blocks"] >= RANKS * RANK_POOL)
    assert p["shared_block_hit_rate"] <= shared_row["block_hit_rate"]
    assert p["block_gain"] == pytest.approx(p["shared_block_hit_rate"] - p["separate_block_hit_rate"])
    assert p["block_gain"] > 0


def test_kvset_serve_exports_each_rank_and_the_pooling_gain(publishers):
    requests = traffic(seed=22)
    sent = per_rank(requests)
    total = sum(len(k) for k in sent.values())
    with KvsetServe(
        *endpoints(publishers),
        "--capacity",
        str(RANK_POOL),
        "--capacities",
        "8,64",
        "--interval",
        "0.2",
        "--listen",
        "127.0.0.1:0",
    ) as serve:
        publish(publishers, requests)
        s = serve.scrape_until(
            lambda s: (
                sum(v for _, v in series(s, "kvset_rank_accesses_total")) == total
                and sample(s, "kvset_accesses_total") == total
            ),
            timeout=30,
        )[-1]
    separate = 0
    for rank, keys in sent.items():
        r = str(rank)
        offline = Analyzer()
        offline.feed(np.array(keys, dtype=np.uint64), tokens=16, timestamps=0.0)
        c = offline.curve()
        assert sample(s, "kvset_rank_accesses_total", rank=r) == len(keys)
        assert sample(s, "kvset_rank_capacity_blocks", rank=r) == RANK_POOL
        for cap in (8, 64, RANK_POOL):
            assert sample(
                s, "kvset_rank_hit_rate", rank=r, capacity_blocks=str(cap), unit="blocks"
            ) == pytest.approx(c.hit_rate(cap))
        assert sample(
            s, "kvset_rank_working_set_blocks", rank=r, target="0.95", mode="coverage"
        ) == c.working_set(0.95)
        for edge in stack_distance_edges(1 << 22)[:12]:
            assert sample(
                s, "kvset_rank_stack_distance_blocks_bucket", rank=r, le=f"{float(edge)}"
            ) == c.hits(edge)
        separate += simulate_lru(keys, RANK_POOL)[0]
    assert sample(s, "kvset_pooling_capacity_blocks") == RANKS * RANK_POOL
    assert sample(s, "kvset_pooling_separate_hit_rate", unit="blocks") == pytest.approx(separate / total)
    shared = sample(s, "kvset_pooling_shared_hit_rate", unit="blocks")
    assert sample(s, "kvset_pooling_gain", unit="blocks") == pytest.approx(shared - separate / total)
    # the merged stream's metrics keep their meaning: no rank label, every access counted once
    assert sample(s, "kvset_stack_distance_blocks_count") == total
    assert all("rank" not in labels for labels, _ in series(s, "kvset_working_set_blocks"))
