"""Data-parallel ranks through the whole pipeline: three fake vLLM ranks on 127.0.0.1, the real KV-events
source, the monitor and the snapshot builder. Each rank's curve equals an offline analysis of what that
rank published, the merged curve equals the analysis of the interleaved stream the monitor received,
and the pooling gain equals a naive LRU replay of both, in blocks and in tokens."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from kvset.api import Curves, Ranks
from kvset.core.analyzer import Analyzer
from kvset.core.naive import simulate_lru
from kvset.monitor import Monitor
from kvset.report import snapshot_json, snapshot_text
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.kv_events import KvEventsSource
from tests.support.vllm_publisher import FakeVllmPublisher

RANKS = 3
RANK_POOL = 40  # --capacity: each rank's own pool


class RecordingAnalyzer(Analyzer):
    """The real analyzer, keeping the merged stream in the order the monitor fed it."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.fed: list = []

    def feed_batch(self, batch, return_distances=False):
        self.fed.append(batch)
        return super().feed_batch(batch, return_distances)


def agent_traffic(seed: int = 9, requests: int = 240):
    """Requests of a few sessions (a shared system prompt, then each session's growing history), each
    sent to a random rank, as a load-balancing router does; a last block of its own token count."""
    rng = np.random.default_rng(seed)
    system = list(range(1, 9))
    histories = [[] for _ in range(6)]
    next_key = 1000
    out = []
    for _ in range(requests):
        s = int(rng.integers(len(histories)))
        grow = int(rng.integers(1, 5))
        histories[s] += list(range(next_key, next_key + grow))
        next_key += grow
        keys = system + histories[s][-30:]
        last = int(rng.integers(1, 17))
        out.append((int(rng.integers(RANKS)), keys, 16 * (len(keys) - 1) + last))
    return out


def offline(keys, tokens) -> Analyzer:
    a = Analyzer()
    a.feed(np.array(keys, dtype=np.uint64), tokens=np.array(tokens, dtype=np.int64), timestamps=0.0)
    return a


def run_monitor(publishers, traffic, config: SnapshotConfig):
    """Publish the traffic and run the monitor until its snapshot holds every access."""

    def analyzer(units, **slots):
        return RecordingAnalyzer(units=units, **slots)

    source = KvEventsSource([p.endpoint for p in publishers], idle_tick=0.05)
    monitor = Monitor([source], analyzer, SnapshotBuilder(config), interval=0.05)
    snapshots: list = []
    stop = threading.Event()
    thread = threading.Thread(target=monitor.run, args=(stop, snapshots.append), daemon=True)
    thread.start()
    try:
        for p in publishers:
            p.wait_for_subscriber()
        for rank, keys, n_tokens in traffic:
            p = publishers[rank]
            p.publish([p.stored(keys, token_ids=list(range(n_tokens)))])
        expected = sum(len(k) for _, k, _ in traffic)
        deadline = time.monotonic() + 20
        while not snapshots or snapshots[-1].totals.accesses < expected:
            assert time.monotonic() < deadline, "the monitor did not receive every access"
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join(timeout=5)
    return snapshots[-1], monitor.analyzer


@pytest.fixture(scope="module")
def ranked():
    traffic = agent_traffic()
    publishers = [FakeVllmPublisher(rank=r) for r in range(RANKS)]
    try:
        snap, analyzer = run_monitor(publishers, traffic, SnapshotConfig(options={"capacity": RANK_POOL}))
    finally:
        for p in publishers:
            p.close()
    sent = {r: ([], []) for r in range(RANKS)}  # rank -> (keys, tokens) in the order it published them
    for rank, keys, n_tokens in traffic:
        sent[rank][0].extend(keys)
        sent[rank][1].extend([16] * (len(keys) - 1) + [n_tokens - 16 * (len(keys) - 1)])
    merged_keys = np.concatenate([b.keys for b in analyzer.fed]).tolist()
    merged_tokens = np.concatenate([b.tokens for b in analyzer.fed]).tolist()
    merged_ranks = np.concatenate([np.broadcast_to(b.rank, (len(b),)) for b in analyzer.fed]).tolist()
    return snap, sent, merged_keys, merged_tokens, merged_ranks


def test_the_merged_stream_is_every_ranks_accesses_interleaved(ranked):
    _, sent, merged_keys, merged_tokens, merged_ranks = ranked
    for rank, (keys, tokens) in sent.items():
        mine = [i for i, r in enumerate(merged_ranks) if r == rank]
        assert [merged_keys[i] for i in mine] == keys
        assert [merged_tokens[i] for i in mine] == tokens
    assert len(merged_keys) == sum(len(k) for k, _ in sent.values())


def test_each_ranks_curve_is_the_offline_analysis_of_what_it_published(ranked):
    snap, sent, *_ = ranked
    assert [v.rank for v in snap.get(Ranks).views] == list(range(RANKS))
    for view in snap.get(Ranks).views:
        keys, tokens = sent[view.rank]
        expected = offline(keys, tokens).curve()
        assert view.accesses == len(keys) and view.distinct_blocks == len(set(keys))
        np.testing.assert_array_equal(view.curve.block_hits, expected.block_hits)
        np.testing.assert_array_equal(view.curve.token_hits, expected.token_hits)
        assert (view.curve.hits(RANK_POOL), view.curve.hits(RANK_POOL, "tokens")) == simulate_lru(
            keys, RANK_POOL, tokens
        )
        for row in view.working_set_rows("coverage"):
            assert row.window == "all" and row.capacity_blocks == expected.working_set(row.target)
            assert row.fits_pool == (row.capacity_blocks <= RANK_POOL)


def test_the_merged_curve_is_the_offline_analysis_of_the_interleaved_stream(ranked):
    snap, _, merged_keys, merged_tokens, _ = ranked
    expected = offline(merged_keys, merged_tokens).curve()
    np.testing.assert_array_equal(snap.get(Curves).curve("all").block_hits, expected.block_hits)
    np.testing.assert_array_equal(snap.get(Curves).curve("all").token_hits, expected.token_hits)


def test_the_pooling_gain_is_a_shared_lru_against_one_lru_per_rank(ranked):
    snap, sent, merged_keys, merged_tokens, _ = ranked
    total_blocks, total_tokens = len(merged_keys), sum(merged_tokens)
    shared = simulate_lru(merged_keys, RANKS * RANK_POOL, merged_tokens)
    separate = [simulate_lru(keys, RANK_POOL, tokens) for keys, tokens in sent.values()]
    p = snap.get(Ranks).pooling
    assert p is not None and snap.get(Ranks).note is None
    assert p.capacity_blocks == RANKS * RANK_POOL and p.capacity_source == "chosen"
    assert p.shared_hit_rate["blocks"] == pytest.approx(shared[0] / total_blocks)
    assert p.shared_hit_rate["tokens"] == pytest.approx(shared[1] / total_tokens)
    assert p.separate_hit_rate["blocks"] == pytest.approx(sum(h for h, _ in separate) / total_blocks)
    assert p.separate_hit_rate["tokens"] == pytest.approx(sum(t for _, t in separate) / total_tokens)
    # the sessions are spread over the ranks: one shared pool holds each session's history once
    assert p.gain("blocks") == pytest.approx((shared[0] - sum(h for h, _ in separate)) / total_blocks)
    assert p.gain("blocks") > 0.05


def test_once_json_and_text_carry_the_ranks_and_the_pooling_gain(ranked):
    snap, sent, *_ = ranked
    out = snapshot_json(snap)
    assert [r["rank"] for r in out["ranks"]] == list(range(RANKS))
    for r in out["ranks"]:
        keys, tokens = sent[r["rank"]]
        c = offline(keys, tokens).curve()
        assert r["accesses"] == len(keys) and r["tokens"] == sum(tokens)
        assert r["pool"]["capacity_blocks"] == RANK_POOL and r["pool"]["source"] == "chosen"
        assert r["pool"]["block_hit_rate"] == pytest.approx(c.hit_rate(RANK_POOL))
        # one capacity grid for every rank and the merged curve, so the rows line up
        assert [row["capacity_blocks"] for row in r["curve"]] == [
            row["capacity_blocks"] for row in out["curve"]
        ]
        for row in r["curve"]:
            assert row["token_hit_rate"] == pytest.approx(c.hit_rate(row["capacity_blocks"], "tokens"))
        ws = {(w["target"], w["mode"]): w["capacity_blocks"] for w in r["working_sets"]}
        assert ws[(0.95, "coverage")] == c.working_set(0.95) and ws[(0.5, "absolute")] == c.working_set(
            0.5, "absolute"
        )
    pooling = out["pooling"]
    assert pooling["computed"] and pooling["capacity_blocks"] == RANKS * RANK_POOL
    assert pooling["rank_capacity_blocks"] == {str(r): RANK_POOL for r in range(RANKS)}
    assert pooling["block_gain"] == pytest.approx(snap.get(Ranks).pooling.gain("blocks"))
    assert "sum of the ranks' pools" in pooling["how"]
    text = snapshot_text(snap)
    assert f"one shared pool of {RANKS * RANK_POOL:,} blocks" in text
    assert f"gain {100 * snap.get(Ranks).pooling.gain('blocks'):+.2f} pt" in text
