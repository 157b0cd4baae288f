"""Build a Snapshot from the analyzer's state: read it once into the figures' inputs, compute every figure.

Runs in the pipeline thread, right after the analyzer was fed (the live monitor), or once after the
whole stream (kvset analyze); everything it returns is immutable.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvset.core.analyzer import Analyzer
from kvset.core.curve import HitRateCurve
from kvset.core.policy_gap import policy_gap
from kvset.core.tiers import TierPlan, plan_tiers, tier_blocks
from kvset.engine_model import EngineModel
from kvset.figures import FIGURES
from kvset.figures.base import TOP, OptionValues
from kvset.figures.inputs import (
    ALL_ACCESSES,
    CAPACITY,
    MISSES_ONLY,
    WINDOWS,
    FigureInputs,
    OptCurve,
    RankStream,
    Targets,
)
from kvset.geometry.dtypes import AUTO
from kvset.geometry.model import ModelGeometry
from kvset.snapshot.model import (
    RANK_POOL_SOURCE,
    ChurnSeries,
    Pooling,
    RankView,
    Reserve,
    Snapshot,
    Thrashing,
    Totals,
    WorkingSetRow,
    fits_in_pool,
)
from kvset.snapshot.operating_point import operating_point
from kvset.snapshot.ranks import RankSplit, pooling, rank_pools, separate_pools
from kvset.snapshot.reserve import snapshot_reserve
from kvset.types import EngineReading, SourceHealth, TimelineEvent
from kvset.units import StreamUnits

TREND_POINTS = 6
CHURN_SECONDS = 300.0


@dataclass
class SnapshotConfig:
    """What the snapshots are of besides the stream: the options the command was given (the figures'
    own, by dest; kvset.cli.figure_flags), the command (its targets: kvset.figures.inputs.Targets), the
    model and whether the stream is the built-in demo."""

    options: OptionValues | Mapping[str, object] = field(default_factory=OptionValues)
    command: str = TOP
    geometry: ModelGeometry | None = None
    kv_dtype: str = AUTO
    bytes_per_token: int | None = None  # without a model: full-attention KV bytes per token, if known
    demo: bool = False
    concurrency: int | None = None  # given; measured from the engine when it reports one
    context_tokens: int | None = None
    tier_sizes: tuple[int, ...] = ()  # cache tiers, fastest first, in `tier_unit` (blocks or bytes)
    tier_unit: str = "blocks"
    tier_mode: str = "exclusive"
    next_tier_target: float | None = None  # the smallest next tier for this target (main_mode)

    def __post_init__(self) -> None:
        if not isinstance(self.options, OptionValues):
            self.options = OptionValues(self.options)

    @property
    def values(self) -> OptionValues:
        assert isinstance(self.options, OptionValues)
        return self.options

    @property
    def targets(self) -> Targets:
        return Targets.read(self.values, self.command)

    @property
    def main_mode(self) -> str:
        return self.targets.main_mode

    @property
    def main_target(self) -> float:
        return self.targets.main_target


@dataclass(frozen=True)
class Readings:
    """What the pipeline holds besides the analyzer when a snapshot is built: the sources' health and
    events, the engine's readings and its model, each data-parallel rank's own analyzer (views need two
    or more) and Belady MIN's curve of the whole stream once it is known (opt_note: what the views say
    while it is not; both None: MIN was not asked for)."""

    sources: tuple[SourceHealth, ...] = ()
    engine: EngineReading | None = None
    events: tuple[TimelineEvent, ...] = ()
    accesses_per_second: float = 0.0
    engine_history: tuple[EngineReading, ...] = ()
    engine_model: EngineModel | None = None
    ranks: Mapping[int, Analyzer] = field(default_factory=dict)
    opt: OptCurve | None = None
    opt_note: str | None = None


def stream_units(analyzer: Analyzer) -> StreamUnits | None:
    """The analyzed stream's units (None while no access has told the block size)."""
    bt = analyzer.block_tokens
    return StreamUnits(bt, "default") if bt else None


@dataclass
class SnapshotBuilder:
    config: SnapshotConfig
    _seq: int = 0
    _history: dict[str, deque[object]] = field(default_factory=dict)
    _history_sampled_at: float | None = None
    _all_time_history: deque = field(default_factory=lambda: deque(maxlen=TREND_POINTS))

    def inputs(self, analyzer: Analyzer, readings: Readings) -> FigureInputs:
        """The figures' inputs: the analyzer read once (its curve per window), with the readings."""
        cfg = self.config
        sources = readings.sources
        t = analyzer.last_time_at
        step = analyzer.coarse_slot_seconds
        due = t is not None and (self._history_sampled_at is None or t - self._history_sampled_at >= step)
        return FigureInputs(
            units=stream_units(analyzer),
            horizon=analyzer.horizon,
            curves={label: analyzer.curve(window=seconds) for label, seconds in WINDOWS},
            targets=cfg.targets,
            options=cfg.values,
            slots=analyzer,
            history={name: tuple(kept) for name, kept in self._history.items()},
            history_due=due,
            engine=readings.engine,
            engine_history=readings.engine_history,
            engine_model=readings.engine_model,
            ranks={r: RankStream(a.curve(), a.first_time) for r, a in sorted(readings.ranks.items())},
            opt=readings.opt,
            opt_note=readings.opt_note,
            geometry=cfg.geometry,
            kv_dtype=cfg.kv_dtype,
            bytes_per_token=cfg.bytes_per_token,
            curve_scope=MISSES_ONLY if any(h.reports_hits is False for h in sources) else ALL_ACCESSES,
        )

    def _remember(self, inputs: FigureInputs, results: Mapping[type, object], t: float | None) -> None:
        """Keep what figures remember of this snapshot's results, once a coarse slot (their trends)."""
        if not inputs.history_due:
            return
        self._history_sampled_at = t
        for figure in FIGURES:
            result = results.get(figure.result)
            if figure.remember is not None and result is not None:
                kept = self._history.setdefault(figure.name, deque(maxlen=TREND_POINTS))
                kept.append(figure.remember(result))

    def build(
        self, analyzer: Analyzer, readings: Readings | None = None, now: float | None = None
    ) -> Snapshot:
        """The snapshot of the analyzer's state now, with what the pipeline read besides."""
        readings = readings or Readings()
        now = time.time() if now is None else now
        self._seq += 1
        cfg = self.config
        inputs = self.inputs(analyzer, readings)
        results: dict[type, Any] = {}
        for figure in FIGURES:
            result = inputs.result(figure)
            if result is not None:
                results[figure.result] = result
        sources, engine = readings.sources, readings.engine
        bt = inputs.block_tokens
        bytes_per_block = inputs.sizes.bytes_per_block
        curves = dict(inputs.curves)
        pool = inputs.engine_pool
        capacity, capacity_source = inputs.capacity.blocks, inputs.capacity.source
        self._sample_all_time(curves["all"], analyzer, inputs.history_due)
        self._remember(inputs, results, analyzer.last_time_at)
        reserve = self._reserve(
            curves["all"], bt, pool, engine.running_requests if engine is not None else None
        )
        target_sets = dict(cfg.targets.by_mode)
        opt_curve = readings.opt.curve if readings.opt is not None else None
        gap = None
        if opt_curve is not None:
            gap = policy_gap(curves["all"], opt_curve, target_sets, capacity, capacity_source)
        rows = []
        for label, seconds in WINDOWS:
            for mode, targets in target_sets.items():
                trends = self._trends(analyzer, label, seconds, targets, mode)
                # MIN's curve is of all time: only the all-time rows have its working sets
                opt_blocks = [None] * len(targets)
                if gap is not None and label == "all":
                    opt_blocks = [g.opt_blocks for g in gap.for_mode(mode)]
                for t, trend, opt in zip(targets, trends, opt_blocks, strict=True):
                    rows.append(
                        self._row(
                            curves[label], label, t, mode, bt, bytes_per_block, pool, reserve, trend, opt
                        )
                    )
        curve_scope = inputs.curve_scope
        rank_views, pooled, pooling_note, rank_split = self._ranks(
            readings.ranks or {}, curves["all"], bt, bytes_per_block, pool, curve_scope
        )
        thrashing = {}
        if rank_split is not None:
            # each rank's own pool: judged on the ranks' own curves, which are kept for all time only
            thrashing["all"] = thrashing_at(rank_split.curve, rank_split.pool_blocks, RANK_POOL_SOURCE, "all")
        elif capacity:
            for label, _ in WINDOWS:
                if curves[label].accesses:  # a window without accesses has no misses to judge
                    thrashing[label] = thrashing_at(curves[label], capacity, capacity_source, label)
        churn = self._churn(analyzer, capacity)
        totals = Totals(
            accesses=analyzer.accesses,
            tokens=analyzer.tokens,
            requests=analyzer.requests,
            first_time=analyzer.first_time,
            rereferences=analyzer.rereferences,
            beyond_horizon=analyzer.beyond_horizon,
            tracked_blocks=analyzer.tracked_blocks,
            late_accesses=analyzer.late_accesses,
        )
        return Snapshot(
            seq=self._seq,
            taken_at=now,
            data_time=analyzer.last_time_at if analyzer.last_time_at is not None else now,
            horizon=analyzer.horizon,
            units=inputs.units,
            bytes_per_block=bytes_per_block,
            totals=totals,
            curves=curves,
            working_sets=tuple(rows),
            churn=churn,
            thrashing=thrashing,
            reserve=reserve,
            engine=engine,
            sources=sources,
            events=readings.events,
            accesses_per_second=readings.accesses_per_second,
            order=analyzer.order,
            demo=cfg.demo,
            model=cfg.geometry.name if cfg.geometry else None,
            targets=dict(target_sets),
            engine_history=readings.engine_history,
            curve_scope=curve_scope,
            engine_capacity_blocks=pool,
            operating_point=operating_point(
                engine, pool, bt, curves, curve_scope, readings.engine_model, rank_split if pool else None
            ),
            main_mode=cfg.main_mode,
            main_target=cfg.main_target,
            tiers=self._tiers(curves["all"], bytes_per_block),
            tiers_requested=bool(cfg.tier_sizes),
            ranks=rank_views,
            pooling=pooled,
            pooling_note=pooling_note,
            sample=analyzer.sampling,
            opt_curve=opt_curve,
            policy_gap=gap,
            opt_note=readings.opt_note,
            results=results,
        )

    # -- parts ---------------------------------------------------------------
    def _tiers(self, curve: HitRateCurve, bytes_per_block: int | None) -> TierPlan | None:
        cfg = self.config
        blocks = tier_blocks(cfg.tier_sizes, cfg.tier_unit, bytes_per_block) if cfg.tier_sizes else None
        if blocks is None:
            return None
        return plan_tiers(curve, blocks, cfg.tier_mode, cfg.next_tier_target, cfg.main_mode)

    def _ranks(
        self,
        ranks: Mapping[int, Analyzer],
        merged: HitRateCurve,
        bt: int | None,
        bytes_per_block: int | None,
        engine_pool: int | None,
        curve_scope: str,
    ) -> tuple[tuple[RankView, ...], Pooling | None, str | None, RankSplit | None]:
        """Each rank's all-time view, the pooling figures (or why there are none), and (each rank's pool,
        the curve of one LRU per rank) when every access is some rank's and the pool is known."""
        if len(ranks) < 2:
            return (), None, None, None
        cfg = self.config
        per_rank, source = rank_pools(len(ranks), engine_pool, cfg.values.get(CAPACITY))
        views, curves = [], {}
        for rank in sorted(ranks):
            a = ranks[rank]
            curve = curves[rank] = a.curve()
            rows = tuple(
                self._row(curve, "all", t, mode, bt, bytes_per_block, per_rank, None, ())
                for mode, targets in cfg.targets.by_mode.items()
                for t in targets
            )
            views.append(RankView(rank, curve, rows, a.first_time, per_rank, source))
        unranked = merged.accesses - sum(c.accesses for c in curves.values())
        if unranked:
            note = (
                f"{unranked:,} accesses of the merged stream belong to no rank (another source): the shared "
                "pool would see them too, so there is no like-for-like pooling figure"
            )
            return tuple(views), None, note, None
        if per_rank is None:
            return (
                tuple(views),
                None,
                (
                    "no rank pool to compare at: give --capacity BLOCKS (each rank's pool) "
                    "or --metrics of the engine"
                ),
                None,
            )
        pools = dict.fromkeys(curves, per_rank)
        split = RankSplit(len(curves), per_rank, separate_pools(list(curves.values())))
        return tuple(views), pooling(merged, curves, pools, source, curve_scope), None, split

    def _row(
        self,
        curve,
        window,
        target,
        mode,
        bt,
        bytes_per_block,
        pool,
        reserve,
        trend,
        opt_blocks: int | None = None,
    ) -> WorkingSetRow:
        ws = curve.working_set(target, mode=mode)
        tokens = ws * bt if ws is not None and bt else None
        ws_bytes = ws * bytes_per_block if ws is not None and bytes_per_block else None
        # one meaning of "fits" for every view: with a model, the working set plus the hybrid reserve
        # within the pool's bytes (as the reserve panel sums them); without one, blocks against blocks
        with_reserve = reserve is not None and bytes_per_block is not None and pool is not None
        if with_reserve:
            fits = fits_in_pool(ws_bytes, pool * bytes_per_block, reserve.hybrid_reserve_bytes)
        else:
            fits = fits_in_pool(ws, pool)
        return WorkingSetRow(
            target=target,
            mode=mode,
            window=window,
            capacity_blocks=ws,
            capacity_tokens=tokens,
            capacity_bytes=ws_bytes,
            trend_blocks=tuple(trend),
            fits_pool=fits,
            fits_counts_reserve=with_reserve,
            exact=curve.exact,
            opt_capacity_blocks=opt_blocks,
        )

    def _sample_all_time(self, curve: HitRateCurve, analyzer: Analyzer, due: bool) -> None:
        # all-time working sets, sampled once a coarse slot, are the trend of the "all" window
        if due:
            sample = {
                (mode, target): curve.working_set(target, mode=mode)
                for mode, targets in self.config.targets.by_mode.items()
                for target in targets
            }
            self._all_time_history.append(sample)

    def _trends(self, analyzer: Analyzer, label: str, seconds: float | None, targets, mode) -> list[list]:
        """Working set per target over the last consecutive windows of this length, oldest first."""
        if seconds is None:
            return [[h.get((mode, t)) for h in self._all_time_history] for t in targets]
        curves = analyzer.consecutive_window_curves(seconds, TREND_POINTS)
        return [[c.working_set(t, mode=mode) if c.accesses else None for c in curves] for t in targets]

    def _churn(self, analyzer: Analyzer, capacity: int | None) -> ChurnSeries:
        fine = analyzer.slot_series(min(CHURN_SECONDS, analyzer.fine_span_seconds))
        w = fine.width
        acc = fine.accesses
        if capacity:
            with np.errstate(invalid="ignore", divide="ignore"):
                hit_rate = np.where(acc > 0, fine.block_hits_at(capacity) / np.maximum(acc, 1), np.nan)
        else:
            hit_rate = np.full(len(acc), np.nan)
        coarse = analyzer.slot_series(analyzer.coarse_span_seconds, coarse=True)
        ws_main = np.full(len(coarse), np.nan)
        cfg = self.config
        for k in np.flatnonzero(coarse.accesses):
            ws = coarse.curve(k, k + 1).working_set(cfg.main_target, mode=cfg.main_mode)
            ws_main[k] = np.nan if ws is None else ws
        return ChurnSeries(
            slot_seconds=w,
            end_time=fine.end_time,
            accesses=acc / w,
            first_time=fine.first_time / w,
            rereferences=fine.rereferences / w,
            beyond_horizon=fine.beyond_horizon / w,
            hit_rate_at_capacity=hit_rate,
            capacity_blocks=capacity,
            working_set_main=ws_main,
            working_set_step_seconds=coarse.width,
        )

    def _reserve(
        self, curve: HitRateCurve, bt: int | None, pool: int | None, running: int | None
    ) -> Reserve | None:
        cfg = self.config
        g = cfg.geometry
        if g is None:
            return None
        if running is not None:
            concurrency, source = running, "measured"
        elif cfg.concurrency is not None:
            concurrency, source = cfg.concurrency, "given"
        else:
            concurrency, source = None, "none"
        context = cfg.context_tokens
        if context is None:
            context = g.max_position_embeddings or g.sliding_window or 0
        ws = curve.working_set(cfg.main_target, mode=cfg.main_mode)
        pool_bytes = pool * bt * g.full_attention_bytes_per_token(cfg.kv_dtype) if pool and bt else None
        reserve, _ = snapshot_reserve(
            g,
            concurrency=concurrency,
            concurrency_source=source,
            context_tokens=context,
            working_set_target=cfg.main_target,
            working_set_tokens=ws * bt if ws is not None and bt else None,
            pool_bytes=pool_bytes,
            kv_dtype=cfg.kv_dtype,
            block_size=bt or 16,
        )
        return reserve


def thrashing_at(curve: HitRateCurve, capacity: int, source: str, window: str) -> Thrashing:
    """The thrashing figures of `curve` at `capacity` blocks."""
    hr = curve.hit_rate(capacity)
    plus_10, plus_25 = (
        -(-capacity * 110 // 100),
        -(-capacity * 125 // 100),
    )  # integer ceilings: 50 -> 55, not 56
    return Thrashing(
        capacity_blocks=capacity,
        capacity_source=source,
        window=window,
        hit_rate=hr,
        gain_10pct=curve.hit_rate(plus_10) - hr,
        gain_25pct=curve.hit_rate(plus_25) - hr,
        near_miss_share=curve.miss_share_between(capacity, plus_25),
    )
