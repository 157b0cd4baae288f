"""A sampled analyzer's tallies read as a HitRateCurve: each position band's histogram scaled to the
band's exact access count (post-stratification), and the standard errors of the result.

The error bound: the sampled blocks fall into 8 random groups by their hash. A band's hit rate at
a capacity is a ratio over sampled blocks; the spread of its residuals over the groups gives its
standard error (clustered by block, with the finite-population factor 1 - rate: a band kept whole
adds none), and the bands combine with their exact access shares. It covers which blocks the sample
holds, not the error of the estimated distances (benchmarks/sampling.py measures how often the true
curve lies inside it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core import sampling_kernel as SK
from kvset.core.curve import ERROR_Z, CurveErrors, HitRateCurve, SampleInfo, TargetMode, Unit, _as_fraction
from kvset.core.log_grid import FINE_GRID
from kvset.core.sampling_rates import COUNT_BANDS


def band_factors(exact: np.ndarray, sampled: np.ndarray, by_count: bool = False) -> np.ndarray:
    """Per band, true accesses per weighted sampled one. A band with accesses but no sample gets the
    pooled factor of the others (the rest stands in for it). by_count: the bands go by access count
    (kvset.core.sampling_rates), so count bands 1 on hold re-accesses alone: an empty one (the hot
    blocks all out of the sample) is stood in for by the other re-access bands, not by the first
    accesses of band 0 too (which that pooled factor overstated, by 11 % on a 200k-access trace)."""
    factor = np.divide(exact, sampled, out=np.zeros(len(exact)), where=sampled > 0)
    bare = (sampled <= 0) & (exact > 0)
    if by_count:
        again = np.zeros(len(exact), dtype=bool)
        again[1:COUNT_BANDS] = True
        seen = again & ~bare & (exact > 0)
        if bare[again].any() and seen.any():
            factor[seen] *= exact[again].sum() / exact[seen].sum()
            bare &= ~again
    covered = exact[~bare].sum()
    if bare.any() and covered > 0:
        factor *= exact.sum() / covered
    factors: np.ndarray = factor
    return factors


def post_stratified_curve(
    hist: np.ndarray,
    ghist: np.ndarray,
    token_scale: int | None,
    sampled: np.ndarray,
    band_counts: np.ndarray,
    rates: np.ndarray,
    capacities: np.ndarray,
    grid: np.ndarray,
    horizon: int,
    max_distance: int,
    info: SampleInfo,
) -> HitRateCurve:
    """The all-time estimate: each band's histogram scaled to its exact access count, summed, with the
    standard errors at every capacity from the spread over the random groups. hist[unit, band, fine
    bucket] and ghist[unit, group, band, grid bucket]; token_scale: None, or the tokens of every access
    (the tokens planes are then the blocks planes times it). max_distance: the largest distance in
    hist, so its last bucket in use (0: none; a search of hist took 0.5 ms)."""
    used = FINE_GRID.bucket(max_distance) + 1 if max_distance > 0 else 0
    # capacities may repeat the horizon at the top; keep the first of equal ones
    caps = capacities[:used]
    keep = np.concatenate([[True], np.diff(caps) > 0]) if used else np.zeros(0, dtype=bool)
    on_grid = np.maximum(np.searchsorted(grid, caps, side="right") - 1, 0)[keep]  # the grid point at or below
    hits, beyond, errors = {}, {}, {}
    cums: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per plane: the fine and the grouped cumulative sums
    for u, unit in enumerate(("blocks", "tokens")):
        n_g = sampled[:, :, SK.T_ACCESSES, u]  # [group, band]
        factor = band_factors(band_counts[:, u].astype(np.float64), n_g.sum(axis=0), not info.head_boost)
        plane, scale = (u, 1) if token_scale is None else (0, 1 if u == 0 else token_scale)
        if plane not in cums:
            cums[plane] = (np.cumsum(hist[plane, :, :used], axis=1), np.cumsum(ghist[plane], axis=2))
        cum, cum_g = cums[plane]  # cum_g: [group, band, grid capacity]
        hits[unit] = np.round(factor @ (cum * scale if scale != 1 else cum))[keep].astype(np.int64)
        beyond_g = sampled[:, :, SK.T_BEYOND, u]
        beyond[unit] = round(float(factor @ beyond_g.sum(axis=0)))
        if scale != 1:
            cum_g = cum_g * scale
        inf_g = cum_g[:, :, -1] + beyond_g  # hits of an infinite cache
        errors[unit] = (
            _ratio_stderr(cum_g, n_g, n_g, factor, rates)[on_grid],
            _ratio_stderr(cum_g, inf_g, n_g, factor, rates)[on_grid],
        )
    return HitRateCurve(
        capacities=caps[keep].copy(),
        block_hits=hits["blocks"],
        token_hits=hits["tokens"],
        accesses=int(band_counts[:, 0].sum()),
        tokens=int(band_counts[:, 1].sum()),
        horizon=horizon,
        exact=False,
        window_seconds=None,
        beyond_horizon_blocks=beyond["blocks"],
        beyond_horizon_tokens=beyond["tokens"],
        sample=info,
        errors=CurveErrors(
            block_hit_rate=errors["blocks"][0],
            token_hit_rate=errors["tokens"][0],
            block_coverage=errors["blocks"][1],
            token_coverage=errors["tokens"][1],
        )
        if info.meaningful
        else None,  # too few blocks for the groups' spread to measure anything: no interval
    )


def _ratio_stderr(
    a: np.ndarray, c: np.ndarray, n: np.ndarray, factor: np.ndarray, rates: np.ndarray
) -> np.ndarray:
    """Standard error of R(C) = sum_b F_b a_b(C) / sum_b F_b c_b, by random groups, linearized.

    a[group, band, capacity] and c[group, band]: weighted sampled sums (hits at C; accesses for a hit
    rate, infinite-cache hits for a coverage); n[group, band]: weighted sampled accesses, which the
    post-stratification factors F_b = N_b / n_b come from. A group's residual in band b,
        F_b [(a_gb - R c_gb) - (a_b - R c_b) n_gb / n_b],
    sums to 0 over the groups; their spread estimates the variance of the band's contribution, with
    the finite-population factor 1 - r_b (a band kept whole adds none):
        Var R ~ sum_b (1 - r_b) G / (G - 1) sum_g residual^2 / (sum_b F_b c_b)^2.
    Compiled: in numpy its temporaries took most of a curve's time (2 of 3.5 ms on the benchmark)."""
    return _ratio_stderr_kernel(
        np.ascontiguousarray(a, dtype=np.float64),
        np.ascontiguousarray(c, dtype=np.float64),
        np.ascontiguousarray(n, dtype=np.float64),
        np.asarray(factor, dtype=np.float64),
        np.asarray(rates, dtype=np.float64),
    )


@njit(nogil=True, cache=True)
def _ratio_stderr_kernel(
    a: np.ndarray, c: np.ndarray, n: np.ndarray, factor: np.ndarray, rates: np.ndarray
) -> np.ndarray:
    groups, bands, caps = a.shape
    out = np.zeros(caps)
    a_b = np.zeros((bands, caps))
    c_b = np.zeros(bands)
    n_b = np.zeros(bands)
    for g in range(groups):
        for b in range(bands):
            c_b[b] += c[g, b]
            n_b[b] += n[g, b]
            for q in range(caps):
                a_b[b, q] += a[g, b, q]
    denominator = 0.0
    for b in range(bands):
        denominator += factor[b] * c_b[b]
    if denominator <= 0:
        return out
    ratio = np.zeros(caps)
    for b in range(bands):
        for q in range(caps):
            ratio[q] += factor[b] * a_b[b, q]
    ratio /= denominator
    for b in range(bands):
        weight = (1.0 - rates[b]) * factor[b] ** 2
        for g in range(groups):
            share = n[g, b] / n_b[b] if n_b[b] > 0 else 0.0
            for q in range(caps):
                r = a[g, b, q] - ratio[q] * c[g, b] - (a_b[b, q] - ratio[q] * c_b[b]) * share
                out[q] += weight * r * r
    stderr: np.ndarray = np.sqrt(out * groups / (groups - 1)) / denominator
    return stderr


def working_set_bounds(
    curve: HitRateCurve,
    target: float,
    mode: TargetMode = "coverage",
    unit: Unit = "blocks",
    z: float = ERROR_Z,
) -> tuple[int | None, int | None]:
    """For an estimated curve: the smallest capacities at which the hit rate (absolute targets) or the
    coverage (coverage targets) z standard errors above and below the estimate reaches `target`
    (low, high; None where not reached). (ws, ws) for a measured curve."""
    if curve.errors is None or not len(curve.capacities):
        ws = curve.working_set(target, mode, unit)
        return ws, ws
    hits = (curve.block_hits if unit == "blocks" else curve.token_hits).astype(np.float64)
    if mode == "coverage":
        base = curve.infinite_capacity_hits(unit)
    else:
        base = curve.accesses if unit == "blocks" else curve.tokens
    if base <= 0:
        return None, None
    level = hits / base
    err = curve.errors.of(mode, unit)
    bounds = []
    for sign in (1.0, -1.0):
        shifted = np.maximum.accumulate(level + sign * z * err)
        i = int(np.searchsorted(shifted, float(_as_fraction(target)), side="left"))
        bounds.append(int(curve.capacities[i]) if i < len(shifted) else None)
    return bounds[0], bounds[1]


class EstimatedCounts:
    """A sampled analysis's counts: accesses and tokens exact, the others estimated from its
    post-stratified tallies (`_estimated`); the sampled analyzer's, and its partitions' merged
    (kvset.core.partial_sample)."""

    band_counts: np.ndarray  # every access, counted exactly: (accesses, tokens) per position band

    @property
    def accesses(self) -> int:
        return int(self.band_counts[:, 0].sum())

    @property
    def tokens(self) -> int:
        return int(self.band_counts[:, 1].sum())

    def _estimated(self, kind: int) -> int:
        raise NotImplementedError

    @property
    def first_time(self) -> int:
        """Estimated distinct blocks."""
        return self._estimated(SK.T_FIRST_TIME)

    @property
    def beyond_horizon(self) -> int:
        return self._estimated(SK.T_BEYOND)

    @property
    def misses_split_exact(self) -> bool:
        """The sample forgets no block: its split of the misses is as good as its estimate."""
        return True

    @property
    def forgotten_blocks(self) -> int:
        """The sample forgets no block; re-references estimated beyond the horizon stand for them."""
        return self.beyond_horizon

    @property
    def rereferences(self) -> int:
        return max(0, self.accesses - self.first_time - self.beyond_horizon)


def estimated_count(band_counts: np.ndarray, sampled: np.ndarray, kind: int, by_count: bool = False) -> int:
    """Post-stratified estimate of all accesses of a kind (first time, beyond the horizon); by_count:
    bands by access count (band_factors)."""
    factor = band_factors(band_counts[:, 0], sampled[:, :, SK.T_ACCESSES, 0].sum(axis=0), by_count)
    return round(float((factor * sampled[:, :, kind, 0].sum(axis=0)).sum()))
