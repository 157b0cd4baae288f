"""The policy gap: how much of LRU's cost is its policy, read off the LRU curve and Belady MIN's.

MIN hits at least what LRU hits at every capacity, so for a target it never needs more capacity
than LRU: `capacity_gap` is what LRU needs minus what MIN needs (and their ratio); at a capacity,
`hit_rate_gap` is MIN's hit rate minus LRU's. A large gap says the policy is the limit (a smarter
eviction would do with less memory); a small one says the capacity is. Every view reads these
values; none computes a gap itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

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
    lru: HitRateCurve, opt: HitRateCurve, targets: Iterable[float], mode: TargetMode
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
    targets: Mapping[TargetMode, Sequence[float]],
    capacity: int | None = None,
    capacity_source: str | None = None,
) -> PolicyGap:
    """The whole gap: targets by mode ({"coverage": (0.95, ...)}), and the capacity to read the hit
    rates at (None: the knee only)."""
    caps = tuple(g for mode, ts in targets.items() for g in capacity_gaps(lru, opt, ts, mode))
    return PolicyGap(caps, hit_rate_gaps(lru, opt, capacity, capacity_source))
