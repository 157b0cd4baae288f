"""Thrashing: at the engine's pool (or --capacity), what +10 % and +25 % capacity would buy, and the
share of the misses that lie just beyond the capacity (near misses, within 1.25x of it).

From 10 % near misses the views warn, from 25 % they say THRASHING: a little more memory would turn
many misses into hits. Without a capacity nothing is judged: the tool's own working set sits on the
curve's knee by construction, so its near misses would say nothing about a real cache. With
data-parallel ranks each rank has its own pool, so the cache is judged as its ranks run it: on the
curve of one LRU per rank (kvset.figures.ranks), which is kept for all time only.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvset.core.curve import HitRateCurve
from kvset.figures import ranks
from kvset.figures.base import Json, OptionValues, Sizes, TextView
from kvset.figures.inputs import WINDOWS, Figure, FigureInputs
from kvset.figures.tables import NOT_KNOWN, percent_cell
from kvset.quantities import duration, points

# Near-miss thresholds (share of misses within 1.25x of the capacity): colour levels.
NEAR_MISS_WARN = 0.10
NEAR_MISS_THRASHING = 0.25
RANK_POOL_SOURCE = "rank"  # a capacity that is each data-parallel rank's own pool


@dataclass(frozen=True)
class Thrashing:
    """Near misses at one capacity, in one window: the signature of a cache that thrashes."""

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
class ThrashingByWindow:
    """Thrashing in each window that was judged (none without a capacity; all time only with ranks)."""

    windows: dict[str, Thrashing]

    def get(self, window: str) -> Thrashing | None:
        return self.windows.get(window)

    @property
    def by_rank_pools(self) -> bool:
        """Judged at each rank's own pool (then over all time only)."""
        every = self.windows.get("all")
        return every is not None and every.capacity_source == RANK_POOL_SOURCE


def thrashing_at(curve: HitRateCurve, capacity: int, source: str, window: str) -> Thrashing:
    """The thrashing figures of `curve` at `capacity` blocks."""
    hr = curve.hit_rate(capacity)
    # integer ceilings: 50 -> 55, not 56
    plus_10, plus_25 = -(-capacity * 110 // 100), -(-capacity * 125 // 100)
    return Thrashing(
        capacity_blocks=capacity,
        capacity_source=source,
        window=window,
        hit_rate=hr,
        gain_10pct=curve.hit_rate(plus_10) - hr,
        gain_25pct=curve.hit_rate(plus_25) - hr,
        near_miss_share=curve.miss_share_between(capacity, plus_25),
    )


def compute(inputs: FigureInputs, options: OptionValues) -> ThrashingByWindow:
    split = ranks_split.split if (ranks_split := inputs.result(ranks.FIGURE)) is not None else None
    out = {}
    capacity = inputs.capacity
    if split is not None:
        # each rank's own pool: judged on the ranks' own curves, which are kept for all time only
        out["all"] = thrashing_at(split.curve, split.pool_blocks, RANK_POOL_SOURCE, "all")
    elif capacity.blocks:
        for label, curve in inputs.curves.items():
            if curve.accesses:  # a window without accesses has no misses to judge
                out[label] = thrashing_at(curve, capacity.blocks, capacity.source, label)
    return ThrashingByWindow(out)


def to_json(result: ThrashingByWindow, sizes: Sizes) -> Json:
    return {
        "thrashing": {
            label: {
                "capacity_blocks": t.capacity_blocks,
                "capacity_source": t.capacity_source,
                "hit_rate": t.hit_rate,
                "gain_10pct": t.gain_10pct,
                "gain_25pct": t.gain_25pct,
                "near_miss_share": t.near_miss_share,
                "level": t.level,
            }
            for label, t in result.windows.items()
        }
    }


def text(result: ThrashingByWindow, view: TextView) -> list[str]:
    th = result.get(view.window)
    seconds = dict(WINDOWS).get(view.window)
    span = "all time" if seconds is None else f"last {duration(seconds)}"
    if th is not None:
        return [
            "",
            f"thrashing at {th.capacity_blocks:,} blocks ({th.capacity_source}, {span}): "
            f"hit rate {percent_cell(th.hit_rate)}, +10 % capacity {points(th.gain_10pct, 2, NOT_KNOWN)}, "
            f"+25 % capacity {points(th.gain_25pct, 2, NOT_KNOWN)}, near misses "
            f"{percent_cell(th.near_miss_share, 1)} of misses [{th.level.upper()}]",
        ]
    if not view.live or not view.accesses:
        return []
    if result.by_rank_pools:
        return ["", "thrashing: judged over all time only (each data-parallel rank has its own pool)"]
    return [
        "",
        "thrashing: not judged (no cache capacity: give --capacity BLOCKS, or --metrics/--events "
        "of an engine that reports its pool)",
    ]


FIGURE: Figure[ThrashingByWindow] = Figure(
    "thrashing", ThrashingByWindow, compute, ("thrashing",), to_json, text=text
)
