"""The engine's operating point: its pool and measured hit rate, the LRU curve there, and the model.

What is exact and what is a model:
- the curve is the exact LRU curve of the accesses seen (every admitted lookup's hit blocks and
  every stored block, each request once, re-reports of waiting requests dropped);
- the engine is not an ideal LRU of its pool: a running request pins its blocks, so only the rest
  of the pool holds the blocks that can be evicted, and that rest is ordered by *release* time
  (vLLM frees a finished request's blocks last first). The model (kvset.engine_model.replay over
  kvset.engine_model.free_queue) replays exactly that policy on the admissions seen in the events and
  finishes estimated from them, and gives every query block the pool size from which it was a hit.
  Its hit rate at the pool is the prediction; the LRU capacity with the same hit rate is the pool's
  *effective capacity*, drawn on the curve beside the pool. Its inputs are shown with it.

The model needs the engine's hits. With KV events that report misses only (vLLM's default) they are
read off the chains the stored blocks hang on (curve scope RECONSTRUCTED); a request that stored no
block is then not seen at all, so the share of the engine's query tokens (and requests) the events
showed is given beside the prediction, measured against the engine's own counters since kvset
started (/metrics: vllm:prefix_cache_queries, vllm:request_success). Without either, the hit rate
cannot be predicted from the events; the engine's own rate comes from /metrics.

Data-parallel ranks (several --events endpoints) each have their own pool (the engine's own of each
rank where it says them, else its one pool split evenly): the LRU figure is then each rank's own curve
at its own pool, summed (the merged stream's curve at the whole pool is what one shared pool would do:
kvset.figures.ranks), and the model is read at the ranks' mean pool, since each rank's block pool is
replayed on its own.

The pool is in the stream's blocks, less vLLM's null block (kvset.units.EnginePool.in_stream_blocks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kvset.figures import ranks
from kvset.figures.base import Json, MetricFamily, MetricsView, OptionValues, Sizes, TextView, gauge
from kvset.figures.inputs import MISSES_ONLY, RECONSTRUCTED, Figure, FigureInputs
from kvset.figures.ranks import RankSplit
from kvset.figures.tables import NOT_KNOWN, percent_cell
from kvset.types import EngineReading

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    from kvset.core.curve import HitRateCurve
    from kvset.engine_model import EngineModel


@dataclass(frozen=True)
class OperatingPoint:
    """The engine's own capacity and measured hit rate beside what kvset predicts there.

    Two figures are kept apart: the exact LRU curve of the accesses seen, read at the pool
    (`lru_by_window`: exact for "all", on the grid for the other windows), and the prediction for the
    engine itself (`predicted_token_hit_rate`): a model of what the engine does that an ideal LRU does
    not (running requests pin their blocks; see the module docstring), named in `model`,
    with the inputs it used. Without a model the prediction is the LRU curve's at the pool.
    """

    capacity_blocks: int  # the engine's pool in the analyzed stream's blocks
    capacity_tokens: int | None
    measured_token_hit_rate: float | None  # what the engine says
    measured_over_seconds: float | None  # the period the engine measured it over
    # the LRU curve's token hit rate at the pool, by window label ("all" exact, others on the grid)
    lru_by_window: dict[str, float | None]
    curve_scope: str  # a curve of the engine's misses alone predicts nothing about its hit rate
    stale: bool
    label: str
    model: str | None = None  # the engine model's name; None: the LRU curve is the prediction
    model_token_hit_rate: float | None = None  # the model's, over the whole stream
    # the LRU capacity with the model's hit rate at the pool: what the pool is worth as an LRU
    effective_capacity_blocks: int | None = None
    model_pool_blocks: int | None = None  # the pool the model is read at (one rank's)
    model_inputs: tuple[tuple[str, str], ...] = ()  # what the model used, in words
    dedupe: tuple[tuple[str, int], ...] = ()  # the grouping's and dedupe's counts
    # shares of the engine's query tokens at the pool: hit, first_time, capacity, pinned, ...
    miss_breakdown: tuple[tuple[str, float], ...] = ()
    notes: tuple[str, ...] = ()  # what can and cannot be predicted
    # what the events showed of the engine's traffic since kvset started: the model's query tokens over
    # the engine's (vllm:prefix_cache_queries), and its requests against vllm:request_success
    seen_token_share: float | None = None
    seen_requests: int | None = None
    engine_requests: int | None = None

    @property
    def unseen_token_share(self) -> float | None:
        return None if self.seen_token_share is None else max(0.0, 1.0 - self.seen_token_share)

    @property
    def model_label(self) -> str:
        """The model in one word or two, for narrow panels: whose engine it replays when not vLLM's."""
        from kvset.engine_model.radix_cache import MODEL_PREFIX as SGLANG_MODEL  # compiled: load late

        return "SGLang model" if self.model is not None and self.model.startswith(SGLANG_MODEL) else "model"

    @property
    def comparable(self) -> bool:
        return self.curve_scope != MISSES_ONLY

    @property
    def predicted_token_hit_rate(self) -> float | None:
        """The prediction for the engine: the model's, else the exact LRU curve's at the pool."""
        if not self.comparable:
            return None
        return self.model_token_hit_rate if self.model is not None else self.lru_by_window.get("all")

    def lru(self, window: str = "all") -> float | None:
        return self.lru_by_window.get(window)

    def predicted(self, window: str = "all") -> float | None:
        """The prediction; a model's is over the whole stream whatever the window."""
        if self.model is not None:
            return self.predicted_token_hit_rate
        return self.lru_by_window.get(window) if self.comparable else None

    def difference(self, window: str = "all") -> float | None:
        """Measured minus predicted, in hit-rate units (None where either is missing or not comparable)."""
        predicted = self.predicted(window)
        if not self.comparable or self.measured_token_hit_rate is None or predicted is None:
            return None
        return self.measured_token_hit_rate - predicted


MISSES_ONLY_NOTE = (
    "the engine reports misses only: its hit rate cannot be predicted from its events (its hits are "
    "not in them). What can: the curve of its misses (a second cache tier's view), its evictions and "
    "re-stores after removal; the measured rate is the engine's own (/metrics). For the prediction, "
    'send requests with vllm_xargs {"kv_cache_report_mode": "full"} (vLLM >= 0.26)'
)
RANKS_NOTE = (
    "{ranks} data-parallel ranks, each with its own pool ({pools}): the LRU figure and the model are "
    "each rank's own at its pool; windowed LRU figures are not kept per rank"
)
EVENTS_SHOWED_NOTE = (
    "the engine reports misses only (vLLM's default mode): its hits were read off the chains its stored "
    "blocks hang on; {seen}"
)
BEYOND_MODEL_NOTE = (
    "the pool ({pool:,} blocks) is beyond the engine model's reach ({reach:,} blocks): a block released "
    "further back than that counts as a miss, so the model's hit rate is a lower bound"
)
NO_MODEL_NOTE = (
    "no hit-reporting KV events: the prediction is the LRU curve at the pool, which ignores the blocks "
    "running requests pin (give --events of an engine that reports hits for the engine model)"
)


def operating_point(
    engine: EngineReading | None,
    pool: int | None,
    block_tokens: int | None,
    curves: dict[str, HitRateCurve],
    curve_scope: str,
    engine_model: EngineModel | None = None,
    rank_split: RankSplit | None = None,
) -> OperatingPoint | None:
    """The engine's capacity and measured hit rate beside the LRU curve and the model at that capacity.

    `rank_split`: with data-parallel ranks, their number, each one's pool and the curve of one LRU per
    rank (kvset.figures.ranks)."""
    if engine is None or not pool:
        return None
    if rank_split is not None:
        ranks, rank_pool, lru_curve, pools = rank_split
        lru_by_window = dict.fromkeys(curves, None)
        lru_by_window["all"] = lru_curve.hit_rate(rank_pool, "tokens") if lru_curve.tokens else None
        sizes = sorted(set(pools.values()))
        each = (
            f"{sizes[0]:,} blocks each"
            if len(sizes) == 1
            else ", ".join(f"{pools[r]:,}" for r in sorted(pools))
        )
        rank_notes: tuple[str, ...] = (RANKS_NOTE.format(ranks=ranks, pools=each),)
    else:
        rank_pool, lru_curve, ranks = pool, curves["all"], 1
        lru_by_window = {
            label: c.hit_rate(pool, "tokens") if c.tokens else None for label, c in curves.items()
        }
        rank_notes = ()
    base = OperatingPoint(
        capacity_blocks=pool,
        capacity_tokens=pool * block_tokens if block_tokens else None,
        measured_token_hit_rate=engine.token_hit_rate,
        measured_over_seconds=engine.hit_rate_window_s,
        lru_by_window=lru_by_window,
        curve_scope=curve_scope,
        stale=engine.stale,
        label=engine.label,
        notes=rank_notes,
    )
    if curve_scope == MISSES_ONLY:
        return _with(base, notes=(MISSES_ONLY_NOTE, *rank_notes), dedupe=_dedupe(engine_model))
    if engine_model is None or not engine_model.query_tokens:
        return _with(base, notes=((NO_MODEL_NOTE,) if engine_model is None else ()) + rank_notes)
    usable = max(1, rank_pool)  # the pool left out vLLM's null block already
    at = engine_model.at(usable)
    seen = _seen(engine, engine_model)
    notes = rank_notes
    if curve_scope == RECONSTRUCTED:
        notes = (EVENTS_SHOWED_NOTE.format(seen=_seen_words(*seen)), *rank_notes)
    if usable > engine_model.reach_blocks:
        notes = (*notes, BEYOND_MODEL_NOTE.format(pool=usable, reach=engine_model.reach_blocks))
    return _with(
        base,
        notes=notes,
        seen_token_share=seen[0],
        seen_requests=seen[1],
        engine_requests=seen[2],
        model=engine_model.name,
        model_token_hit_rate=at.hit_rate,
        effective_capacity_blocks=effective_capacity(lru_curve, engine_model, at.hit_tokens),
        model_pool_blocks=usable,
        model_inputs=_inputs(engine, pool, usable, engine_model, ranks),
        dedupe=_dedupe(engine_model),
        miss_breakdown=tuple(at.breakdown().items()),
    )


def _seen(engine: EngineReading, model: EngineModel) -> tuple[float | None, int | None, int | None]:
    """(share of the engine's query tokens the model counted, its requests, the engine's finished ones)."""
    share = None
    if engine.queries_since_start:
        share = model.query_tokens / engine.queries_since_start
    theirs = None if engine.requests_since_start is None else round(engine.requests_since_start)
    return share, model.requests, theirs


def _seen_words(share: float | None, seen: int | None, theirs: int | None) -> str:
    if share is None:
        return "what share of the traffic the events showed needs the engine's /metrics (--metrics)"
    text = (
        f"the events showed {percent_cell(min(share, 1.0))} of the query tokens the engine counted "
        f"since kvset started (unseen {percent_cell(max(0.0, 1.0 - share))}: requests that stored no block)"
    )
    if theirs is not None and seen is not None:
        text += f"; {seen:,} requests modelled of {theirs:,} the engine finished"
    return text


def effective_capacity(curve: HitRateCurve, model: EngineModel, hit_tokens: int) -> int | None:
    """The smallest LRU capacity whose token hits reach the model's at the pool (in the curve's tokens,
    which hold no partial last blocks). With ranks, `curve` is one LRU per rank: the capacity is each one's."""
    counted = model.query_tokens - model.partial_tail_tokens
    if not curve.tokens or counted <= 0:
        return None
    if hit_tokens <= 0:
        return 0
    need = math.ceil(hit_tokens * curve.tokens / counted)
    return curve.working_set(need / curve.tokens, mode="absolute", unit="tokens")


def _inputs(
    engine: EngineReading, pool: int, usable: int, model: EngineModel, ranks: int
) -> tuple[tuple[str, str], ...]:
    counts, state = model.counts, model.state
    where = f"{pool:,} blocks" if ranks == 1 else f"{pool:,} blocks over {ranks} ranks, {usable:,} in each"
    out = [
        ("pool", f"{where} that can hold a cached prefix (vLLM's null block left out)"),
        (
            "admissions",
            f"{counts.get('admitted', 0):,} lookups admitted; {counts.get('not_admitted', 0):,} "
            f"re-reports of waiting requests dropped",
        ),
        (
            "finishes",
            f"estimated: {state.get('finish_lag', 0)} event batches after a request's last stored block, "
            f"or when a later request holds its blocks ({counts.get('finished_by_evidence', 0):,} "
            f"of {counts.get('requests', 0):,})",
        ),
        (
            "pinned now",
            f"model {state.get('pinned', 0):,} blocks by {state.get('running', 0):,} running requests"
            + (
                f"; engine {round(engine.kv_usage * pool):,} blocks in use (kv_cache_usage_perc)"
                if engine.kv_usage is not None
                else ""
            ),
        ),
        ("readmissions", f"{counts.get('readmissions', 0):,} after preemptions, kept out as vLLM does"),
        (
            "partial last blocks",
            f"{model.partial_tail_tokens:,.0f} tokens, estimated (half a block a request)",
        ),
    ]
    if engine.waiting_requests is not None or engine.running_requests is not None:
        out.append(
            ("engine now", f"{engine.running_requests} running, {engine.waiting_requests} waiting (/metrics)")
        )
    return tuple(out)


def _dedupe(model: EngineModel | None) -> tuple[tuple[str, int], ...]:
    if model is None:
        return ()
    return tuple(model.counts.items())


def _with(op: OperatingPoint, **changes: Any) -> OperatingPoint:
    return replace(op, **changes)


def compute(inputs: FigureInputs, options: OptionValues) -> OperatingPoint | None:
    pool = inputs.engine_pool
    by_rank = inputs.result(ranks.FIGURE)
    split = by_rank.split if by_rank is not None and pool else None
    return operating_point(
        inputs.engine,
        pool,
        inputs.block_tokens,
        dict(inputs.curves),
        inputs.curve_scope,
        inputs.engine_model,
        split,
    )


def op_json(op: OperatingPoint, sizes: Sizes, window: str = "all") -> Json:
    """The engine's capacity and measured hit rate beside the prediction at that capacity, in `window`."""
    eff = op.effective_capacity_blocks
    return {
        "capacity_blocks": op.capacity_blocks,
        "capacity_tokens": op.capacity_tokens,
        "measured_token_hit_rate": op.measured_token_hit_rate,
        "measured_over_seconds": op.measured_over_seconds,
        "predicted_token_hit_rate": op.predicted(window),
        "predicted_by": op.model or "lru curve",
        "predicted_window": "all" if op.model else window,
        "difference": op.difference(window),
        "lru_token_hit_rate": op.lru(window),
        "lru_window": window,
        "model": op.model,
        "effective_capacity_blocks": eff,
        "effective_capacity_tokens": sizes.tokens(eff),
        "model_inputs": dict(op.model_inputs),
        "dedupe": dict(op.dedupe),
        "miss_breakdown": dict(op.miss_breakdown) or None,
        "notes": list(op.notes),
        "events_showed": {
            "query_token_share": op.seen_token_share,
            "unseen_token_share": op.unseen_token_share,
            "requests_modelled": op.seen_requests,
            "engine_requests_finished": op.engine_requests,
        },
        "curve_scope": op.curve_scope,
        "stale": op.stale,
        "label": op.label,
    }


def to_json(result: OperatingPoint, sizes: Sizes) -> Json:
    return {"operating_point": op_json(result, sizes)}


def text(op: OperatingPoint, view: TextView) -> list[str]:
    """The engine's operating point: measured, the exact LRU curve there, the model and its inputs."""
    window = view.window
    measured = (
        percent_cell(op.measured_token_hit_rate) if op.measured_token_hit_rate is not None else "not reported"
    )
    lines = [
        f"engine operating point ({op.label or 'engine'}): {op.capacity_blocks:,} blocks, measured token hit "
        f"rate {measured}" + (" (stale)" if op.stale else "")
    ]
    lines.append(f"  exact LRU curve of the accesses seen, at the pool: {percent_cell(op.lru(window))}")
    if op.model is not None:
        eff = (
            NOT_KNOWN if op.effective_capacity_blocks is None else f"{op.effective_capacity_blocks:,} blocks"
        )
        lines.append(
            f"  predicted (a MODEL: {op.model}, whole stream): {percent_cell(op.predicted_token_hit_rate)}; "
            f"the pool acts as an LRU of {eff} (effective capacity)"
        )
        lines += [f"    {k}: {v}" for k, v in op.model_inputs]
        if op.miss_breakdown:
            parts = ", ".join(f"{k.replace('_', ' ')} {percent_cell(v)}" for k, v in op.miss_breakdown)
            lines.append(f"  query tokens at the pool (model): {parts}")
    lines += [f"  note: {n}" for n in op.notes]
    return lines


def metrics(op: OperatingPoint, view: MetricsView) -> Iterable[MetricFamily]:
    predicted = op.predicted("all")
    if op.comparable and predicted is not None:
        yield gauge(
            "kvset_predicted_token_hit_rate",
            "the predicted token hit rate at the engine's pool: the engine model's, else the all-time LRU curve's",
            predicted,
        )


FIGURE: Figure[OperatingPoint] = Figure(
    "operating_point", OperatingPoint, compute, ("operating_point",), to_json, text=text, metrics=metrics
)
