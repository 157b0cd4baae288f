"""The hit-rate curve: hits at every capacity, read off one stack-distance histogram.

An LRU cache of capacity C hits an access iff its stack distance d <= C, so the
cumulative histogram of distances *is* the curve. A curve is known exactly at
its `capacities` (every capacity 1..max for the all-time curve, a log grid for
windowed curves) and only up to the analyzer's horizon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

# the knee's gain and the error bounds' width (kvset.core), read from here by the curve's users
from kvset.core import ERROR_Z as ERROR_Z
from kvset.core import KNEE_MIN_GAIN as KNEE_MIN_GAIN

Unit = Literal["blocks", "tokens"]
TargetMode = Literal["coverage", "absolute"]


def _as_fraction(target: float) -> Fraction:
    # Exact rational targets: 0.7 * 50 must need 35 hits, not 35.000000000000004.
    if not 0.0 < float(target) <= 1.0:
        raise ValueError(f"hit-rate target must lie in (0, 1], got {target!r}")
    return Fraction(str(target)) if isinstance(target, float) else Fraction(target)


# Fewer blocks in a sample than this and its estimate is not meaningful: a handful of blocks decide
# every number, and the spread of the random groups is no measure of the error (at 1e-6 of a 10M-access
# trace the intervals missed the exact value by 5 to 10 standard errors). Such a curve has no interval.
MIN_SAMPLE_BLOCKS = 100


@dataclass(frozen=True)
class SampleInfo:
    """What a sampled analysis kept (kvset.core.sampling): every curve built from it is an estimate."""

    rate: float  # blocks past the request heads are kept at this rate (fixed size: where it has fallen to)
    size: int | None  # fixed size: the most blocks tracked at once; None at a fixed rate
    seed: int  # of the hash that picks the blocks
    tracked_blocks: int  # blocks in the sample now
    tracked_accesses: int  # accesses to sampled blocks so far
    accesses: int  # all accesses seen
    # False: block positions were seen to vary (keys not prefix-chained), so the sample fell back to
    # plain spatial sampling, every position at `rate` (kvset.core.sampling_rates)
    head_boost: bool = True
    # of the re-accesses of blocks kept at every position while the heads were boosted, the share at a
    # position of another rate than the access before (None: none seen, or not watched)
    moved_share: float | None = None

    @property
    def meaningful(self) -> bool:
        """Whether the sample holds enough blocks for an estimate with an interval (MIN_SAMPLE_BLOCKS),
        or is all of them (rate 1: exact, whatever its size)."""
        return self.rate >= 1.0 or self.tracked_blocks >= MIN_SAMPLE_BLOCKS

    @property
    def tracked_share(self) -> float:
        """Share of the accesses the sample looked at (more than `rate`: request heads are boosted)."""
        return self.tracked_accesses / self.accesses if self.accesses else 0.0


@dataclass(frozen=True, eq=False)
class CurveErrors:
    """Standard errors of an estimated curve, one per capacity of the curve: of its hit rate and of
    its coverage (hits(C) / hits(inf), what coverage working sets are read from), in both units."""

    block_hit_rate: np.ndarray
    token_hit_rate: np.ndarray
    block_coverage: np.ndarray
    token_coverage: np.ndarray

    def __post_init__(self) -> None:
        for arr in (self.block_hit_rate, self.token_hit_rate, self.block_coverage, self.token_coverage):
            arr.setflags(write=False)

    def of(self, mode: TargetMode, unit: Unit) -> np.ndarray:
        if mode == "absolute":
            return self.block_hit_rate if unit == "blocks" else self.token_hit_rate
        return self.block_coverage if unit == "blocks" else self.token_coverage


_KNEE_CHUNK = 1 << 16  # capacities a step of the knee's search


@dataclass(frozen=True, eq=False)
class HitRateCurve:
    """Cumulative hits against capacity (in blocks), in block and token units.

    capacities:  strictly increasing capacities (blocks) at which the curve is exact
    block_hits:  accesses with stack distance <= capacities[i]
    token_hits:  tokens of those accesses
    accesses, tokens: totals over the same accesses (hits, misses, beyond horizon)
    horizon:     the analyzer's horizon H; the curve is exact only for C <= H
    exact:       True when the hits are known at every capacity 1..capacities[-1]: capacities is
                 every integer, or every one where the hits change (a step curve, as a principal's)
    """

    capacities: np.ndarray
    block_hits: np.ndarray
    token_hits: np.ndarray
    accesses: int
    tokens: int
    horizon: int
    exact: bool = True
    window_seconds: float | None = None  # None: all time
    # Re-references of blocks already forgotten at the horizon: hits for an infinite cache,
    # misses at every C <= H. They count in the coverage base, so a coverage target that
    # needs them is reported as not reached instead of as a too-small number.
    beyond_horizon_blocks: int = 0
    beyond_horizon_tokens: int = 0
    # A curve estimated from a sample: what was sampled, and the standard errors at each capacity
    # where the sample can give them (None: not known).
    sample: SampleInfo | None = None
    errors: CurveErrors | None = None

    def __post_init__(self) -> None:
        for name in ("capacities", "block_hits", "token_hits"):
            arr = getattr(self, name)
            arr.setflags(write=False)
        if not (len(self.capacities) == len(self.block_hits) == len(self.token_hits)):
            raise ValueError("capacities, block_hits and token_hits must have one length")
        if self.errors is not None and len(self.errors.block_hit_rate) != len(self.capacities):
            raise ValueError("a standard error per capacity, or none")

    @property
    def estimate(self) -> bool:
        """True for a curve estimated from a sample (kvset.core.sampling), False for a measured one."""
        return self.sample is not None

    # -- reading the curve -------------------------------------------------
    def infinite_capacity_hits(self, unit: Unit = "blocks") -> int:
        beyond = self.beyond_horizon_blocks if unit == "blocks" else self.beyond_horizon_tokens
        return self.attainable_hits(unit) + beyond

    def _hits_array(self, unit: Unit) -> np.ndarray:
        if unit == "blocks":
            return self.block_hits
        if unit == "tokens":
            return self.token_hits
        raise ValueError(f"unit must be 'blocks' or 'tokens', got {unit!r}")

    def _total(self, unit: Unit) -> int:
        return self.accesses if unit == "blocks" else self.tokens

    def hits(self, capacity: int, unit: Unit = "blocks") -> int:
        """Hits at `capacity` blocks (for a grid curve: at the largest grid capacity <= it)."""
        capacity = min(int(capacity), self.horizon)
        if capacity <= 0 or len(self.capacities) == 0:
            return 0
        i = int(np.searchsorted(self.capacities, capacity, side="right")) - 1
        return 0 if i < 0 else int(self._hits_array(unit)[i])

    def hit_rate(self, capacity: int, unit: Unit = "blocks") -> float:
        total = self._total(unit)
        return self.hits(capacity, unit) / total if total else 0.0

    def attainable_hits(self, unit: Unit = "blocks") -> int:
        arr = self._hits_array(unit)
        return int(arr[-1]) if len(arr) else 0

    def attainable(self, unit: Unit = "blocks") -> float:
        """The infinite-capacity hit rate inside the horizon."""
        total = self._total(unit)
        return self.attainable_hits(unit) / total if total else 0.0

    def infinite_capacity_hit_rate(self, unit: Unit = "blocks") -> float:
        """An unbounded cache's hit rate: the re-references beyond the horizon hit too (the coverage base)."""
        total = self._total(unit)
        return self.infinite_capacity_hits(unit) / total if total else 0.0

    def hit_rates(self, capacities: npt.ArrayLike, unit: Unit = "blocks") -> np.ndarray:
        caps = np.minimum(np.asarray(capacities, dtype=np.int64), self.horizon)
        total = self._total(unit)
        if total == 0 or len(self.capacities) == 0:
            return np.zeros(len(caps))
        idx = np.searchsorted(self.capacities, caps, side="right") - 1
        hits = np.where(idx >= 0, self._hits_array(unit)[np.maximum(idx, 0)], 0)
        hits = np.where(caps > 0, hits, 0)
        return hits / total

    def hit_rate_stderrs(self, capacities: npt.ArrayLike, unit: Unit = "blocks") -> np.ndarray | None:
        """Standard error of hit_rates(capacities) (an estimate's); None where the curve has none."""
        self._hits_array(unit)  # checks the unit
        if self.errors is None:
            return None
        err = self.errors.of("absolute", unit)
        caps = np.minimum(np.asarray(capacities, dtype=np.int64), self.horizon)
        idx = np.searchsorted(self.capacities, caps, side="right") - 1
        return (
            np.where((idx >= 0) & (caps > 0), err[np.maximum(idx, 0)], 0.0)
            if len(err)
            else np.zeros(len(caps))
        )

    def required_hits(self, target: float, mode: TargetMode = "coverage", unit: Unit = "blocks") -> int:
        """The number of hits a capacity must reach for `target`."""
        t = _as_fraction(target)
        if mode == "coverage":
            base = self.infinite_capacity_hits(unit)
        elif mode == "absolute":
            base = self._total(unit)
        else:
            raise ValueError(f"target mode must be 'coverage' or 'absolute', got {mode!r}")
        return math.ceil(t * base)

    def working_set(self, target: float, mode: TargetMode = "coverage", unit: Unit = "blocks") -> int | None:
        """Smallest capacity (blocks) reaching `target`, or None where it is not reached inside the horizon.

        coverage: hits(C) >= ceil(target * hits(inf)); absolute: hit_rate(C) >= target.
        hits(inf) is the infinite-cache hit count: hits inside the horizon plus re-references
        beyond it.
        For a grid curve the answer is the smallest grid capacity that reaches it (an upper bound).
        """
        need = self.required_hits(target, mode, unit)
        if self._total(unit) == 0:
            return None
        if need <= 0:
            return 0
        arr = self._hits_array(unit)
        i = int(np.searchsorted(arr, need, side="left"))
        if i >= len(arr):
            return None
        return int(self.capacities[i])

    def knee(self, unit: Unit = "blocks", min_gain: float = KNEE_MIN_GAIN) -> int | None:
        """Where the returns die: the smallest capacity C such that, for every capacity C' >= C,
        doubling C' gains less than `min_gain` of hit rate (hit_rate(2C') - hit_rate(C') < min_gain).

        The flat start of a curve does not count (the condition holds past C, not just at it), and
        one knee is read the same way from every curve. None when no doubling gains `min_gain`
        (a flat curve), or when the knee would lie beyond the horizon: past H the hits are not
        known, so a doubling that ends there is counted with every re-reference beyond the horizon
        as a hit (an upper bound), which moves the knee out rather than in. For a windowed curve
        it is read on the curve's grid (its hits between grid points are lower bounds).
        See docs/method.md.
        """
        total = self._total(unit)
        if total == 0 or len(self.capacities) == 0 or not 0 < min_gain <= 1:
            return None
        caps = self.capacities.astype(np.int64, copy=False)
        hits = self._hits_array(unit).astype(np.int64, copy=False)
        top = int(caps[-1])
        dense = self.exact and top == len(caps)  # every capacity 1..top: index straight in
        # in whole hits, exactly: a gain of exactly min_gain counts as steep, whatever floats would say
        need = math.ceil(_as_fraction(min_gain) * total)
        # the last steep capacity, looked for from the top a chunk at a time: a curve millions of
        # capacities long needs no temporaries as long (fresh pages, faulted in: 0.2 s a knee)
        for hi in range(len(caps), 0, -_KNEE_CHUNK):
            lo = max(0, hi - _KNEE_CHUNK)
            doubled_caps = 2 * caps[lo:hi]
            if dense:
                doubled = hits[np.minimum(doubled_caps, top) - 1]
            else:
                idx = np.searchsorted(caps, np.minimum(doubled_caps, self.horizon), side="right") - 1
                doubled = hits[np.maximum(idx, 0)]
            # Past the horizon only the infinite-cache hits bound what a doubling could reach.
            if int(doubled_caps[-1]) > self.horizon:
                doubled = np.where(doubled_caps <= self.horizon, doubled, self.infinite_capacity_hits(unit))
            steep = np.flatnonzero(doubled - hits[lo:hi] >= need)
            if len(steep):
                after = lo + int(steep[-1]) + 1
                if after >= len(caps):
                    return None  # beyond the largest known capacity: beyond the horizon
                return int(caps[after])
        return None

    def max_distance(self) -> int:
        return int(self.capacities[-1]) if len(self.capacities) else 0

    def miss_share_between(self, low: int, high: int, unit: Unit = "blocks") -> float:
        """Share of the misses at capacity `low` whose distance lies in (low, high]: near misses."""
        total = self._total(unit)
        misses = total - self.hits(low, unit)
        if misses <= 0:
            return 0.0
        return (self.hits(high, unit) - self.hits(low, unit)) / misses

    def log_capacities(self, n: int = 20, low: int = 1) -> np.ndarray:
        """n log-spaced capacities from `low` to the largest useful one (distinct integers)."""
        top = max(low, min(self.horizon, self.max_distance() or low))
        caps = np.unique(np.round(np.geomspace(max(low, 1), top, n)).astype(np.int64))
        return caps
