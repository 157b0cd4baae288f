"""Data-parallel ranks: each rank's own cache beside one shared pool of the same total size.

An engine with several data-parallel ranks gives each rank its own KV cache; every rank sees only
the requests routed to it. The merged stream of all ranks is what one shared pool (a Mooncake store,
an LMCache server) would see. The pooling gain compares the two at the same total capacity:

    shared   = H_merged(c_1 + ... + c_N) / A
    separate = (H_1(c_1) + ... + H_N(c_N)) / A
    gain     = shared - separate

with H_r(c) the hits of rank r's own LRU curve at c blocks, c_r each rank's pool and A all accesses
(the same in both, as every access of the merged stream is some rank's). Each rank's curve is the
all-time exact one; windows are kept for the merged stream only. Each rank's pool is the engine's pool
split evenly, else --capacity; the thrashing and operating-point figures read the ranks' own pools
from here (`Ranks.split`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from kvset.figures import curve as curve_figure
from kvset.figures import working_sets
from kvset.figures.base import (
    Json,
    MetricFamily,
    MetricSample,
    MetricsView,
    OptionValues,
    Sizes,
    TextView,
    gauge,
)
from kvset.figures.inputs import CAPACITY, MISSES_ONLY, Figure, FigureInputs, target_mode
from kvset.figures.tables import NOT_KNOWN, format_table, percent_cell
from kvset.figures.working_sets import WorkingSetRow, target_value, working_set_row
from kvset.quantities import points, target_label

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    import numpy as np

    from kvset.core.curve import HitRateCurve, Unit

UNITS: tuple[Unit, ...] = ("blocks", "tokens")

# Where each data-parallel rank's pool comes from: the engine's own pool of each rank where it says
# them, else its pool (summed over its ranks, as its /metrics reports it) split evenly, or --capacity
# given as each rank's pool.
RANK_POOL_SOURCES = {
    "engine-ranks": "the engine's own pool of each rank",
    "engine": "the engine's pool split evenly over the ranks",
    "chosen": "--capacity, each rank's pool",
}


@dataclass(frozen=True, eq=False)
class RankView:
    """One rank's own cache: its all-time curve and working sets, and its pool."""

    rank: int
    window: curve_figure.WindowCurve  # all time, exact at every capacity (its knee read when asked for)
    working_sets: tuple[WorkingSetRow, ...]  # all time ("all" window), both target modes
    distinct_blocks: int
    pool_blocks: int | None  # the rank's own pool (None: not known)
    pool_source: str = "none"  # a key of RANK_POOL_SOURCES, or "none"

    @property
    def curve(self) -> HitRateCurve:
        return self.window.curve

    @property
    def accesses(self) -> int:
        return self.curve.accesses

    def working_set_rows(self, mode: str = "coverage") -> tuple[WorkingSetRow, ...]:
        return tuple(r for r in self.working_sets if r.mode == mode)


@dataclass(frozen=True)
class Pooling:
    """One shared pool against each rank's own, at the same total capacity (the module docstring)."""

    ranks: int
    rank_capacity_blocks: dict[int, int]  # each rank's own pool
    capacity_source: str  # a key of RANK_POOL_SOURCES
    shared_hit_rate: dict[str, float]  # by unit: the merged stream at the sum of the pools
    separate_hit_rate: dict[str, float]  # by unit: every rank at its own pool, over all accesses
    curve_scope: str  # what the curves are of (ALL_ACCESSES, RECONSTRUCTED or MISSES_ONLY)

    @property
    def capacity_blocks(self) -> int:
        """The shared pool: the ranks' pools added up."""
        return sum(self.rank_capacity_blocks.values())

    def gain(self, unit: str = "blocks") -> float:
        """Shared minus separate, in hit-rate units (0..1)."""
        return self.shared_hit_rate[unit] - self.separate_hit_rate[unit]


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
    import numpy as np

    from kvset.core.curve import HitRateCurve

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
        _summed(_hits_at(c, caps, unit) for c, caps in zip(curves, own, strict=True))
        for unit in ("blocks", "tokens")
    )
    return HitRateCurve(
        capacities=capacities,
        block_hits=block_hits,
        token_hits=token_hits,
        accesses=sum(c.accesses for c in curves),
        tokens=sum(c.tokens for c in curves),
        horizon=min(c.horizon for c in curves),
        exact=all(c.exact for c in curves),
        beyond_horizon_blocks=sum(c.beyond_horizon_blocks for c in curves),
        beyond_horizon_tokens=sum(c.beyond_horizon_tokens for c in curves),
        sample=curves[0].sample,
    )


def _summed(arrays: Iterable[np.ndarray]) -> np.ndarray:
    """The sum of arrays of one length, as int64."""
    import numpy as np

    total: np.ndarray | None = None
    for a in arrays:
        total = a.astype(np.int64) if total is None else total + a
    return total if total is not None else np.zeros(0, dtype=np.int64)


def _hits_at(curve: HitRateCurve, capacities: np.ndarray, unit: str) -> np.ndarray:
    """curve.hits() at every one of `capacities` at once."""
    import numpy as np

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
    shared: dict[str, float] = {}
    separate: dict[str, float] = {}
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


@dataclass(frozen=True, eq=False)
class Ranks:
    """Each rank's own view; the pooling figures, or why there are none (`note`); and the engine as its
    ranks run it (`split`: None unless every access is some rank's and the ranks' pools are known)."""

    views: tuple[RankView, ...]
    pooling: Pooling | None
    note: str | None
    split: RankSplit | None
    merged_accesses: int = 0  # of the merged stream, which may hold accesses of no rank
    capacities: tuple[int, ...] = ()  # the merged curve's report rows: every rank's curve is read there

    def view(self, rank: int | None) -> RankView | None:
        """The view of one rank (None: the merged stream, or a rank this snapshot does not hold)."""
        return next((v for v in self.views if v.rank == rank), None) if rank is not None else None


NO_POOL = "no rank pool to compare at: give --capacity BLOCKS (each rank's pool) or --metrics of the engine"


def compute(inputs: FigureInputs, options: OptionValues) -> Ranks | None:
    """Views need two or more ranks."""
    if len(inputs.ranks) < 2:
        return None
    order = sorted(inputs.ranks)
    engine_ranks = (
        inputs.engine.rank_pool_blocks(inputs.units, order)
        if inputs.engine is not None and inputs.units is not None
        else None
    )
    pools, source = rank_pools(order, engine_ranks, inputs.engine_pool, options.get(CAPACITY))
    views, curves = [], {}
    for rank in order:
        stream = inputs.ranks[rank]
        curve = curves[rank] = stream.curve
        own = pools[rank] if pools is not None else None
        rows = tuple(
            working_set_row(curve, "all", t, target_mode(mode), inputs.sizes, own)
            for mode, targets in inputs.targets.by_mode.items()
            for t in targets
        )
        window = curve_figure.WindowCurve("all", curve)
        views.append(RankView(rank, window, rows, stream.distinct_blocks, own, source))
    merged = inputs.curves["all"]
    merged_rows = inputs.result(curve_figure.FIGURE)
    caps = tuple(merged_rows.window("all").capacities) if merged_rows is not None else ()
    unranked = merged.accesses - sum(c.accesses for c in curves.values())
    if unranked:
        note = (
            f"{unranked:,} accesses of the merged stream belong to no rank (another source): the shared "
            "pool would see them too, so there is no like-for-like pooling figure"
        )
        return Ranks(tuple(views), None, note, None, merged.accesses, caps)
    if pools is None:
        return Ranks(tuple(views), None, NO_POOL, None, merged.accesses, caps)
    split = RankSplit(
        len(curves),
        mean_pool(pools),
        separate_pools(list(curves.values()), [pools[r] for r in curves]),
        pools,
    )
    gain = pooling(merged, curves, pools, source, inputs.curve_scope)
    return Ranks(tuple(views), gain, None, split, merged.accesses, caps)


def pooling_how(p: Pooling) -> str:
    """How the pooling figures were computed, in one sentence."""
    caps = sorted(set(p.rank_capacity_blocks.values()))
    each = f"{caps[0]:,} blocks each" if len(caps) == 1 else "their own pools"
    scope = (
        " The curves are of the ranks' misses (their KV events report no hits): this is a shared tier "
        "behind the ranks' own caches."
        if p.curve_scope == MISSES_ONLY
        else ""
    )
    return (
        f"shared: the merged stream of all {p.ranks} ranks on one LRU pool of {p.capacity_blocks:,} blocks "
        f"(the sum of the ranks' pools); separate: each rank on its own LRU pool ({each}: "
        f"{RANK_POOL_SOURCES[p.capacity_source]}), its hits added up over all accesses; gain = shared - "
        f"separate.{scope}"
    )


def pooling_json(result: Ranks, sizes: Sizes) -> Json:
    p = result.pooling
    if p is None:
        return {"computed": False, "reason": result.note}
    return {
        "computed": True,
        "ranks": p.ranks,
        "capacity_source": p.capacity_source,
        "rank_capacity_blocks": {str(rank): blocks for rank, blocks in p.rank_capacity_blocks.items()},
        "capacity_blocks": p.capacity_blocks,
        "capacity_tokens": sizes.tokens(p.capacity_blocks),
        "shared_block_hit_rate": p.shared_hit_rate["blocks"],
        "separate_block_hit_rate": p.separate_hit_rate["blocks"],
        "block_gain": p.gain("blocks"),
        "shared_token_hit_rate": p.shared_hit_rate["tokens"],
        "separate_token_hit_rate": p.separate_hit_rate["tokens"],
        "token_gain": p.gain("tokens"),
        "curve_scope": p.curve_scope,
        "how": pooling_how(p),
    }


def to_json(result: Ranks, sizes: Sizes) -> Json:
    """`ranks` (each rank's own all-time curve, working sets and pool) and `pooling`. Every rank's curve is
    read at the merged curve's report capacities, so the rows line up."""
    total = result.merged_accesses
    caps = result.capacities
    ranks = []
    for v in result.views:
        c = v.curve
        pool = None
        if v.pool_blocks is not None:
            pool = {
                "capacity_blocks": v.pool_blocks,
                "capacity_tokens": sizes.tokens(v.pool_blocks),
                "source": v.pool_source,
                "block_hit_rate": c.hit_rate(v.pool_blocks, "blocks"),
                "token_hit_rate": c.hit_rate(v.pool_blocks, "tokens"),
            }
        ranks.append(
            {
                "rank": v.rank,
                "accesses": v.accesses,
                "tokens": c.tokens,
                "share_of_accesses": v.accesses / total if total else None,
                "distinct_blocks": v.distinct_blocks,
                "attainable_hit_rate": c.attainable("blocks"),
                "attainable_token_hit_rate": c.attainable("tokens"),
                "pool": pool,
                "curve": [curve_figure.row_json(r, sizes) for r in curve_figure.curve_rows(c, caps)]
                if c.accesses
                else [],
                "working_sets": [working_sets.row_json(r, sizes) for r in v.working_sets],
            }
        )
    return {"ranks": ranks, "pooling": pooling_json(result, sizes)}


def rank_lines(report: Json, mode: str) -> list[str]:
    """The text of the keys ranks_json made: one row per rank (its working sets for `mode`), then the
    pooling gain."""
    ranks = report["ranks"]
    targets = [w["target"] for w in ranks[0]["working_sets"] if w["mode"] == mode]
    headers = (
        ["rank", "accesses", "share", "attainable"]
        + [target_label(t) for t in targets]
        + ["pool", "hit at pool"]
    )
    cells = []
    for r in ranks:
        ws = {w["target"]: w["capacity_blocks"] for w in r["working_sets"] if w["mode"] == mode}
        pool = r["pool"]
        cells.append(
            [
                str(r["rank"]),
                f"{r['accesses']:,}",
                percent_cell(r["share_of_accesses"], 1),
                percent_cell(r["attainable_hit_rate"]),
            ]
            + ["not reached" if ws[t] is None else f"{ws[t]:,}" for t in targets]
            + (
                [f"{pool['capacity_blocks']:,}", percent_cell(pool["block_hit_rate"])]
                if pool
                else [NOT_KNOWN, NOT_KNOWN]
            )
        )
    lines = [
        f"ranks (data-parallel, each its own cache; all time; working sets in blocks, {mode}):",
        format_table(headers, cells),
    ]
    p = report["pooling"]
    if not p["computed"]:
        lines.append(f"pooling: not computed: {p['reason']}")
        return lines
    lines.append(
        f"pooling: one shared pool of {p['capacity_blocks']:,} blocks hits {percent_cell(p['shared_block_hit_rate'])} of "
        f"blocks, the {p['ranks']} ranks' own pools together {percent_cell(p['separate_block_hit_rate'])}: gain "
        f"{points(p['block_gain'], 2, NOT_KNOWN)} (tokens {percent_cell(p['shared_token_hit_rate'])} against "
        f"{percent_cell(p['separate_token_hit_rate'])}: {points(p['token_gain'], 2, NOT_KNOWN)})"
    )
    lines.append(f"  {p['how']}")
    return lines


def text(result: Ranks, view: TextView) -> list[str]:
    if not view.live:
        return []
    return ["", *rank_lines(to_json(result, view.sizes), view.mode)]


def metrics(result: Ranks, view: MetricsView) -> Iterable[MetricFamily]:
    """Each rank's own cache (all time), under names of their own: a `rank` label on the merged
    stream's metrics would make every sum over them count each access twice."""
    accesses, ws, ws_bytes, hits, pool, distances = [], [], [], [], [], []
    for v in result.views:
        rank = str(v.rank)
        accesses.append(MetricSample((rank,), v.accesses))
        for row in v.working_sets:
            if row.capacity_blocks is not None:
                key = (rank, target_value(row.target), row.mode)
                ws.append(MetricSample(key, row.capacity_blocks))
                if row.capacity_bytes is not None:
                    ws_bytes.append(MetricSample(key, row.capacity_bytes))
        caps = sorted({int(c) for c in view.capacities} | ({v.pool_blocks} if v.pool_blocks else set()))
        if v.accesses:
            hits += curve_figure.hit_rate_samples(v.curve, caps, (rank,))
        if v.pool_blocks is not None:
            pool.append(MetricSample((rank,), v.pool_blocks))
        distances.append(curve_figure.stack_distances(v.curve, view.horizon, (rank,)))
    by_target = ("rank", "target", "mode")
    yield MetricFamily(
        "kvset_rank_accesses",
        "counter",
        "block accesses of each data-parallel rank",
        ("rank",),
        tuple(accesses),
    )
    yield MetricFamily(
        "kvset_rank_working_set_blocks",
        "gauge",
        "smallest LRU capacity reaching the target on the rank's own accesses (all time; absent while not "
        "reached)",
        by_target,
        tuple(ws),
    )
    yield MetricFamily(
        "kvset_rank_hit_rate",
        "gauge",
        "LRU hit rate of the rank's own accesses at a capacity (all time)",
        ("rank", "capacity_blocks", "unit"),
        tuple(hits),
    )
    yield MetricFamily(
        "kvset_rank_capacity_blocks",
        "gauge",
        "each rank's own pool the pooling gain assumes",
        ("rank",),
        tuple(pool),
    )
    yield MetricFamily(
        "kvset_rank_stack_distance_blocks",
        "histogram",
        "LRU stack distances of the rank's own accesses (all time), as kvset_stack_distance_blocks",
        ("rank",),
        tuple(distances),
    )
    if view.sizes.bytes_per_block:
        yield MetricFamily(
            "kvset_rank_working_set_bytes",
            "gauge",
            "the rank's working set in full-attention KV bytes",
            by_target,
            tuple(ws_bytes),
        )
    p = result.pooling
    if p is None:
        return
    for name, help, values in (
        (
            "kvset_pooling_shared_hit_rate",
            "hit rate of one shared LRU pool of the ranks' pools added up, on the merged stream (all time)",
            p.shared_hit_rate,
        ),
        (
            "kvset_pooling_separate_hit_rate",
            "hit rate of the ranks each on its own pool, their hits added up over all accesses (all time)",
            p.separate_hit_rate,
        ),
        (
            "kvset_pooling_gain",
            "shared minus separate hit rate at the same total capacity",
            {u: p.gain(u) for u in UNITS},
        ),
    ):
        yield MetricFamily(
            name, "gauge", help, ("unit",), tuple(MetricSample((u,), values[u]) for u in UNITS)
        )
    yield gauge(
        "kvset_pooling_capacity_blocks",
        "the shared pool the gain is computed at: the ranks' pools added up",
        p.capacity_blocks,
    )


FIGURE: Figure[Ranks] = Figure(
    "ranks", Ranks, compute, ("ranks", "pooling"), to_json, text=text, metrics=metrics
)
