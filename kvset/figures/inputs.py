"""A figure, and what every figure is computed from: `FigureInputs`, the same for `kvset analyze` and
the live monitor.

A figure module (kvset.figures.thrashing, ...) declares one `Figure`: its name, the frozen type of its
result, its command-line options (`Option` records, from which kvset.cli builds the parsers, so each
default exists once), `compute(inputs, options)` (the one place the figure is computed) and how its
result reads as JSON keys, as text lines and as Prometheus samples. The samples are plain data
(kvset.figures.base.MetricFamily): kvset.exporter turns them into prometheus_client's families, so
that no figure imports the exporter. A figure that does not apply (no --tiers, no model) computes
None; its JSON keys are then null, so every report has the same keys whatever was asked.

The snapshot builder (kvset.snapshot.builder) reads the analyzer once into a FigureInputs: the
stream's units and horizon, its curves by window, the time-slot views (churn, trends), the engine's
readings and its model, the data-parallel ranks' curves, Belady MIN's curve, the geometry and the
targets. The few figures derived from the inputs themselves (the engine's pool in the stream's blocks,
the capacity the figures are judged at, the sizes of a block) are properties here, computed once.

A figure that needs another's result asks `inputs.result(other.FIGURE)`: each figure is computed
once per snapshot, whichever asks first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from kvset.figures.base import (
    ANALYZE,
    LIVE,
    PIPELINES,
    VERIFY,
    Json,
    MetricFamily,
    MetricsView,
    Option,
    OptionValues,
    Sizes,
    TextView,
    no_metrics,
    no_text,
)
from kvset.geometry.dtypes import AUTO
from kvset.geometry.model import ModelGeometry
from kvset.quantities import parse_fractions
from kvset.types import EngineReading, KvCacheGroup
from kvset.units import StreamUnits

# The options are read by every command line, `--help` included: the analysis core (numpy, numba)
# is named here only for the type checker, and loaded by whoever computes a figure.
if TYPE_CHECKING:
    from kvset.core.curve import HitRateCurve, TargetMode
    from kvset.core.pool_replay import PoolTrace
    from kvset.core.principals import PrincipalStream
    from kvset.core.slots import SlotSeries
    from kvset.engine_model import EngineModel

R = TypeVar("R")

# Windows the monitor offers, in the order `w` cycles them. None = all time (exact curve).
WINDOWS: tuple[tuple[str, float | None], ...] = (("1m", 60.0), ("5m", 300.0), ("1h", 3600.0), ("all", None))
TARGET_MODES = ("coverage", "absolute")
DEFAULT_COVERAGE_TARGETS = (0.95, 0.99, 0.999)
DEFAULT_ABSOLUTE_TARGETS = (0.50, 0.70, 0.90)

# What the curve is the curve of: every access, or only an engine's misses (KV events that show only its
# newly stored blocks: then it is not comparable with the engine's own hit rate).
ALL_ACCESSES = "all accesses"
MISSES_ONLY = "engine misses only"
# KV events that show only the misses, but whose hits were read off the chains the misses hang on
# (kvset.engine_model.prefix_chain): every access the events let kvset see, hits reconstructed.
RECONSTRUCTED = "all accesses, hits reconstructed"


def _fractions(values: tuple[float, ...]) -> str:
    return ",".join(str(v) for v in values)


TARGETS: Option[tuple[float, ...]] = Option(
    "--targets",
    "targets",
    DEFAULT_COVERAGE_TARGETS,
    "coverage targets (shares of the attainable hit rate): fractions or percentages, e.g. "
    f"{_fractions(DEFAULT_COVERAGE_TARGETS)} (default) or 50%,70%",
    commands=PIPELINES | {VERIFY},
    parse=lambda text: parse_fractions(text, "target"),
    metavar="T1,T2,..",
    help_for={
        ANALYZE: "working-set targets (of --target-mode): fractions or percentages, e.g. "
        f"{_fractions(DEFAULT_COVERAGE_TARGETS)} (default) or 50%,70%",
        VERIFY: "working-set targets to check: fractions or percentages (default "
        f"{_fractions(DEFAULT_COVERAGE_TARGETS)})",
    },
)
ABSOLUTE_TARGETS: Option[tuple[float, ...]] = Option(
    "--absolute-targets",
    "absolute_targets",
    DEFAULT_ABSOLUTE_TARGETS,
    f"absolute hit-rate targets (default {_fractions(DEFAULT_ABSOLUTE_TARGETS)})",
    commands=LIVE,
    parse=lambda text: parse_fractions(text, "absolute target"),
    metavar="T1,T2,..",
)
TARGET_MODE: Option[str] = Option(
    "--target-mode",
    "target_mode",
    "coverage",
    "coverage: targets are shares of the attainable hit rate (default); absolute: hit rates "
    "themselves (kvset-top: which target set comes first, t cycles them)",
    choices=TARGET_MODES,
)
CAPACITY: Option[int | None] = Option(
    "--capacity",
    "capacity",
    None,
    "the cache size the thrashing and churn figures (and --opt's policy gap) are read at when no engine "
    "reports its pool",
    argtype="positive_int",
    metavar="BLOCKS",
    help_for={ANALYZE: "with --opt: the cache size (blocks) to give the policy gap at, beside the knee"},
)
INPUT_OPTIONS: tuple[Option[Any], ...] = (TARGETS, ABSOLUTE_TARGETS, TARGET_MODE, CAPACITY)


def target_mode(mode: str) -> TargetMode:
    """A target mode as the curves take it (a name of TARGET_MODES)."""
    if mode == "absolute":
        return "absolute"
    if mode == "coverage":
        return "coverage"
    raise ValueError(f"target mode must be one of {', '.join(TARGET_MODES)}, got {mode!r}")


@dataclass(frozen=True)
class Targets:
    """The working-set targets by mode, and the mode of the main target (the first of its set)."""

    by_mode: Mapping[str, tuple[float, ...]]
    main_mode: str = "coverage"

    @property
    def main_target(self) -> float:
        return self.by_mode[self.main_mode][0]

    @classmethod
    def read(cls, options: OptionValues, command: str) -> Targets:
        """kvset analyze: --targets are of --target-mode; the live monitor has both sets (--targets the
        coverage ones), and --target-mode says which comes first."""
        mode = options.get(TARGET_MODE)
        if command == ANALYZE:
            return cls({mode: options.get(TARGETS)}, mode)
        return cls({"coverage": options.get(TARGETS), "absolute": options.get(ABSOLUTE_TARGETS)}, mode)


@dataclass(frozen=True)
class Capacity:
    """The capacity the figures are judged at: the engine's pool, else a chosen one (--capacity)."""

    blocks: int | None
    source: str  # engine | chosen | none


class SlotViews(Protocol):
    """What the analyzers show of their time slots (kvset.core.slots.TimeSlotViews)."""

    @property
    def fine_span_seconds(self) -> float: ...

    @property
    def coarse_span_seconds(self) -> float: ...

    @property
    def coarse_slot_seconds(self) -> float: ...

    def slot_series(self, seconds: float, coarse: bool = False) -> SlotSeries: ...

    def consecutive_window_curves(self, seconds: float, points: int) -> list[HitRateCurve]: ...


@dataclass(frozen=True, eq=False)
class RankStream:
    """One data-parallel rank's own accesses: their all-time curve and the distinct blocks among them."""

    curve: HitRateCurve
    distinct_blocks: int


@dataclass(frozen=True, eq=False)
class OptCurve:
    """Belady MIN's curve of the whole stream (kvset.core.opt), and what it took."""

    curve: HitRateCurve
    distinct_blocks: int
    seconds: float | None = None


@dataclass(frozen=True)
class Figure(Generic[R]):
    """One figure: see the module docstring. `keys` are the JSON keys `json` fills (null when the figure
    computed None). `remember`: what of a result the builder keeps, sampled once a coarse slot, and hands
    back to the next compute as `inputs.history[name]` (the all-time working sets' trend)."""

    name: str
    result: type[R]
    compute: Callable[[FigureInputs, OptionValues], R | None]
    keys: tuple[str, ...]
    json: Callable[[R, Sizes], Json]
    text: Callable[[R, TextView], list[str]] = no_text
    metrics: Callable[[R, MetricsView], Iterable[MetricFamily]] = no_metrics
    options: tuple[Option[Any], ...] = ()
    # flags that do not fit together: a ValueError. Its second argument names the flags that would give
    # the KV bytes per block (None: they are known, so sizes may be in bytes)
    check: Callable[[OptionValues, str | None], None] | None = None
    remember: Callable[[R], object] | None = None

    def json_of(self, result: R | None, sizes: Sizes) -> Json:
        """The figure's keys, each null when it computed nothing; a `json` that fills other keys than
        the declared ones is a bug, caught here."""
        if result is None:
            return dict.fromkeys(self.keys)
        out = self.json(result, sizes)
        if tuple(out) != self.keys:
            raise AssertionError(f"figure {self.name}: JSON keys {tuple(out)} are not {self.keys}")
        return out


def engine_pool_blocks(engine: EngineReading | None, units: StreamUnits | None) -> int | None:
    """The engine's pool in the analyzed stream's blocks (None: no engine, or it reports no pool): the
    one place the figures read it (each pool changes units in kvset.units.EnginePool)."""
    return engine.pool_blocks(units) if engine is not None and units is not None else None


@dataclass(frozen=True, eq=False)
class FigureInputs:
    units: StreamUnits | None  # None while no access has told the block size
    horizon: int
    curves: Mapping[str, HitRateCurve]  # by window label (WINDOWS); "all" is exact
    targets: Targets
    options: OptionValues = field(default_factory=OptionValues)
    slots: SlotViews | None = None
    # what figures kept of their earlier results (Figure.remember), oldest first, and whether this
    # result is to be kept too (once a coarse slot)
    history: Mapping[str, tuple[object, ...]] = field(default_factory=dict)
    history_due: bool = False
    engine: EngineReading | None = None
    engine_history: tuple[EngineReading, ...] = ()
    engine_model: EngineModel | None = None
    ranks: Mapping[int, RankStream] = field(default_factory=dict)
    # a hybrid model's KV cache groups: each one and the exact all-time curve of its own accesses
    kv_cache_groups: Mapping[int, tuple[KvCacheGroup, HitRateCurve]] = field(default_factory=dict)
    opt: OptCurve | None = None
    opt_note: str | None = None  # why MIN's curve is not there yet (None: there, or not asked for)
    geometry: ModelGeometry | None = None
    kv_dtype: str = AUTO
    bytes_per_token: int | None = None  # full-attention KV bytes per token without a model (analyze)
    curve_scope: str = ALL_ACCESSES
    # by level (tenant, session, adapter): its top principals' curves and "other" (kvset.core.principals)
    principals: Mapping[str, tuple[PrincipalStream, ...]] = field(default_factory=dict)
    principal_pool: PoolTrace | None = None  # their stream, for the pool replay (kvset.core.pool_replay)
    _results: dict[str, object] = field(default_factory=dict, init=False, repr=False)

    def result(self, figure: Figure[R]) -> R | None:
        """The figure's result for these inputs, computed on first use."""
        if figure.name not in self._results:
            self._results[figure.name] = figure.compute(self, self.options)
        value = self._results[figure.name]
        return value if isinstance(value, figure.result) else None

    def curve(self, window: str = "all") -> HitRateCurve:
        return self.curves.get(window) or self.curves["all"]

    @property
    def block_tokens(self) -> int | None:
        return self.units.block_size if self.units is not None else None

    @cached_property
    def sizes(self) -> Sizes:
        bt = self.block_tokens
        per_token = (
            self.geometry.full_attention_bytes_per_token(self.kv_dtype)
            if self.geometry is not None
            else self.bytes_per_token
        )
        return Sizes(bt, per_token * bt if per_token and bt else None)

    @cached_property
    def engine_pool(self) -> int | None:
        return engine_pool_blocks(self.engine, self.units)

    @cached_property
    def capacity(self) -> Capacity:
        """Where thrashing, the churn hit rate and the policy gap are read: the engine's pool, else a
        chosen one (--capacity). Without either there is nothing to judge: the tool's own working set
        sits on the curve's knee by construction, so its near misses would say nothing of a real cache."""
        if self.engine_pool:
            return Capacity(self.engine_pool, "engine")
        chosen = self.options.get(CAPACITY)
        if chosen:
            return Capacity(int(chosen), "chosen")
        return Capacity(None, "none")
