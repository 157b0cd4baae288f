"""Belady MIN beside LRU (--opt), and the policy gap: how much of LRU's cost is its policy.

MIN's curve of a whole trace (kvset.core.opt) is exact at every capacity. MIN hits at least what LRU
hits at every capacity, so for a target it never needs more capacity than LRU: `capacity_gap` is what
LRU needs minus what MIN needs (and their ratio); at a capacity, `hit_rate_gap` is MIN's hit rate minus
LRU's. A large gap says the policy is the limit (a smarter eviction would do with less memory); a
small one says the capacity is. The gap is read at the engine's pool or --capacity, and at the knee.
Every view reads these values; none computes a gap itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvset.figures.base import Json, OptionValues, Sizes, TextView
from kvset.figures.inputs import Figure, FigureInputs, target_mode
from kvset.figures.tables import NOT_KNOWN, format_table, percent_cell
from kvset.quantities import points, target_label, times

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    from kvset.core.curve import HitRateCurve, TargetMode


@dataclass(frozen=True)
class CapacityGap:
    """For one target: the smallest capacity LRU needs and the smallest MIN needs (None: not reached,
    LRU's within its horizon)."""

    target: float
    mode: str
    lru_blocks: int | None
    opt_blocks: int | None

    @property
    def gap_blocks(self) -> int | None:
        if self.lru_blocks is None or self.opt_blocks is None:
            return None
        return self.lru_blocks - self.opt_blocks

    @property
    def ratio(self) -> float | None:
        """LRU's capacity over MIN's (at least 1), None where either is not known or MIN needs none."""
        if self.lru_blocks is None or not self.opt_blocks:
            return None
        return self.lru_blocks / self.opt_blocks


@dataclass(frozen=True)
class HitRateGap:
    """At one capacity: LRU's and MIN's hit rates, in blocks and tokens.

    where: what the capacity is: "engine" (its pool), "chosen" (--capacity) or "knee" (the LRU
    curve's, kvset.core.curve.HitRateCurve.knee); beyond_horizon: the capacity
    lies past the LRU analyzer's horizon, where LRU's hits are a lower bound.
    """

    capacity_blocks: int
    where: str
    lru_block_hit_rate: float
    opt_block_hit_rate: float
    lru_token_hit_rate: float
    opt_token_hit_rate: float
    beyond_horizon: bool = False

    @property
    def block_gap(self) -> float:
        return self.opt_block_hit_rate - self.lru_block_hit_rate

    @property
    def token_gap(self) -> float:
        return self.opt_token_hit_rate - self.lru_token_hit_rate


def capacity_gaps(
    lru: HitRateCurve, opt: HitRateCurve, targets: Sequence[float], mode: TargetMode
) -> tuple[CapacityGap, ...]:
    """The capacity each policy needs for each target (in `mode`), LRU's from its own curve."""
    return tuple(
        CapacityGap(float(t), mode, lru.working_set(t, mode=mode), opt.working_set(t, mode=mode))
        for t in targets
    )


def hit_rate_gap(lru: HitRateCurve, opt: HitRateCurve, capacity: int, where: str) -> HitRateGap:
    """Both policies' hit rates at `capacity` blocks."""
    c = int(capacity)
    return HitRateGap(
        capacity_blocks=c,
        where=where,
        lru_block_hit_rate=lru.hit_rate(c, "blocks"),
        opt_block_hit_rate=opt.hit_rate(c, "blocks"),
        lru_token_hit_rate=lru.hit_rate(c, "tokens"),
        opt_token_hit_rate=opt.hit_rate(c, "tokens"),
        beyond_horizon=c > lru.horizon,
    )


def hit_rate_gaps(
    lru: HitRateCurve, opt: HitRateCurve, capacity: int | None, capacity_source: str | None
) -> tuple[HitRateGap, ...]:
    """The gaps every view shows: at the given capacity (the engine's pool or --capacity, named by
    capacity_source) when there is one, and at the LRU curve's knee when it has one."""
    out = []
    if capacity:
        out.append(hit_rate_gap(lru, opt, capacity, capacity_source or "chosen"))
    knee = lru.knee()
    if knee is not None:
        out.append(hit_rate_gap(lru, opt, knee, "knee"))
    return tuple(out)


@dataclass(frozen=True)
class PolicyGap:
    """LRU against MIN on the same accesses: the capacities each needs per target (in each target
    mode given), and both hit rates at the capacities of hit_rate_gaps."""

    capacities: tuple[CapacityGap, ...]
    hit_rates: tuple[HitRateGap, ...]

    def for_mode(self, mode: str) -> tuple[CapacityGap, ...]:
        return tuple(g for g in self.capacities if g.mode == mode)

    def at(self, where: str) -> HitRateGap | None:
        """The gap at the capacity named `where` ("engine", "chosen", "knee"), if computed."""
        return next((g for g in self.hit_rates if g.where == where), None)

    def at_capacity(self) -> HitRateGap | None:
        """The gap at the engine's pool or the chosen capacity (not the knee), if there is one."""
        return next((g for g in self.hit_rates if g.where != "knee"), None)


def policy_gap(
    lru: HitRateCurve,
    opt: HitRateCurve,
    targets: Mapping[str, Sequence[float]],
    capacity: int | None = None,
    capacity_source: str | None = None,
) -> PolicyGap:
    """The whole gap: targets by mode ({"coverage": (0.95, ...)}), and the capacity to read the hit
    rates at (None: the knee only)."""
    caps = tuple(g for mode, ts in targets.items() for g in capacity_gaps(lru, opt, ts, target_mode(mode)))
    return PolicyGap(caps, hit_rate_gaps(lru, opt, capacity, capacity_source))


@dataclass(frozen=True, eq=False)
class BeladyMin:
    """MIN's curve (None while it waits for the whole trace: `note` says what for), the distinct blocks
    it holds and what it took, and LRU against it."""

    curve: HitRateCurve | None
    distinct_blocks: int | None = None
    seconds: float | None = None
    gap: PolicyGap | None = None
    note: str | None = None


def compute(inputs: FigureInputs, options: OptionValues) -> BeladyMin | None:
    opt = inputs.opt
    if opt is None:
        return BeladyMin(None, note=inputs.opt_note) if inputs.opt_note else None
    capacity = inputs.capacity
    gap = policy_gap(
        inputs.curves["all"], opt.curve, inputs.targets.by_mode, capacity.blocks, capacity.source
    )
    return BeladyMin(opt.curve, opt.distinct_blocks, opt.seconds, gap)


OPT_METHOD = "Belady MIN at every capacity from one pass: OPT stack distances (Mattson's priority stack)"
WHERE = {"engine": "the engine's pool", "chosen": "--capacity", "knee": "the knee"}


def opt_json(curve: HitRateCurve, distinct_blocks: int | None, seconds: float | None = None) -> Json:
    """What the MIN curve is: exact at every capacity, up to the blocks it ever holds."""
    return {
        "policy": "Belady MIN: on a miss with a full cache, evict the block used again farthest ahead",
        "method": OPT_METHOD,
        "exact": True,
        "distinct_blocks": distinct_blocks,
        "max_stack_distance": curve.max_distance(),
        "attainable_hit_rate": curve.attainable("blocks"),
        "attainable_token_hit_rate": curve.attainable("tokens"),
        "seconds": None if seconds is None else round(seconds, 4),
    }


def policy_gap_json(gap: PolicyGap, mode: str | None = None) -> Json:
    """The gap's figures as JSON: per target (of `mode`, or every mode) and at each capacity read."""
    capacities = gap.capacities if mode is None else gap.for_mode(mode)
    return {
        "working_sets": [
            {
                "target": g.target,
                "mode": g.mode,
                "lru_capacity_blocks": g.lru_blocks,
                "opt_capacity_blocks": g.opt_blocks,
                "capacity_gap_blocks": g.gap_blocks,
                "capacity_ratio": g.ratio,
            }
            for g in capacities
        ],
        "hit_rates": [
            {
                "capacity_blocks": h.capacity_blocks,
                "where": h.where,
                "lru_block_hit_rate": h.lru_block_hit_rate,
                "opt_block_hit_rate": h.opt_block_hit_rate,
                "block_gap": h.block_gap,
                "lru_token_hit_rate": h.lru_token_hit_rate,
                "opt_token_hit_rate": h.opt_token_hit_rate,
                "token_gap": h.token_gap,
                "beyond_horizon": h.beyond_horizon,
            }
            for h in gap.hit_rates
        ],
    }


def _blocks(n: int | None) -> str:
    return "not reached" if n is None else f"{n:,}"


def policy_gap_lines(gap: Json, mode: str | None = None) -> list[str]:
    """The gap (from policy_gap_json) as text: a table of the capacities per target, then a line per
    capacity the hit rates were read at. mode: only that target mode's rows."""
    rows = [r for r in gap["working_sets"] if mode is None or r["mode"] == mode]
    lines = ["policy gap: LRU against Belady MIN (a policy with foresight) on the same accesses:"]
    if rows:
        cells = [
            [
                target_label(r["target"], r["mode"]),
                _blocks(r["lru_capacity_blocks"]),
                _blocks(r["opt_capacity_blocks"]),
                NOT_KNOWN if r["capacity_gap_blocks"] is None else f"{r['capacity_gap_blocks']:,}",
                times(r["capacity_ratio"], 2, NOT_KNOWN),
            ]
            for r in rows
        ]
        lines.append(format_table(["target", "LRU blocks", "MIN blocks", "LRU - MIN", "LRU / MIN"], cells))
    for h in gap["hit_rates"]:
        where = WHERE.get(h["where"], h["where"])
        at = (
            f"at the knee, {h['capacity_blocks']:,} blocks"
            if h["where"] == "knee"
            else f"at {h['capacity_blocks']:,} blocks ({where})"
        )
        bound = " (LRU beyond its horizon: a lower bound)" if h["beyond_horizon"] else ""
        lines.append(
            f"  {at}: block hit rate LRU {percent_cell(h['lru_block_hit_rate'])}, MIN "
            f"{percent_cell(h['opt_block_hit_rate'])} ({points(h['block_gap'], 2)}); token hit rate LRU "
            f"{percent_cell(h['lru_token_hit_rate'])}, MIN {percent_cell(h['opt_token_hit_rate'])} "
            f"({points(h['token_gap'], 2)}){bound}"
        )
    if not any(h["where"] != "knee" for h in gap["hit_rates"]):
        lines.append("  (give --capacity BLOCKS for the gap at your cache's size)")
    return lines


def to_json(result: BeladyMin, sizes: Sizes) -> Json:
    return {
        "opt": opt_json(result.curve, result.distinct_blocks, result.seconds)
        if result.curve is not None
        else None,
        "policy_gap": policy_gap_json(result.gap) if result.gap is not None else None,
        "opt_note": result.note,
    }


def text(result: BeladyMin, view: TextView) -> list[str]:
    if result.gap is not None and (view.window == "all" or not view.live):
        return ["", *policy_gap_lines(policy_gap_json(result.gap, view.mode))]
    if result.note and view.live:
        return ["", result.note]
    return []


FIGURE: Figure[BeladyMin] = Figure(
    "policy_gap", BeladyMin, compute, ("opt", "policy_gap", "opt_note"), to_json, text=text
)
