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

from collections.abc import Mapping

from kvset.core.curve import HitRateCurve
from kvset.snapshot.model import Pooling

UNITS = ("blocks", "tokens")


def rank_pools(ranks: int, engine_pool: int | None, chosen: int | None) -> tuple[int | None, str]:
    """(each rank's pool in blocks, where it comes from): the engine's pool split evenly, else --capacity,
    else (None, "none"). The engine's pool wins, as it does for the thrashing figures."""
    if engine_pool and ranks:
        return int(engine_pool) // ranks, "engine"
    if chosen:
        return int(chosen), "chosen"
    return None, "none"


def pooling(merged: HitRateCurve, ranks: Mapping[int, HitRateCurve], pools: Mapping[int, int],
            source: str, curve_scope: str) -> Pooling:  # fmt: skip
    """The pooling figures of `ranks` (each rank's all-time curve) at their `pools` against the merged
    stream's curve at their sum. Every access of `merged` must be one of some rank (the caller checks)."""
    shared_at = sum(pools.values())
    shared, separate = {}, {}
    for unit in UNITS:
        total = merged.accesses if unit == "blocks" else merged.tokens
        shared[unit] = merged.hit_rate(shared_at, unit)  # type: ignore[arg-type]
        hits = sum(curve.hits(pools[rank], unit) for rank, curve in ranks.items())  # type: ignore[arg-type]
        separate[unit] = hits / total if total else 0.0
    return Pooling(
        ranks=len(ranks),
        rank_capacity_blocks=dict(pools),
        capacity_source=source,
        shared_hit_rate=shared,
        separate_hit_rate=separate,
        curve_scope=curve_scope,
    )
