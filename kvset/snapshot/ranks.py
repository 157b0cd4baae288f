"""Data-parallel ranks: each rank's own cache beside one shared pool of the same total size.

An engine with several data-parallel ranks gives each rank its own KV cache; every rank sees only
the requests routed to it. The merged stream of all ranks is what one shared pool (a Mooncake store,
an LMCache server) would see. The pooling gain compares the two at the same total capacity:

    shared   = H_merged(c_1 + ... + c_N) / A
    separate = (H_1(c_1) + ... + H_N(c_N)) / A
    gain     = shared - separate

with H_r(c) the hits of rank r's own LRU curve at c blocks, c_r each rank's pool and A all accesses
(the same in both, as every access of the merged stream is some rank's). Each rank's curve is the
all-time exact one; windows are kept for the merged stream only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from kvset.core.curve import HitRateCurve, Unit
from kvset.snapshot.model import Pooling

UNITS: tuple[Unit, ...] = ("blocks", "tokens")


def rank_pools(
    ranks: Sequence[int], engine_ranks: Mapping[int, int] | None, engine_pool: int | None, chosen: int | None
) -> tuple[dict[int, int] | None, str]:
    """(each rank's pool in blocks, where it comes from): the engine's own pool of each rank where it
    says them (EngineReading.rank_pool_blocks), else its one pool split evenly, else --capacity, else
    (None, "none"). The engine's pools win, as they do for the thrashing figures."""
    if engine_ranks:
        return {r: int(engine_ranks[r]) for r in ranks}, "engine-ranks"
    if engine_pool and ranks:
        return dict.fromkeys(ranks, int(engine_pool) // len(ranks)), "engine"
    if chosen:
        return dict.fromkeys(ranks, int(chosen)), "chosen"
    return None, "none"


class RankSplit(NamedTuple):
    """The engine as its ranks run it: how many, their mean pool, the curve of one LRU per rank (at a
    capacity x each rank has its own pool scaled by x / the mean pool), and each rank's own pool."""

    ranks: int
    pool_blocks: int
    curve: HitRateCurve  # separate_pools() of the ranks' curves
    pools: Mapping[int, int]


def mean_pool(pools: Mapping[int, int]) -> int:
    return sum(pools.values()) // len(pools)


def separate_pools(curves: Sequence[HitRateCurve], pools: Sequence[int] | None = None) -> HitRateCurve:
    """The curve of one LRU per rank: at capacity x, rank r holds x * pool_r / mean pool blocks (every
    rank x itself when the pools are equal, or not given): hits(x) = H_1(x c_1 / m) + ... + H_N(x c_N / m).

    At x = the mean pool it is what the engine's ranks do with their own pools, where the merged
    stream's curve is what one shared pool does. Exact all-time curves with equal pools give an exact
    curve (every capacity up to the largest rank's)."""
    if pools is None or len(set(pools)) == 1:
        pools = [1] * len(curves)  # every rank at x itself
    m = sum(pools) // len(pools)
    if all(c.exact for c in curves):  # capacities 1..n, n where the largest rank's curve ends
        n = max(-(-len(c.capacities) * m // p) for c, p in zip(curves, pools, strict=True))
        capacities = np.arange(1, max(n, 1) + 1, dtype=np.int64)
    else:
        scaled = [c.capacities * m // p for c, p in zip(curves, pools, strict=True)]
        capacities = np.unique(np.concatenate(scaled))
        capacities = capacities[capacities >= 1]
    own = [capacities * p // m for p in pools]  # each rank's own capacity at x (its pool at x = m)
    block_hits, token_hits = (
        sum(_hits_at(c, caps, unit) for c, caps in zip(curves, own, strict=True))
        for unit in ("blocks", "tokens")
    )
    return HitRateCurve(
        capacities=capacities,
        block_hits=block_hits,  # type: ignore[arg-type]  # a sum of arrays: there is always a curve
        token_hits=token_hits,  # type: ignore[arg-type]  # the same
        accesses=sum(c.accesses for c in curves),
        tokens=sum(c.tokens for c in curves),
        horizon=min(c.horizon for c in curves),
        exact=all(c.exact for c in curves),
        beyond_horizon_blocks=sum(c.beyond_horizon_blocks for c in curves),
        beyond_horizon_tokens=sum(c.beyond_horizon_tokens for c in curves),
        sample=curves[0].sample,
    )


def _hits_at(curve: HitRateCurve, capacities: np.ndarray, unit: str) -> np.ndarray:
    """curve.hits() at every one of `capacities` at once."""
    arr = curve.block_hits if unit == "blocks" else curve.token_hits
    i = np.searchsorted(curve.capacities, np.minimum(capacities, curve.horizon), side="right") - 1
    return np.where(i >= 0, arr[np.maximum(i, 0)] if len(arr) else 0, 0).astype(np.int64)


def pooling(
    merged: HitRateCurve,
    ranks: Mapping[int, HitRateCurve],
    pools: Mapping[int, int],
    source: str,
    curve_scope: str,
) -> Pooling:
    """The pooling figures of `ranks` (each rank's all-time curve) at their `pools` against the merged
    stream's curve at their sum. Every access of `merged` must be one of some rank (the caller checks)."""
    shared_at = sum(pools.values())
    shared, separate = {}, {}
    for unit in UNITS:
        total = merged.accesses if unit == "blocks" else merged.tokens
        shared[unit] = merged.hit_rate(shared_at, unit)
        hits = sum(curve.hits(pools[rank], unit) for rank, curve in ranks.items())
        separate[unit] = hits / total if total else 0.0
    return Pooling(
        ranks=len(ranks),
        rank_capacity_blocks=dict(pools),
        capacity_source=source,
        shared_hit_rate=shared,
        separate_hit_rate=separate,
        curve_scope=curve_scope,
    )
