"""Figures the snapshot builder defines once for every view: whether a working set fits the pool,
and the capacity thrashing is judged at (never the tool's own working set)."""

from __future__ import annotations

import numpy as np
import pytest

from kvset.api import ChurnSeries, EngineState, OperatingPoint, Reserve, ThrashingByWindow, WorkingSets
from kvset.core.analyzer import Analyzer
from kvset.figures.working_sets import fits_in_pool
from kvset.geometry import hybrid_reserve, load_model
from kvset.snapshot.builder import Readings, SnapshotBuilder, SnapshotConfig
from kvset.types import AccessBatch, EngineReading
from kvset.units import EnginePool

BLOCK = 16


def scan(blocks: int, rounds: int, t0: float = 0.0) -> AccessBatch:
    """Every block of a scan reused at stack distance `blocks`: the working set is exactly `blocks`."""
    keys = np.tile(np.arange(blocks, dtype=np.uint64), rounds)
    return AccessBatch(keys, timestamps=t0 + np.arange(len(keys)) * 0.01, block_size=BLOCK)


def build(config: SnapshotConfig, engine: EngineReading | None = None, batch: AccessBatch | None = None):
    analyzer = Analyzer()
    analyzer.feed_batch(batch if batch is not None else scan(40, 20))
    return SnapshotBuilder(config).build(analyzer, Readings(engine=engine), now=1000.0)


def pool(blocks: int, running: int | None = None) -> EngineReading:
    return EngineReading(at=1000.0, pools=(EnginePool(blocks, BLOCK),), running_requests=running)


def test_without_an_engine_pool_or_a_chosen_capacity_thrashing_is_not_judged():
    snap = build(SnapshotConfig())
    assert snap.get(ThrashingByWindow).windows == {}
    assert (
        snap.get(ChurnSeries).capacity_blocks is None
        and np.isnan(snap.get(ChurnSeries).hit_rate_at_capacity).all()
    )


def test_a_chosen_capacity_is_judged_and_named():
    snap = build(SnapshotConfig(options={"capacity": 36}))
    assert {t.capacity_source for t in snap.get(ThrashingByWindow).windows.values()} == {"chosen"}
    assert (
        snap.get(ThrashingByWindow).windows["all"].capacity_blocks == 36
        and snap.get(ChurnSeries).capacity_blocks == 36
    )


def test_the_engines_pool_wins_over_a_chosen_capacity():
    snap = build(SnapshotConfig(options={"capacity": 36}), engine=pool(50))
    assert (
        snap.get(ThrashingByWindow).windows["all"].capacity_blocks == 50
        and snap.get(ThrashingByWindow).windows["all"].capacity_source == "engine"
    )


def test_the_engines_pool_is_counted_in_the_analyzed_streams_blocks():
    engine = EngineReading(at=1000.0, pools=(EnginePool(1000, 32),))  # blocks twice the trace's
    snap = build(SnapshotConfig(), engine=engine)
    assert snap.get(EngineState).pool_blocks == 2000 == snap.get(OperatingPoint).capacity_blocks


def test_without_a_model_fits_compares_blocks():
    snap = build(SnapshotConfig(), engine=pool(45))
    row = snap.get(WorkingSets).rows_for("all", "coverage")[0]
    assert row.capacity_blocks == 40 and row.fits_pool is True and not row.fits_counts_reserve
    assert (
        build(SnapshotConfig(), engine=pool(39)).get(WorkingSets).rows_for("all", "coverage")[0].fits_pool
        is False
    )


def test_with_a_model_fits_adds_the_hybrid_reserve_as_the_reserve_panel_does():
    """40 blocks fit a 45-block pool, but not beside the linear-attention state of 3 running requests."""
    geometry = load_model("qwen3-next-80b-a3b")
    reserve = hybrid_reserve(geometry, 3, geometry.max_position_embeddings)
    per_block = geometry.full_attention_bytes_per_token() * BLOCK
    assert 40 * per_block + reserve.total_bytes > 45 * per_block  # the case this test is about
    snap = build(SnapshotConfig(geometry=geometry), engine=pool(45, running=3))
    row = snap.get(WorkingSets).rows_for("all", "coverage")[0]
    assert row.capacity_blocks == 40 and row.fits_counts_reserve and row.fits_pool is False
    assert snap.get(Reserve).hybrid_reserve_bytes == reserve.total_bytes
    assert snap.get(Reserve).fits is row.fits_pool  # the main target's row and the reserve panel agree
    big = 40 + -(-reserve.total_bytes // per_block)  # just enough blocks for both
    assert build(SnapshotConfig(geometry=geometry), engine=pool(big, running=3)).get(Reserve).fits is True
    assert (
        build(SnapshotConfig(geometry=geometry), engine=pool(big - 1, running=3)).get(Reserve).fits is False
    )


def test_a_model_without_hybrid_layers_fits_as_blocks_do():
    snap = build(SnapshotConfig(geometry=load_model("llama-3.1-8b")), engine=pool(40, running=8))
    row = snap.get(WorkingSets).rows_for("all", "coverage")[0]
    assert snap.get(Reserve).hybrid_reserve_bytes == 0 and row.fits_pool is True is snap.get(Reserve).fits


@pytest.mark.parametrize(
    ("working_set", "pool_size", "reserve", "fits"),
    [(None, 10, 0, None), (5, None, 0, None), (5, 10, 5, True), (5, 10, 6, False)],
)
def test_fits_in_pool(working_set, pool_size, reserve, fits):
    assert fits_in_pool(working_set, pool_size, reserve) is fits
