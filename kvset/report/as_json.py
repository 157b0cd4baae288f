"""The JSON objects kvset prints: `kvset analyze --json` and a snapshot (`kvset-top --once --json`,
the `e` export). Their keys are documented in the README; change them there too."""

from __future__ import annotations

import dataclasses

from kvset.core.curve import SampleInfo, TargetMode
from kvset.core.policy_gap import policy_gap
from kvset.core.sampling import METHOD
from kvset.core.sampling_curve import ERROR_Z
from kvset.core.tiers import TierPlan
from kvset.geometry.dtypes import AUTO
from kvset.geometry.model import ModelGeometry
from kvset.geometry.reserve import HybridReserve
from kvset.offline import AnalysisResult
from kvset.report.caveats import caveat_lines
from kvset.report.policy_gap import opt_json, policy_gap_json
from kvset.report.ranks import ranks_json
from kvset.report.tables import (
    curve_rows,
    default_capacities,
    knee_row,
    report_curve_rows,
    snapshot_working_set_json,
    working_set_rows,
)
from kvset.report.tiers import tiers_json
from kvset.text import printable


def _rejections(items) -> list[dict]:
    return [{"reason": r.reason, "count": r.count, "examples": list(r.examples)} for r in items]


def _finite(x):
    if x is None:
        return None
    x = float(x)
    return None if x != x else x


def estimate_json(info: SampleInfo | None) -> dict | None:
    """What a sampled analysis sampled (None: every block was analyzed, the numbers are measured)."""
    if info is None:
        return None
    return {
        "method": METHOD,
        "sample_rate": info.rate,
        "sample_size": info.size,
        "seed": info.seed,
        "tracked_blocks": info.tracked_blocks,
        "tracked_accesses": info.tracked_accesses,
        "tracked_share": info.tracked_share,
        "error_bound": f"{ERROR_Z:g} standard errors (about 95 %) from the spread of the sample's random groups",
    }


def analysis_json(
    result: AnalysisResult,
    targets,
    mode: TargetMode,
    capacities,
    bytes_per_block: int | None,
    *,
    geometry: ModelGeometry | None = None,
    kv_dtype: str = AUTO,
    reserve: HybridReserve | None = None,
    context_from: str | None = None,
    tiers: TierPlan | None = None,
    gap_capacity: int | None = None,
) -> dict:
    """What `kvset analyze --json` prints; with a geometry also the model and its hybrid reserve.
    capacities: the curve's rows (None: the reports' default, the knee included); with Belady MIN's
    curve (result.opt), its hit rates and working sets beside LRU's, and the policy gap at the knee
    and at `gap_capacity` (--capacity)."""
    a, c, s = result.analyzer, result.curve, result.input
    bt = s.units.block_size if s.units else None
    opt = result.opt.curve if result.opt is not None else None
    gap = policy_gap(c, opt, {mode: targets}, gap_capacity, "chosen") if opt is not None else None
    knee = knee_row(c, bt, bytes_per_block, opt)
    if capacities is None:
        capacities = default_capacities(c, knee=None if knee is None else knee["capacity_blocks"])
    out = {
        "input": printable(s.name),  # a file name can hold control characters too
        "format": printable(s.format),
        "block_tokens": bt,
        "units": units_json(s.units),
        "order": a.order,
        "estimate": estimate_json(c.sample),
        "requests": s.requests,
        "accesses": a.accesses,
        "tokens": a.tokens,
        "distinct_blocks": result.distinct_blocks,
        "rereferences": a.rereferences,
        "beyond_horizon": a.beyond_horizon,
        "horizon": a.horizon,
        "horizon_reached": result.horizon_reached,
        "max_stack_distance": c.max_distance(),
        "attainable_hit_rate": c.attainable("blocks"),
        "attainable_token_hit_rate": c.attainable("tokens"),
        "infinite_cache_hit_rate": c.infinite_capacity_hit_rate("blocks"),
        "infinite_cache_token_hit_rate": c.infinite_capacity_hit_rate("tokens"),
        "bytes_per_block": bytes_per_block,
        "curve": curve_rows(c, capacities, bt, bytes_per_block, opt),
        "knee": knee,
        "working_sets": working_set_rows(
            c, targets, mode, bt, bytes_per_block, opt_gaps=gap.for_mode(mode) if gap is not None else None
        ),
        "opt": opt_json(opt, result.opt.histogram.distinct_blocks, result.opt.seconds)
        if result.opt is not None and opt is not None
        else None,
        "policy_gap": policy_gap_json(gap) if gap is not None else None,
        "rejected_lines": s.rejects.total,
        "rejections": _rejections(s.rejects.summary()),
        "warnings": _rejections(s.warnings.summary()),
        "notes": [printable(n) for n in s.notes],
        "seconds": {"read": round(s.read_seconds, 4), "analyze": round(result.analyze_seconds, 4)},
        "caveats": caveat_lines(),
    }
    if geometry is not None and reserve is not None:
        out["model"] = {
            "name": geometry.name,
            "kv_dtype": geometry.kv_dtype(kv_dtype),
            "full_attention_bytes_per_token": geometry.full_attention_bytes_per_token(kv_dtype),
            "full_attention_bytes_per_block": bytes_per_block,
            "notes": list(geometry.notes),
        }
        out["hybrid_reserve"] = {
            **reserve.to_dict(),
            "context_from": context_from,
            "summary": reserve.summary(),
        }
        out["hybrid_reserve_bytes"] = reserve.total_bytes
    if tiers is not None:
        out.update(tiers_json(tiers, bt, bytes_per_block))
    return out


def operating_point_json(snapshot, window: str = "all") -> dict | None:
    """The snapshot's operating point as JSON: the engine's capacity and measured hit rate beside the
    curve's prediction at that capacity, in `window`."""
    op = snapshot.operating_point
    if op is None:
        return None
    bt = snapshot.block_tokens
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
        "effective_capacity_tokens": eff * bt if eff is not None and bt else None,
        "model_inputs": dict(op.model_inputs),
        "dedupe": dict(op.dedupe),
        "miss_breakdown": dict(op.miss_breakdown) or None,
        "notes": list(op.notes),
        "curve_scope": op.curve_scope,
        "stale": op.stale,
        "label": op.label,
    }


def units_json(units) -> dict | None:
    """The stream's units (kvset.units.StreamUnits): its block size, who said it, the hash."""
    return None if units is None else dataclasses.asdict(units)


def engine_json(engine) -> dict:
    """What the engine says, its pools each in its own blocks (kvset.units.EnginePool)."""
    out = {k: v for k, v in vars(engine).items() if k != "pools"}
    out["pools"] = [dataclasses.asdict(p) for p in engine.pools] if engine.pools else None
    out["capacity_blocks"], out["capacity_tokens"] = engine.capacity_blocks, engine.capacity_tokens
    return out


def snapshot_json(snapshot) -> dict:
    """A JSON-ready dict of everything a snapshot holds (each curve at the rows every report shows)."""
    s = snapshot
    bt, bpb = s.block_tokens, s.bytes_per_block
    all_curve = s.curve("all")
    windows = {}
    for label, c in s.curves.items():
        opt = s.opt_curve if label == "all" else None  # MIN's curve is of the whole trace
        knee = knee_row(c, bt, bpb, opt) if c.accesses else None
        windows[label] = {
            "seconds": c.window_seconds,
            "exact": c.exact,
            "estimate": c.estimate,
            "accesses": c.accesses,
            "tokens": c.tokens,
            "attainable_hit_rate": c.attainable("blocks"),
            "attainable_token_hit_rate": c.attainable("tokens"),
            "curve": report_curve_rows(
                c, bt, bpb, knee=None if knee is None else knee["capacity_blocks"], opt=opt
            ),
            "knee": knee,
        }
    churn = s.churn
    out = {
        "seq": s.seq,
        "taken_at": s.taken_at,
        "data_time": s.data_time,
        "demo": s.demo,
        "order": s.order,
        "horizon": s.horizon,
        "block_tokens": bt,
        "units": units_json(s.units),
        "bytes_per_block": bpb,
        "model": s.model,
        "curve_scope": s.curve_scope,
        "estimate": estimate_json(s.sample),
        "accesses": s.totals.accesses,
        "tokens": s.totals.tokens,
        "requests": s.totals.requests,
        "distinct_blocks": s.totals.first_time,
        "rereferences": s.totals.rereferences,
        "beyond_horizon": s.totals.beyond_horizon,
        "tracked_blocks": s.totals.tracked_blocks,
        "late_accesses": s.totals.late_accesses,
        "accesses_per_second": s.accesses_per_second,
        "attainable_hit_rate": all_curve.attainable("blocks"),
        "attainable_token_hit_rate": all_curve.attainable("tokens"),
        "curve": windows["all"]["curve"],
        "knee": windows["all"]["knee"],
        "windows": windows,
        "targets": {k: list(v) for k, v in s.targets.items()},
        "working_sets": [snapshot_working_set_json(r) for r in s.working_sets],
        "thrashing": {
            label: {
                "capacity_blocks": t.capacity_blocks,
                "capacity_source": t.capacity_source,
                "hit_rate": t.hit_rate,
                "gain_10pct": t.gain_10pct,
                "gain_25pct": t.gain_25pct,
                "near_miss_share": t.near_miss_share,
                "level": t.level,
            }
            for label, t in s.thrashing.items()
        },
        "churn": {
            "slot_seconds": churn.slot_seconds,
            "end_time": churn.end_time,
            "accesses_per_second": [float(v) for v in churn.accesses],
            "first_time_per_second": [float(v) for v in churn.first_time],
            "rereferences_per_second": [float(v) for v in churn.rereferences],
            "beyond_horizon_per_second": [float(v) for v in churn.beyond_horizon],
            "hit_rate_at_capacity": [_finite(v) for v in churn.hit_rate_at_capacity],
            "capacity_blocks": churn.capacity_blocks,
            "working_set_main": [_finite(v) for v in churn.working_set_main],
            "working_set_step_seconds": churn.working_set_step_seconds,
        },
        "reserve": None,
        "engine": None,
        "operating_point": operating_point_json(s),
        "engine_history": [
            {
                "at": r.at,
                "token_hit_rate": r.token_hit_rate,
                "kv_usage": r.kv_usage,
                "label": r.label,
                "stale": r.stale,
            }
            for r in s.engine_history
            if r.token_hit_rate is not None or r.kv_usage is not None
        ],
        "sources": [
            {
                "source": h.source,
                "kind": h.kind,
                "connected": h.connected,
                "state": h.state,
                "last_data_at": h.last_data_at,
                "received": h.received,
                "accesses": h.accesses,
                "rejected": h.rejected_total,
                "rejections": _rejections(h.rejected),
                "notes": list(h.notes),
                "finished": h.finished,
                "details": dict(h.details),
            }
            for h in s.sources
        ],
        "rejected_total": s.rejected_total,
        "events": [{"at": e.at, "kind": e.kind, "text": e.text} for e in s.events],
        "opt": opt_json(s.opt_curve, s.opt_curve.horizon) if s.opt_curve is not None else None,
        "policy_gap": policy_gap_json(s.policy_gap) if s.policy_gap is not None else None,
        "opt_note": s.opt_note,
        "caveats": caveat_lines(),
    }
    if s.reserve is not None:
        r = s.reserve
        out["reserve"] = {
            "model": r.model,
            "full_attention_bytes_per_token": r.full_attention_bytes_per_token,
            "full_attention_bytes_per_block": r.full_attention_bytes_per_block,
            "working_set_target": r.working_set_target,
            "working_set_bytes": r.working_set_bytes,
            "hybrid_reserve_bytes": r.hybrid_reserve_bytes,
            "total_bytes": r.total_bytes,
            "concurrency": r.concurrency,
            "concurrency_source": r.concurrency_source,
            "pool_bytes": r.pool_bytes,
            "notes": list(r.notes),
        }
    if s.engine is not None:
        out["engine"] = engine_json(s.engine)
    if s.tiers is not None:
        out.update(tiers_json(s.tiers, bt, bpb))
    out.update(ranks_json(s))
    return out
