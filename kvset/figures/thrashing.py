"""Thrashing: at the engine's pool (or --capacity), what more capacity would buy: the hit rate gained
by +10 % and +25 % capacity, and the re-stores (accesses to blocks the cache held before and had to
remove: misses that only capacity causes).

A cache thrashes when it keeps removing blocks it is about to need again, so that a little more memory
buys a lot: the level is judged on the gain at +25 % capacity and on the share of accesses that are
re-stores (RULE says it in words, for every view). The share of misses just beyond the capacity (near
misses, within 1.25x of it) is kept as a figure but judges nothing: a healthy cache with few misses can
have most of them near. Without a capacity nothing is judged: the tool's own working set sits on the
curve's knee by construction. With data-parallel ranks each rank has its own pool, so the cache is
judged as its ranks run it: on the curve of one LRU per rank (kvset.figures.ranks), kept for all time
only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvset.figures import ranks
from kvset.figures.base import Json, OptionValues, Sizes, TextView
from kvset.figures.inputs import WINDOWS, Figure, FigureInputs
from kvset.figures.tables import NOT_KNOWN, percent_cell
from kvset.quantities import duration, points

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    from kvset.core.curve import HitRateCurve, Unit

# The levels: what +25 % capacity would buy (hit-rate points), or the share of accesses that re-store
# a block the cache removed. Either one at its mark is enough. The demo's healthy phases (an 87 % hit
# rate that +25 % would raise by 3-4 points, 3-6 % re-stores) stay OK; its peak (re-stores 20-45 %)
# thrashes.
GAIN_WARN = 0.05
GAIN_THRASHING = 0.10
RESTORE_WARN = 0.10
RESTORE_THRASHING = 0.25
RULE = (
    f"THRASHING when +25 % cap buys ≥ {GAIN_THRASHING * 100:.0f} pt or re-stores are ≥ "
    f"{RESTORE_THRASHING * 100:.0f} % of accesses; WARN from {GAIN_WARN * 100:.0f} pt or "
    f"{RESTORE_WARN * 100:.0f} %"
)
# the same, short enough for the panel (the help and the README give RULE)
RULE_SHORT = (
    f"thrash: +25 % ≥ {GAIN_THRASHING * 100:.0f} pt or ≥ {RESTORE_THRASHING * 100:.0f} % re-stores"
    f" · warn {GAIN_WARN * 100:.0f}/{RESTORE_WARN * 100:.0f}"
)
RANK_POOL_SOURCE = "rank"  # a capacity that is each data-parallel rank's own pool


@dataclass(frozen=True)
class CapacityGain:
    """What more capacity would buy at one capacity, in one unit (blocks, or tokens as engines count)."""

    hit_rate: float
    gain_10pct: float  # hit-rate gain from +10 % capacity (absolute, 0..1)
    gain_25pct: float
    restore_share: float  # share of accesses re-storing a block seen before: misses of capacity alone
    near_miss_share: float  # share of misses with capacity < d <= 1.25 capacity

    @property
    def level(self) -> str:
        if self.gain_25pct >= GAIN_THRASHING or self.restore_share >= RESTORE_THRASHING:
            return "thrashing"
        if self.gain_25pct >= GAIN_WARN or self.restore_share >= RESTORE_WARN:
            return "warn"
        return "ok"


@dataclass(frozen=True)
class Thrashing:
    """Is the cache thrashing at one capacity, in one window: judged in blocks (the pool's unit), with
    the same figures in tokens where the stream has token counts."""

    capacity_blocks: int
    capacity_source: str  # engine (its pool) | chosen (--capacity) | rank (each rank's own pool)
    window: str
    blocks: CapacityGain
    tokens: CapacityGain | None = None

    @property
    def level(self) -> str:
        return self.blocks.level

    def in_unit(self, unit: Unit) -> CapacityGain:
        """The figures in `unit` (tokens when known, else blocks)."""
        return self.tokens if unit == "tokens" and self.tokens is not None else self.blocks


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


def capacity_gain(curve: HitRateCurve, capacity: int, unit: Unit = "blocks") -> CapacityGain:
    """What +10 % and +25 % more than `capacity` blocks would buy on `curve`, in `unit`."""
    hr = curve.hit_rate(capacity, unit)
    total = curve.accesses if unit == "blocks" else curve.tokens
    # integer ceilings: 50 -> 55, not 56
    plus_10, plus_25 = -(-capacity * 110 // 100), -(-capacity * 125 // 100)
    restores = curve.infinite_capacity_hits(unit) - curve.hits(capacity, unit)
    return CapacityGain(
        hit_rate=hr,
        gain_10pct=curve.hit_rate(plus_10, unit) - hr,
        gain_25pct=curve.hit_rate(plus_25, unit) - hr,
        restore_share=restores / total if total else 0.0,
        near_miss_share=curve.miss_share_between(capacity, plus_25, unit),
    )


def thrashing_at(curve: HitRateCurve, capacity: int, source: str, window: str) -> Thrashing:
    """The thrashing figures of `curve` at `capacity` blocks."""
    tokens = capacity_gain(curve, capacity, "tokens") if curve.tokens else None
    return Thrashing(capacity, source, window, capacity_gain(curve, capacity), tokens)


def compute(inputs: FigureInputs, options: OptionValues) -> ThrashingByWindow:
    split = ranks_split.split if (ranks_split := inputs.result(ranks.FIGURE)) is not None else None
    out = {}
    capacity = inputs.capacity
    if split is not None:
        # each rank's own pool: judged on the ranks' own curves, which are kept for all time only
        out["all"] = thrashing_at(split.curve, split.pool_blocks, RANK_POOL_SOURCE, "all")
    elif capacity.blocks:
        for label, curve in inputs.curves.items():
            # a window without re-references yet has nothing capacity could buy: nothing to judge
            if curve.accesses and curve.infinite_capacity_hits():
                out[label] = thrashing_at(curve, capacity.blocks, capacity.source, label)
    return ThrashingByWindow(out)


def _gain_json(g: CapacityGain) -> Json:
    return {
        "hit_rate": g.hit_rate,
        "gain_10pct": g.gain_10pct,
        "gain_25pct": g.gain_25pct,
        "restore_share": g.restore_share,
        "near_miss_share": g.near_miss_share,
    }


def to_json(result: ThrashingByWindow, sizes: Sizes) -> Json:
    """Per window: the block figures at the top (the level is judged on them), tokens beside."""
    return {
        "thrashing": {
            label: {
                "capacity_blocks": t.capacity_blocks,
                "capacity_source": t.capacity_source,
                **_gain_json(t.blocks),
                "tokens": _gain_json(t.tokens) if t.tokens is not None else None,
                "level": t.level,
                "rule": RULE,
            }
            for label, t in result.windows.items()
        }
    }


def text(result: ThrashingByWindow, view: TextView) -> list[str]:
    th = result.get(view.window)
    seconds = dict(WINDOWS).get(view.window)
    span = "all time" if seconds is None else f"last {duration(seconds)}"
    if th is not None:
        b = th.blocks
        return [
            "",
            f"thrashing at {th.capacity_blocks:,} blocks ({th.capacity_source}, {span}): "
            f"block hit rate {percent_cell(b.hit_rate)}, +10 % capacity {points(b.gain_10pct, 2, NOT_KNOWN)}, "
            f"+25 % capacity {points(b.gain_25pct, 2, NOT_KNOWN)}, re-stores "
            f"{percent_cell(b.restore_share, 1)} of accesses, near misses "
            f"{percent_cell(b.near_miss_share, 1)} of misses [{th.level.upper()}]",
            f"  ({RULE})",
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
