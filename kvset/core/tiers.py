"""Cache tiers (HBM, then host DRAM, then SSD) read off one LRU hit-rate curve.

With H(C) the accesses at stack distance <= C:

- exclusive tiers hold each block in one tier only: a block evicted from tier k moves down to tier
  k+1, a hit in a lower tier moves the block back to the top, and the whole is one LRU stack cut into
  consecutive pieces. Tier k serves the distances in (C1+...+Ck-1, C1+...+Ck].
- inclusive tiers each hold a copy of everything above them and see every access (write-through:
  each tier is its own LRU of its own size). Tier k holds the Ck most recent blocks and serves the
  distances in (Ck-1, Ck]; its size must be at least the size of the tier above it.

Every share is of ALL accesses (and tokens), so the tiers' shares and the miss share add up to 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvset.core.curve import HitRateCurve, TargetMode

TIER_MODES = ("exclusive", "inclusive")


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


def tier_blocks(sizes: Sequence[int], unit: str, bytes_per_block: int | None) -> tuple[int, ...] | None:
    """Tier sizes in blocks: as given (unit "blocks"), or whole blocks of `bytes_per_block` that fit in
    each size in bytes (a tier smaller than one block holds 0). None while the bytes per block are not
    known yet (a live stream whose block size has not been seen)."""
    if unit == "blocks":
        return tuple(int(s) for s in sizes)
    if unit != "bytes":
        raise ValueError(f"tier sizes are in blocks or bytes, got {unit!r}")
    if not bytes_per_block:
        return None
    return tuple(int(s) // int(bytes_per_block) for s in sizes)
