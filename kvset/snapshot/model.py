"""The snapshot: one immutable value holding everything the views show.

Built in the pipeline's worker thread after the analyzer has been fed; views (the Textual app,
`--once` text and JSON, exporters) only read it. Every number carries its unit and its window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from kvset.core.curve import HitRateCurve, SampleInfo
from kvset.core.policy_gap import PolicyGap
from kvset.core.tiers import TierPlan
from kvset.figures.inputs import ALL_ACCESSES, MISSES_ONLY
from kvset.types import EngineReading, SourceHealth, TimelineEvent
from kvset.units import StreamUnits

R = TypeVar("R")

# Near-miss thresholds (share of misses within 1.25x of the capacity): colour levels.
NEAR_MISS_WARN = 0.10
NEAR_MISS_THRASHING = 0.25

# What "fits the pool" compares, as the views label it.
FITS_WITH_RESERVE = "working set + hybrid reserve ≤ pool"
FITS_WORKING_SET = "working set ≤ pool"


def fits_in_pool(working_set: int | None, pool: int | None, reserve: int = 0) -> bool | None:
    """Whether a working set fits the engine's pool, wherever it is shown: the working set plus the
    hybrid-layer reserve its running requests need (in bytes, with a model) within the pool. Without a
    model there is no reserve to add and blocks compare. None when either side is unknown."""
    if working_set is None or not pool:
        return None
    return working_set + reserve <= pool


RANK_POOL_SOURCE = "rank"  # a Thrashing capacity that is each data-parallel rank's own pool


@dataclass(frozen=True)
class WorkingSetRow:
    target: float
    mode: str  # coverage | absolute
    window: str  # "1m" | "5m" | "1h" | "all"
    capacity_blocks: int | None  # None: not reached inside the horizon
    capacity_tokens: int | None
    capacity_bytes: int | None  # None without a model geometry (or not reached)
    trend_blocks: tuple[int | None, ...] = ()  # over recent consecutive windows, oldest first
    fits_pool: bool | None = None  # see fits_in_pool(); None when the engine's pool is unknown
    fits_counts_reserve: bool = False  # True: the hybrid reserve was added (FITS_WITH_RESERVE)
    exact: bool = True  # False for a windowed (grid) curve: an upper bound within the grid step
    # the smallest capacity at which Belady MIN reaches the same target (all-time rows, with --opt)
    opt_capacity_blocks: int | None = None

    @property
    def reached(self) -> bool:
        return self.capacity_blocks is not None


@dataclass(frozen=True, eq=False)
class ChurnSeries:
    """Per-slot series over the recent past, oldest first; rates are per second."""

    slot_seconds: float
    end_time: float  # timestamp (trace or wall) of the end of the last slot
    accesses: np.ndarray
    first_time: np.ndarray
    rereferences: np.ndarray  # accesses that were hits inside the horizon
    beyond_horizon: np.ndarray
    hit_rate_at_capacity: np.ndarray  # block hit rate at `capacity_blocks`; nan where no access
    capacity_blocks: int | None
    working_set_main: np.ndarray  # blocks for the main target per series step; nan where not reached
    working_set_step_seconds: float = 60.0

    def __len__(self) -> int:
        return len(self.accesses)


@dataclass(frozen=True)
class Thrashing:
    """Near misses at the engine's (or a chosen) capacity: the signature of a cache that thrashes."""

    capacity_blocks: int
    capacity_source: (
        str  # engine (its pool) | chosen (--capacity) | rank (each data-parallel rank's own pool)
    )
    window: str
    hit_rate: float
    gain_10pct: float  # hit-rate gain from +10 % capacity (absolute, 0..1)
    gain_25pct: float
    near_miss_share: float  # share of misses with capacity < d <= 1.25 capacity

    @property
    def level(self) -> str:
        if self.near_miss_share >= NEAR_MISS_THRASHING:
            return "thrashing"
        if self.near_miss_share >= NEAR_MISS_WARN:
            return "warn"
        return "ok"


@dataclass(frozen=True)
class Reserve:
    """Full-attention working set versus the hybrid-layer reserve, in bytes."""

    model: str
    full_attention_bytes_per_token: int
    full_attention_bytes_per_block: int
    working_set_target: float
    working_set_bytes: int | None
    hybrid_reserve_bytes: int
    concurrency: int
    concurrency_source: str  # measured | given | none
    pool_bytes: int | None
    notes: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> int | None:
        if self.working_set_bytes is None:
            return None
        return self.working_set_bytes + self.hybrid_reserve_bytes

    @property
    def fits(self) -> bool | None:
        return fits_in_pool(self.working_set_bytes, self.pool_bytes, self.hybrid_reserve_bytes)


@dataclass(frozen=True)
class OperatingPoint:
    """The engine's own capacity and measured hit rate beside what kvset predicts there.

    Two figures are kept apart: the exact LRU curve of the accesses seen, read at the pool
    (`lru_by_window`: exact for "all", on the grid for the other windows), and the prediction for the
    engine itself (`predicted_token_hit_rate`): a model of what the engine does that an ideal LRU does
    not (running requests pin their blocks; see kvset.snapshot.operating_point), named in `model`,
    with the inputs it used. Without a model the prediction is the LRU curve's at the pool.
    """

    capacity_blocks: int  # the engine's pool in the analyzed stream's blocks
    capacity_tokens: int | None
    measured_token_hit_rate: float | None  # what the engine says
    measured_over_seconds: float | None  # the period the engine measured it over
    # the LRU curve's token hit rate at the pool, by window label ("all" exact, others on the grid)
    lru_by_window: dict[str, float | None]
    curve_scope: str  # a curve of the engine's misses alone predicts nothing about its hit rate
    stale: bool
    label: str
    model: str | None = None  # the engine model's name; None: the LRU curve is the prediction
    model_token_hit_rate: float | None = None  # the model's, over the whole stream
    # the LRU capacity with the model's hit rate at the pool: what the pool is worth as an LRU
    effective_capacity_blocks: int | None = None
    model_inputs: tuple[tuple[str, str], ...] = ()  # what the model used, in words
    dedupe: tuple[tuple[str, int], ...] = ()  # the grouping's and dedupe's counts
    # shares of the engine's query tokens at the pool: hit, first_time, capacity, pinned, ...
    miss_breakdown: tuple[tuple[str, float], ...] = ()
    notes: tuple[str, ...] = ()  # what can and cannot be predicted

    @property
    def comparable(self) -> bool:
        return self.curve_scope != MISSES_ONLY

    @property
    def predicted_token_hit_rate(self) -> float | None:
        """The prediction for the engine: the model's, else the exact LRU curve's at the pool."""
        if not self.comparable:
            return None
        return self.model_token_hit_rate if self.model is not None else self.lru_by_window.get("all")

    def lru(self, window: str = "all") -> float | None:
        return self.lru_by_window.get(window)

    def predicted(self, window: str = "all") -> float | None:
        """The prediction; a model's is over the whole stream whatever the window."""
        if self.model is not None:
            return self.predicted_token_hit_rate
        return self.lru_by_window.get(window) if self.comparable else None

    def difference(self, window: str = "all") -> float | None:
        """Measured minus predicted, in hit-rate units (None where either is missing or not comparable)."""
        predicted = self.predicted(window)
        if not self.comparable or self.measured_token_hit_rate is None or predicted is None:
            return None
        return self.measured_token_hit_rate - predicted


# Where each data-parallel rank's pool comes from: the engine's pool (summed over its ranks, as its
# /metrics reports it) split evenly, or --capacity given as each rank's pool.
RANK_POOL_SOURCES = {
    "engine": "the engine's pool split evenly over the ranks",
    "chosen": "--capacity, each rank's pool",
}


@dataclass(frozen=True)
class RankView:
    """One rank's own cache: its all-time curve and working sets, and its pool."""

    rank: int
    curve: HitRateCurve  # all time, exact at every capacity
    working_sets: tuple[WorkingSetRow, ...]  # all time ("all" window), both target modes
    distinct_blocks: int
    pool_blocks: int | None  # the rank's own pool (None: not known)
    pool_source: str = "none"  # a key of RANK_POOL_SOURCES, or "none"

    @property
    def accesses(self) -> int:
        return self.curve.accesses

    def working_set_rows(self, mode: str = "coverage") -> tuple[WorkingSetRow, ...]:
        return tuple(r for r in self.working_sets if r.mode == mode)


@dataclass(frozen=True)
class Pooling:
    """One shared pool against each rank's own, at the same total capacity (kvset.snapshot.ranks says how)."""

    ranks: int
    rank_capacity_blocks: dict[int, int]  # each rank's own pool
    capacity_source: str  # a key of RANK_POOL_SOURCES
    shared_hit_rate: dict[str, float]  # by unit: the merged stream at the sum of the pools
    separate_hit_rate: dict[str, float]  # by unit: every rank at its own pool, over all accesses
    curve_scope: str  # what the curves are of (kvset.snapshot.model.ALL_ACCESSES or MISSES_ONLY)

    @property
    def capacity_blocks(self) -> int:
        """The shared pool: the ranks' pools added up."""
        return sum(self.rank_capacity_blocks.values())

    def gain(self, unit: str = "blocks") -> float:
        """Shared minus separate, in hit-rate units (0..1)."""
        return self.shared_hit_rate[unit] - self.separate_hit_rate[unit]


@dataclass(frozen=True)
class Totals:
    accesses: int
    tokens: int
    requests: int
    first_time: int  # accesses to never-seen blocks (distinct blocks seen)
    rereferences: int
    beyond_horizon: int
    tracked_blocks: int
    late_accesses: int = 0  # out-of-order timestamps folded into the current slot


@dataclass(frozen=True, eq=False)
class Snapshot:
    seq: int
    taken_at: float  # wall time
    data_time: float  # timestamp of the newest access (trace time in a replay)
    horizon: int
    units: StreamUnits | None  # the stream's block size (None while no access has told it)
    bytes_per_block: int | None  # full-attention bytes per block (with a model)
    totals: Totals
    curves: dict[str, HitRateCurve]  # by window label; "all" is exact
    working_sets: tuple[WorkingSetRow, ...]
    churn: ChurnSeries
    thrashing: dict[str, Thrashing]  # by window label
    reserve: Reserve | None
    engine: EngineReading | None
    sources: tuple[SourceHealth, ...]
    events: tuple[TimelineEvent, ...]
    accesses_per_second: float  # recent ingest rate
    order: str = "forward"
    demo: bool = False
    model: str | None = None
    targets: dict[str, tuple[float, ...]] = field(default_factory=dict)  # mode -> targets
    # the engine's own readings over time (oldest first): its measured hit rate and usage history
    engine_history: tuple[EngineReading, ...] = ()
    # what the curve is the curve of: ALL_ACCESSES, or MISSES_ONLY while an engine's KV events show
    # only its newly stored blocks (then it is not comparable with the engine's own hit rate)
    curve_scope: str = ALL_ACCESSES
    # the engine's pool in the analyzed stream's blocks (None: no engine, or it reports no capacity)
    engine_capacity_blocks: int | None = None
    operating_point: OperatingPoint | None = None
    main_mode: str = "coverage"  # the main target is the first target of this mode
    main_target: float | None = None
    # with --tiers: the share of all accesses each cache tier serves, from the all-time curve (None
    # without tiers, or while tier sizes in bytes wait for the stream's block size)
    tiers: TierPlan | None = None
    tiers_requested: bool = False  # --tiers was given (tiers stays None while sizes in bytes wait for blocks)
    # data-parallel ranks, each with its own cache (only with two or more): their own all-time views,
    # and one shared pool against their own pools at the same total size (None: not computed, and
    # pooling_note says why)
    ranks: tuple[RankView, ...] = ()
    pooling: Pooling | None = None
    pooling_note: str | None = None
    # a sampled analyzer's sample (rate, size, seed, blocks tracked): then every curve, working set and
    # count but accesses, tokens and requests is an estimate; None: measured on every block
    sample: SampleInfo | None = None
    # with --opt (a replay of a whole file): Belady MIN's curve of every access, exact at every capacity,
    # built once the whole file is known, and LRU's all-time curve against it (kvset.core.policy_gap);
    # opt_note says why they are not there yet (None: --opt was not asked for)
    opt_curve: HitRateCurve | None = None
    policy_gap: PolicyGap | None = None
    opt_note: str | None = None
    # every figure's result, by its type (kvset.figures.FIGURES); a figure that does not apply has none
    results: Mapping[type, Any] = field(default_factory=dict)

    def get(self, kind: type[R]) -> R | None:
        """The result of the figure whose result type is `kind` (None: not computed for this snapshot)."""
        value = self.results.get(kind)
        return value if isinstance(value, kind) else None

    @property
    def block_tokens(self) -> int | None:
        """Tokens per block of the analyzed stream."""
        return self.units.block_size if self.units is not None else None

    def curve(self, window: str = "all") -> HitRateCurve:
        return self.curves.get(window) or self.curves["all"]

    def working_set_rows(self, window: str = "all", mode: str = "coverage") -> tuple[WorkingSetRow, ...]:
        return tuple(r for r in self.working_sets if r.window == window and r.mode == mode)

    def rank_view(self, rank: int | None) -> RankView | None:
        """The view of one rank (None: the merged stream, or a rank this snapshot does not hold)."""
        return next((r for r in self.ranks if r.rank == rank), None) if rank is not None else None

    @property
    def rejected_total(self) -> int:
        return sum(s.rejected_total for s in self.sources)
