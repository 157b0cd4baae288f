"""Where each rank's pool comes from, and when there is no pooling figure: the engine's pool split
evenly, --capacity as each rank's pool, no pool at all, accesses of no rank beside the ranks', a
single rank."""

from __future__ import annotations

import numpy as np
import pytest

from kvset.api import Curves, OperatingPoint, Ranks, ThrashingByWindow
from kvset.core.analyzer import Analyzer
from kvset.core.naive import simulate_lru
from kvset.core.stack_distance import new_analyzer
from kvset.monitor import Monitor
from kvset.report import snapshot_json, snapshot_text
from kvset.snapshot.builder import Readings, SnapshotBuilder, SnapshotConfig
from kvset.sources.base import Source
from kvset.types import AccessBatch, EngineReading, SourceHealth, SourceUpdate
from kvset.units import EnginePool

BLOCK_TOKENS = 16


class ListSource(Source):
    kind = "test"

    def __init__(self, batches, name="list"):
        self.batches, self.name = batches, name

    def updates(self, stop):
        yield SourceUpdate(health=SourceHealth(self.name, self.kind, True, "connected"))
        for b in self.batches:
            yield SourceUpdate(accesses=b)


def two_ranks(seed: int = 2, n: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    """Keys drawn from one popular set, each access sent to rank 0 or 1."""
    rng = np.random.default_rng(seed)
    keys = rng.zipf(1.3, n).astype(np.uint64) % 500
    return keys, rng.integers(0, 2, n)


def batches(keys, ranks, per_batch=250, rank=True):
    return [
        AccessBatch(
            keys[i : i + per_batch],
            timestamps=float(i),
            block_size=BLOCK_TOKENS,
            rank=ranks[i : i + per_batch] if rank else None,
        )
        for i in range(0, len(keys), per_batch)
    ]


def collect(*sources, **config):
    return Monitor(list(sources), new_analyzer, SnapshotBuilder(SnapshotConfig(**config))).collect()


def test_the_engines_pool_is_split_evenly_over_the_ranks():
    keys, ranks = two_ranks()
    monitor = Monitor(
        [ListSource(batches(keys, ranks))],
        new_analyzer,
        SnapshotBuilder(SnapshotConfig(options={"capacity": 7})),
    )
    monitor.collect()
    engine = EngineReading(at=0.0, pools=(EnginePool(101, BLOCK_TOKENS),))  # one pool for both ranks
    snap = monitor.builder.build(monitor.analyzer, Readings(engine=engine, ranks=monitor.rank_analyzers))
    assert [(v.pool_blocks, v.pool_source) for v in snap.get(Ranks).views] == [
        (50, "engine"),
        (50, "engine"),
    ]  # beats --capacity
    p = snap.get(Ranks).pooling
    assert p.capacity_blocks == 100 and p.capacity_source == "engine"
    separate = sum(simulate_lru(keys[ranks == r].tolist(), 50)[0] for r in (0, 1))
    assert p.separate_hit_rate["blocks"] == pytest.approx(separate / len(keys))
    assert p.shared_hit_rate["blocks"] == pytest.approx(simulate_lru(keys.tolist(), 100)[0] / len(keys))
    assert "the engine's pool split evenly over the ranks" in snapshot_json(snap)["pooling"]["how"]


def test_without_a_pool_the_ranks_are_shown_and_the_pooling_says_what_to_give():
    keys, ranks = two_ranks()
    snap = collect(ListSource(batches(keys, ranks)))
    assert [v.accesses for v in snap.get(Ranks).views] == [int((ranks == 0).sum()), int((ranks == 1).sum())]
    assert all(
        v.pool_blocks is None and all(r.fits_pool is None for r in v.working_sets)
        for v in snap.get(Ranks).views
    )
    assert snap.get(Ranks).pooling is None and "--capacity" in snap.get(Ranks).note
    out = snapshot_json(snap)
    assert out["pooling"] == {"computed": False, "reason": snap.get(Ranks).note}
    assert all(r["pool"] is None for r in out["ranks"])
    assert f"pooling: not computed: {snap.get(Ranks).note}" in snapshot_text(snap)


def test_accesses_of_no_rank_beside_the_ranks_leave_no_like_for_like_pooling():
    keys, ranks = two_ranks()
    other = AccessBatch(
        np.arange(9000, 9100, dtype=np.uint64), timestamps=0.0
    )  # e.g. a --log beside --events
    snap = collect(
        ListSource(batches(keys, ranks)), ListSource([other], name="log"), options={"capacity": 30}
    )
    assert len(snap.get(Ranks).views) == 2 and snap.get(Ranks).pooling is None
    assert snap.get(Ranks).note.startswith("100 accesses of the merged stream belong to no rank")


def test_a_stream_of_one_rank_or_none_has_no_rank_views():
    keys, ranks = two_ranks()
    unranked = Monitor(
        [ListSource(batches(keys, ranks, rank=False))], new_analyzer, SnapshotBuilder(SnapshotConfig())
    )
    snap = unranked.collect()
    # no rank figure: its JSON keys are null
    assert unranked.rank_analyzers == {} and snap.get(Ranks) is None and snapshot_json(snap)["ranks"] is None
    one = collect(ListSource(batches(keys, np.zeros_like(ranks))), options={"capacity": 30})
    assert one.get(Ranks) is None and snapshot_json(one)["pooling"] is None


def test_thrashing_and_the_lru_at_the_pool_are_each_ranks_own_cache():
    keys, ranks = two_ranks()
    monitor = Monitor([ListSource(batches(keys, ranks))], new_analyzer, SnapshotBuilder(SnapshotConfig()))
    monitor.collect()
    engine = EngineReading(at=0.0, pools=(EnginePool(100, BLOCK_TOKENS),), token_hit_rate=0.5)
    snap = monitor.builder.build(monitor.analyzer, Readings(engine=engine, ranks=monitor.rank_analyzers))
    own = {
        c: sum(simulate_lru(keys[ranks == r].tolist(), c)[0] for r in (0, 1)) / len(keys)
        for c in (50, 55, 63)
    }
    th = snap.get(ThrashingByWindow).windows["all"]
    assert (th.capacity_blocks, th.capacity_source) == (50, "rank")
    assert th.blocks.hit_rate == pytest.approx(own[50])
    assert th.blocks.gain_10pct == pytest.approx(own[55] - own[50]) and th.blocks.gain_25pct == pytest.approx(
        own[63] - own[50]
    )
    assert set(snap.get(ThrashingByWindow).windows) == {
        "all"
    }  # the ranks' own curves are kept for all time only
    op = snap.get(OperatingPoint)
    assert op.lru("all") == pytest.approx(own[50])  # every access 16 tokens: tokens and blocks agree
    assert op.lru("all") < snap.get(Curves).curve("all").hit_rate(
        100
    )  # one shared pool of both would hit more
    assert any("2 data-parallel ranks, each with its own pool (50 blocks each)" in n for n in op.notes)
    assert "thrashing at 50 blocks (rank, all time)" in snapshot_text(snap)
    assert "thrashing: judged over all time only" in snapshot_text(snap, window="1m")


def test_one_lru_per_rank_is_the_sum_of_the_ranks_lrus_at_every_capacity():
    from kvset.figures.ranks import separate_pools

    keys, ranks = two_ranks(seed=4, n=2000)
    curves = []
    for r in (0, 1):
        a = Analyzer()
        a.feed(keys[ranks == r], tokens=np.full(int((ranks == r).sum()), BLOCK_TOKENS))
        curves.append(a.curve())
    both = separate_pools(curves)
    for c in range(1, max(len(x.capacities) for x in curves) + 3):
        want = sum(simulate_lru(keys[ranks == r].tolist(), c)[0] for r in (0, 1))
        assert both.hits(c) == want and both.hits(c, "tokens") == want * BLOCK_TOKENS
    assert both.accesses == len(keys) and both.exact


def test_unequal_ranks_keep_their_own_pools():
    keys, ranks = two_ranks()
    monitor = Monitor([ListSource(batches(keys, ranks))], new_analyzer, SnapshotBuilder(SnapshotConfig()))
    monitor.collect()
    # vLLM's /metrics, one cache_config_info per engine (rank): 61 and 41 blocks, a null block each
    pools = (EnginePool(61, BLOCK_TOKENS, 1, "0"), EnginePool(41, BLOCK_TOKENS, 1, "1"))
    engine = EngineReading(at=0.0, pools=pools, token_hit_rate=0.5)
    snap = monitor.builder.build(monitor.analyzer, Readings(engine=engine, ranks=monitor.rank_analyzers))
    assert [(v.pool_blocks, v.pool_source) for v in snap.get(Ranks).views] == [
        (60, "engine-ranks"),
        (40, "engine-ranks"),
    ]
    own = [keys[ranks == r].tolist() for r in (0, 1)]
    p = snap.get(Ranks).pooling
    assert p.rank_capacity_blocks == {0: 60, 1: 40} and p.capacity_blocks == 100
    separate = simulate_lru(own[0], 60)[0] + simulate_lru(own[1], 40)[0]
    assert p.separate_hit_rate["blocks"] == pytest.approx(separate / len(keys))
    # thrashing: each rank at its own pool, and 10 % / 25 % more of each (at the mean pool, 50)
    th = snap.get(ThrashingByWindow).windows["all"]
    assert (th.capacity_blocks, th.capacity_source) == (50, "rank")
    at = {
        c: sum(simulate_lru(own[r], c * pool // 50)[0] for r, pool in ((0, 60), (1, 40)))
        for c in (50, 55, 63)
    }
    assert th.blocks.hit_rate == pytest.approx(at[50] / len(keys))
    assert th.blocks.gain_10pct == pytest.approx((at[55] - at[50]) / len(keys))
    assert th.blocks.gain_25pct == pytest.approx((at[63] - at[50]) / len(keys))
    assert any("each with its own pool (60, 40)" in n for n in snap.get(OperatingPoint).notes)
