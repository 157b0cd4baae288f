"""Cache tiers (HBM, then host DRAM, then SSD) read off one LRU hit-rate curve.

With H(C) the accesses at stack distance <= C:

- exclusive tiers hold each block in one tier only: a block evicted from tier k moves down to tier
  k+1, a hit in a lower tier moves the block back to the top, and the whole is one LRU stack cut into
  consecutive pieces. Tier k serves the distances in (C1+...+Ck-1, C1+...+Ck].
- inclusive tiers each hold a copy of everything above them and see every access (write-through:
  each tier is its own LRU of its own size). Tier k holds the Ck most recent blocks and serves the
  distances in (Ck-1, Ck]; its size must be at least the size of the tier above it.

Every share is of ALL accesses (and tokens), so the tiers' shares and the miss share add up to 1.

--tiers sizes in bytes (with a model) become whole blocks once the stream's block size is known; until
then the figure waits (and says so).

Beside the plan, the tiers the engine itself counts (SGLang's HiCache: device, host, storage): the
share of the prompt tokens each served since kvset started (`sglang:cached_tokens_total` by
`cache_source`) and the pages the KV events show in each medium (GPU, CPU_PINNED, DISK/EXTERNAL).
HiCache writes through (the host holds a copy of what the device holds), so its tiers compare with
`--tier-mode inclusive`; the figure says so when the plan is exclusive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvset.figures.base import (
    Json,
    MetricFamily,
    MetricSample,
    MetricsView,
    Option,
    OptionValues,
    Sizes,
    TextView,
)
from kvset.figures.curve import GivenSizes, in_blocks
from kvset.figures.inputs import Figure, FigureInputs, target_mode
from kvset.figures.tables import NOT_KNOWN, format_table, gib_cell, percent_cell
from kvset.quantities import parse_fraction, target_label
from kvset.types import EngineReading

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    from kvset.core.curve import HitRateCurve, TargetMode

TIER_MODES = ("exclusive", "inclusive")
TIER_MODE_MEANING = {
    "exclusive": "a block lives in one tier, demoted on eviction: one LRU cut into consecutive tiers",
    "inclusive": "each tier holds a copy of the tiers above it and sees every access",
}


TIERS: Option[GivenSizes | None] = Option(
    "--tiers",
    "tiers",
    None,
    "cache tiers, fastest first (HBM, host DRAM, SSD), in blocks or, with --model, in bytes "
    "(80GiB,512GiB,4TiB): the share of all accesses each tier serves",
    parse=lambda text: GivenSizes.parse(text, "tier size"),
    metavar="C1,C2,..",
)
TIER_MODE: Option[str] = Option(
    "--tier-mode",
    "tier_mode",
    "exclusive",
    "exclusive: a block lives in one tier and is demoted on eviction (default); inclusive: each tier "
    "holds a copy of those above it and sees every access (write-through)",
    choices=TIER_MODES,
)
NEXT_TIER: Option[float | None] = Option(
    "--size-next-tier",
    "size_next_tier",
    None,
    "with --tiers: the smallest tier to add behind them so that all reach TARGET (a fraction or "
    "percentage, coverage or absolute as --target-mode)",
    parse=lambda text: parse_fraction(text, "--size-next-tier", "target"),
    metavar="TARGET",
)


def check(options: OptionValues, bytes_from: str | None) -> None:
    """--size-next-tier needs --tiers; sizes in bytes need the bytes per block; inclusive tiers grow."""
    given = options.get(TIERS)
    if given is None:
        if options.given(NEXT_TIER):
            raise ValueError("--size-next-tier needs --tiers: the tiers the next one goes behind")
        return
    given.check_bytes(TIERS.flag, bytes_from)
    # inclusive tiers must grow; bytes and blocks keep their order
    tier_reaches(given.sizes, options.get(TIER_MODE))


@dataclass(frozen=True)
class Tier:
    index: int  # 1 for the fastest tier
    capacity_blocks: int  # the tier's own size
    reach_blocks: int  # the LRU depth that ends in this tier: C1+...+Ck (exclusive) or Ck (inclusive)
    block_hits: int
    token_hits: int
    block_hit_rate: float  # share of all accesses this tier serves
    token_hit_rate: float  # share of all tokens
    exact: bool  # False when the reach lies beyond the horizon: the share is then a lower bound


@dataclass(frozen=True)
class NextTier:
    """The smallest tier to add behind the given ones so that all of them together reach a target."""

    target: float
    mode: str  # coverage | absolute
    capacity_blocks: int | None  # None: not reached inside the horizon; 0: the given tiers reach it
    reach_blocks: int | None  # the LRU depth the tiers then reach
    block_hit_rate: float | None  # the hit rate of all tiers together with it
    token_hit_rate: float | None

    @property
    def reached(self) -> bool:
        return self.capacity_blocks is not None


@dataclass(frozen=True)
class TierPlan:
    mode: str  # exclusive | inclusive
    tiers: tuple[Tier, ...]
    next_tier: NextTier | None = None

    @property
    def miss_block_rate(self) -> float:
        return max(0.0, 1.0 - sum(t.block_hit_rate for t in self.tiers))

    @property
    def miss_token_rate(self) -> float:
        return max(0.0, 1.0 - sum(t.token_hit_rate for t in self.tiers))


def tier_reaches(capacities: Sequence[int], mode: str) -> list[int]:
    """The LRU depth at which each tier ends; ValueError for sizes the mode cannot have."""
    caps = [int(c) for c in capacities]
    if mode not in TIER_MODES:
        raise ValueError(f"tier mode must be one of {', '.join(TIER_MODES)}, got {mode!r}")
    if not caps:
        raise ValueError("no tier given")
    if any(c < 0 for c in caps):
        raise ValueError(f"a tier cannot hold fewer than 0 blocks: {caps}")
    if mode == "exclusive":
        reaches, total = [], 0
        for c in caps:
            total += c
            reaches.append(total)
        return reaches
    for k in range(1, len(caps)):
        if caps[k] < caps[k - 1]:
            raise ValueError(
                f"inclusive tiers hold a copy of every tier above them: tier {k + 1} ({caps[k]:,} blocks) "
                f"must be at least as large as tier {k} ({caps[k - 1]:,} blocks); give the tiers fastest "
                "first, or count them as exclusive tiers"
            )
    return caps


def plan_tiers(
    curve: HitRateCurve,
    capacities: Sequence[int],
    mode: str = "exclusive",
    next_target: float | None = None,
    target_mode: TargetMode = "coverage",
) -> TierPlan:
    """The share of all accesses each tier serves; with `next_target`, the smallest next tier that
    makes the tiers reach it (blocks unit, `target_mode` as for working sets)."""
    reaches = tier_reaches(capacities, mode)
    tiers = []
    below_blocks = below_tokens = 0
    for i, (cap, reach) in enumerate(zip(capacities, reaches, strict=True)):
        blocks, tokens = curve.hits(reach, "blocks"), curve.hits(reach, "tokens")
        hits, token_hits = blocks - below_blocks, tokens - below_tokens
        tiers.append(
            Tier(
                index=i + 1,
                capacity_blocks=int(cap),
                reach_blocks=reach,
                block_hits=hits,
                token_hits=token_hits,
                block_hit_rate=hits / curve.accesses if curve.accesses else 0.0,
                token_hit_rate=token_hits / curve.tokens if curve.tokens else 0.0,
                exact=reach <= curve.horizon,
            )
        )
        below_blocks, below_tokens = blocks, tokens
    nxt = None if next_target is None else next_tier(curve, capacities, mode, next_target, target_mode)
    return TierPlan(mode=mode, tiers=tuple(tiers), next_tier=nxt)


def next_tier(
    curve: HitRateCurve,
    capacities: Sequence[int],
    mode: str,
    target: float,
    target_mode: TargetMode = "coverage",
) -> NextTier:
    """The smallest tier behind `capacities` with which the tiers reach `target`.

    All the tiers together hit H(reach of the last tier); the working set W of the target is the
    smallest reach that does. Exclusive: the next tier adds its size to the reach, so it needs
    W - (C1+...+Ck). Inclusive: its reach is its own size, so it needs W (at least Ck).
    """
    reach = tier_reaches(capacities, mode)[-1]
    ws = curve.working_set(target, mode=target_mode)
    if ws is None:
        return NextTier(target, target_mode, None, None, None, None)
    if ws <= reach:
        size, new_reach = 0, reach
    else:
        size, new_reach = (ws - reach if mode == "exclusive" else ws), ws
    return NextTier(
        target,
        target_mode,
        size,
        new_reach,
        curve.hit_rate(new_reach, "blocks"),
        curve.hit_rate(new_reach, "tokens"),
    )


def tier_blocks(options: OptionValues, sizes: Sizes) -> tuple[int, ...] | None:
    """--tiers in blocks (None: not given, or sizes in bytes while the block size is not known)."""
    given = options.get(TIERS)
    return None if given is None else in_blocks(given.sizes, given.unit, sizes.bytes_per_block)


def check_blocks(options: OptionValues, sizes: Sizes) -> None:
    """Once the block size is known (kvset analyze, after reading): every tier holds a whole block."""
    given = options.get(TIERS)
    if given is not None:
        given.blocks(TIERS.flag, sizes.bytes_per_block)


# The engine's names of its tiers, fastest first: SGLang's cache_source labels and KV-event media.
ENGINE_TIER_NAMES = ("device", "host", "storage")
_SOURCE_TIER = {"device": 0, "host": 1}  # any storage_* (or storage) source: the third
_MEDIUM_TIER = {"GPU": 0, "CPU": 1, "CPU_PINNED": 1, "DISK": 2, "EXTERNAL": 2, "STORAGE": 2}
INCLUSIVE_NOTE = "SGLang's HiCache writes through (each tier holds a copy of the one above): compare with --tier-mode inclusive"


@dataclass(frozen=True)
class EngineTier:
    """One tier as the engine counts it: measured, not modelled."""

    index: int  # 1 for the device
    name: str  # device | host | storage
    token_hit_rate: float | None  # its cached tokens over all prompt tokens since kvset started
    resident_pages: int | None  # the pages the KV events show in its medium


def engine_tiers(engine: EngineReading | None) -> tuple[EngineTier, ...]:
    """The engine's own tiers from its reading (none: it counts one tier only)."""
    if engine is None:
        return ()
    hits: dict[int, float] = {}
    for source, tokens in engine.tier_hits_since_start or ():
        k = _SOURCE_TIER.get(source, 2 if source.startswith("storage") else -1)
        if k >= 0:
            hits[k] = hits.get(k, 0.0) + tokens
    pages: dict[int, int] = {}
    for medium, n in engine.resident_by_medium or ():
        k = _MEDIUM_TIER.get(medium.upper(), -1)
        if k >= 0:
            pages[k] = pages.get(k, 0) + n
    if len(set(hits) | set(pages)) < 2:
        return ()
    queries = engine.queries_since_start
    return tuple(
        EngineTier(
            k + 1,
            ENGINE_TIER_NAMES[k],
            hits[k] / queries if k in hits and queries else None,
            pages.get(k),
        )
        for k in sorted(set(hits) | set(pages))
    )


@dataclass(frozen=True)
class Tiers:
    """The tiers asked for (--tiers); `plan` None while sizes in bytes wait for the stream's block size
    (or when only the engine's own tiers are known); `engine` the engine's measured tiers."""

    plan: TierPlan | None
    engine: tuple[EngineTier, ...] = ()
    planned: bool = True  # --tiers given (False: the engine's own tiers only)

    @property
    def note(self) -> str | None:
        """What to change to compare the plan with the engine's tiers."""
        if self.plan is not None and self.plan.mode == "exclusive" and len(self.engine) > 1:
            return INCLUSIVE_NOTE
        return None


def compute(inputs: FigureInputs, options: OptionValues) -> Tiers | None:
    measured = engine_tiers(inputs.engine)
    if not options.given(TIERS):
        return Tiers(None, measured, planned=False) if measured else None
    blocks = tier_blocks(options, inputs.sizes)
    if blocks is None:
        return Tiers(None, measured)
    mode = target_mode(inputs.targets.main_mode)
    plan = plan_tiers(inputs.curves["all"], blocks, options.get(TIER_MODE), options.get(NEXT_TIER), mode)
    return Tiers(plan, measured)


def _sizes(blocks: int | None, sizes: Sizes) -> Json:
    return sizes.json(blocks)


def to_json(result: Tiers, sizes: Sizes) -> Json:
    """`tier_mode`, `tiers` (in tier order, each the share of all accesses it serves), `tier_misses` and
    `next_tier` (null unless --size-next-tier), all null while the tiers wait for the block size; and
    `engine_tiers`, the engine's own (null when it counts one tier only)."""
    plan = result.plan
    engine = (
        [
            {
                "tier": t.index,
                "name": t.name,
                "token_hit_rate": t.token_hit_rate,
                "resident_pages": t.resident_pages,
            }
            for t in result.engine
        ]
        if result.engine
        else None
    )
    if plan is None:
        return {
            "tier_mode": None,
            "tiers": None,
            "tier_misses": None,
            "next_tier": None,
            "engine_tiers": engine,
        }
    tiers = []
    for t in plan.tiers:
        row = {
            "tier": t.index,
            **_sizes(t.capacity_blocks, sizes),
            "reach_blocks": t.reach_blocks,
            "block_hit_rate": t.block_hit_rate,
            "token_hit_rate": t.token_hit_rate,
        }
        if not t.exact:
            row["beyond_horizon"] = True  # a lower bound: the tier ends beyond the exact part of the curve
        tiers.append(row)
    n = plan.next_tier
    return {
        "tier_mode": plan.mode,
        "tiers": tiers,
        "tier_misses": {"block_miss_rate": plan.miss_block_rate, "token_miss_rate": plan.miss_token_rate},
        "next_tier": None
        if n is None
        else {
            "target": n.target,
            "mode": n.mode,
            "reached": n.reached,
            **_sizes(n.capacity_blocks, sizes),
            "reach_blocks": n.reach_blocks,
            "block_hit_rate": n.block_hit_rate,
            "token_hit_rate": n.token_hit_rate,
        },
        "engine_tiers": engine,
    }


def planned_share(plan: TierPlan | None, index: int) -> float | None:
    """The token share --tiers gives the tier of this index (None: no such tier planned)."""
    if plan is None or index > len(plan.tiers):
        return None
    return plan.tiers[index - 1].token_hit_rate


def engine_text(result: Tiers) -> list[str]:
    """The engine's own tiers beside the plan's shares for the same tiers."""
    if not result.engine:
        return []
    cells = [
        [
            str(t.index),
            t.name,
            NOT_KNOWN if t.token_hit_rate is None else percent_cell(t.token_hit_rate),
            NOT_KNOWN if (p := planned_share(result.plan, t.index)) is None else percent_cell(p),
            NOT_KNOWN if t.resident_pages is None else f"{t.resident_pages:,}",
        ]
        for t in result.engine
    ]
    headers = ["tier", "engine's", "token hit rate (measured)", "--tiers (model)", "pages held (events)"]
    lines = ["", "the engine's own tiers (measured since kvset started):", format_table(headers, cells)]
    return lines + ([result.note] if result.note else [])


def text(result: Tiers, view: TextView) -> list[str]:
    plan = result.plan
    if plan is None:
        return engine_text(result)
    with_gib = view.with_gib
    headers = (
        ["tier", "blocks", "tokens"] + (["GiB"] if with_gib else []) + ["block hit rate", "token hit rate"]
    )
    cells = []
    for t in plan.tiers:
        tokens = view.sizes.tokens(t.capacity_blocks)
        line = [str(t.index), f"{t.capacity_blocks:,}", f"{tokens:,}" if tokens else NOT_KNOWN]
        if with_gib:
            line.append(gib_cell(view.sizes.bytes(t.capacity_blocks)))
        mark = "" if t.exact else " (lower bound: beyond the horizon)"
        cells.append(line + [percent_cell(t.block_hit_rate) + mark, percent_cell(t.token_hit_rate)])
    cells.append(
        ["miss", "", ""]
        + ([""] if with_gib else [])
        + [percent_cell(plan.miss_block_rate), percent_cell(plan.miss_token_rate)]
    )
    lines = [
        "",
        f"tiers ({plan.mode}: {TIER_MODE_MEANING[plan.mode]}; shares of all accesses):",
        format_table(headers, cells),
    ]
    n = plan.next_tier
    if n is not None:
        goal = f"{target_label(n.target)} ({n.mode})"
        if not n.reached:
            lines.append(f"next tier for {goal}: not reached inside the horizon")
        elif n.capacity_blocks == 0:
            lines.append(
                f"next tier for {goal}: none needed, the tiers above reach it "
                f"(block hit rate {percent_cell(n.block_hit_rate)})"
            )
        else:
            n_bytes = view.sizes.bytes(n.capacity_blocks)
            size = f"{n.capacity_blocks:,} blocks" + (
                f" ({gib_cell(n_bytes)})" if n_bytes is not None else ""
            )
            lines.append(
                f"smallest next tier for {goal}: {size}; all tiers then hit "
                f"{percent_cell(n.block_hit_rate)} of blocks, {percent_cell(n.token_hit_rate)} of tokens"
            )
    return lines + engine_text(result)


def metrics(result: Tiers, view: MetricsView) -> Iterable[MetricFamily]:
    plan = result.plan
    if plan is None:
        return
    yield MetricFamily(
        "kvset_tier_hit_rate",
        "gauge",
        f"share of all accesses each cache tier serves ({plan.mode} tiers, all-time curve, blocks)",
        ("tier",),
        tuple(MetricSample((str(t.index),), t.block_hit_rate) for t in plan.tiers),
    )
    yield MetricFamily(
        "kvset_tier_capacity_blocks",
        "gauge",
        "the size of each cache tier",
        ("tier",),
        tuple(MetricSample((str(t.index),), t.capacity_blocks) for t in plan.tiers),
    )


FIGURE: Figure[Tiers] = Figure(
    "tiers",
    Tiers,
    compute,
    ("tier_mode", "tiers", "tier_misses", "next_tier", "engine_tiers"),
    to_json,
    text=text,
    metrics=metrics,
    options=(TIERS, TIER_MODE, NEXT_TIER),
    check=check,
)
