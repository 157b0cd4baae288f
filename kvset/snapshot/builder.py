"""Build a Snapshot from the analyzer's state: read it once into the figures' inputs, compute every figure.

Runs in the pipeline thread, right after the analyzer was fed (the live monitor), or once after the
whole stream (kvset analyze); everything it returns is immutable.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kvset.core.pool_replay import PoolTrace
from kvset.core.principals import PrincipalStream
from kvset.core.stack_distance import StackDistanceAnalyzer
from kvset.engine_model import EngineModel
from kvset.figures import FIGURES
from kvset.figures.base import TOP, OptionValues
from kvset.figures.inputs import (
    ALL_ACCESSES,
    MISSES_ONLY,
    RECONSTRUCTED,
    WINDOWS,
    FigureInputs,
    OptCurve,
    RankStream,
    Targets,
)
from kvset.figures.working_sets import TREND_POINTS
from kvset.geometry.dtypes import AUTO
from kvset.geometry.model import ModelGeometry
from kvset.snapshot.model import InputRead, Snapshot, Totals
from kvset.types import EngineReading, KvCacheGroup, SourceHealth, TimelineEvent


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
    ranks: Mapping[int, StackDistanceAnalyzer] = field(default_factory=dict)
    # a hybrid model's KV cache groups: each one's description and its own accesses' analyzer
    kv_cache_groups: Mapping[int, tuple[KvCacheGroup, StackDistanceAnalyzer]] = field(default_factory=dict)
    opt: OptCurve | None = None
    opt_note: str | None = None
    input: InputRead | None = None  # kvset analyze: the file it read
    # kvset analyze --by: each level's top principals and "other" (kvset.core.principals)
    principals: Mapping[str, tuple[PrincipalStream, ...]] = field(default_factory=dict)
    principal_pool: PoolTrace | None = None  # their stream, for the pool replay (kvset.core.pool_replay)


@dataclass
class SnapshotBuilder:
    config: SnapshotConfig
    _seq: int = 0
    _history: dict[str, deque[object]] = field(default_factory=dict)
    _history_sampled_at: float | None = None

    def inputs(self, analyzer: StackDistanceAnalyzer, readings: Readings) -> FigureInputs:
        """The figures' inputs: the analyzer read once (its curve per window), with the readings."""
        cfg = self.config
        sources = readings.sources
        t = analyzer.last_time_at
        step = analyzer.coarse_slot_seconds
        due = t is not None and (self._history_sampled_at is None or t - self._history_sampled_at >= step)
        return FigureInputs(
            units=analyzer.units,
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
            kv_cache_groups={
                g: (group, a.curve()) for g, (group, a) in sorted(readings.kv_cache_groups.items())
            },
            opt=readings.opt,
            opt_note=readings.opt_note,
            geometry=cfg.geometry,
            kv_dtype=cfg.kv_dtype,
            bytes_per_token=cfg.bytes_per_token,
            curve_scope=curve_scope(sources),
            principals=readings.principals,
            principal_pool=readings.principal_pool,
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
        self, analyzer: StackDistanceAnalyzer, readings: Readings | None = None, now: float | None = None
    ) -> Snapshot:
        """The snapshot of the analyzer's state now, with what the pipeline read besides: every figure of
        the registry, each computed once."""
        readings = readings or Readings()
        now = time.time() if now is None else now
        self._seq += 1
        inputs = self.inputs(analyzer, readings)
        results: dict[type, Any] = {}
        for figure in FIGURES:
            result = inputs.result(figure)
            if result is not None:
                results[figure.result] = result
        self._remember(inputs, results, analyzer.last_time_at)
        return Snapshot(
            seq=self._seq,
            taken_at=now,
            data_time=analyzer.last_time_at if analyzer.last_time_at is not None else now,
            horizon=analyzer.horizon,
            order=analyzer.order,
            units=inputs.units,
            bytes_per_block=inputs.sizes.bytes_per_block,
            totals=Totals(
                accesses=analyzer.accesses,
                tokens=analyzer.tokens,
                requests=analyzer.requests,
                first_time=analyzer.first_time,
                rereferences=analyzer.rereferences,
                beyond_horizon=analyzer.beyond_horizon,
                tracked_blocks=analyzer.tracked_blocks,
                late_accesses=analyzer.late_accesses,
                forgotten_blocks=analyzer.forgotten_blocks,
                # an analysis that cannot say (a merge of partitions) is exact only if nothing was forgotten
                misses_split_exact=getattr(analyzer, "misses_split_exact", analyzer.forgotten_blocks == 0),
            ),
            targets=inputs.targets,
            sources=readings.sources,
            events=readings.events,
            accesses_per_second=readings.accesses_per_second,
            demo=self.config.demo,
            sample=analyzer.sampling,
            curve_scope=inputs.curve_scope,
            input=readings.input,
            results=results,
        )


def curve_scope(sources: Iterable[SourceHealth]) -> str:
    """What the curve is of: misses only while a source shows neither its hits nor their chains."""
    health = list(sources)
    if any(h.reports_hits is False and not h.hits_reconstructed for h in health):
        return MISSES_ONLY
    return RECONSTRUCTED if any(h.hits_reconstructed for h in health) else ALL_ACCESSES
