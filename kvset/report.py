"""Turning curves into tables, text and JSON: shared by `kvset analyze`, `--once` and exports.

Every number carries its unit: capacities in blocks, tokens and (with a model) GiB, binary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kvset.core.curve import HitRateCurve
from kvset.quantities import GIB
from kvset.snapshot import MISSES_ONLY

CAVEATS = (
    "LRU only: a policy with foresight (Belady MIN) needs at most these capacities.",
    "Full attention only: hybrid layers (sliding window, linear attention, SSM) are sized separately.",
    "Today's trace: the working set drifts as the workload changes.",
)



def parse_fractions(text: str, what: str = "target") -> tuple[float, ...]:
    """'0.95,0.99' or '95%,99%' -> (0.95, 0.99); every value in (0, 1]."""
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = float(part[:-1]) / 100 if part.endswith("%") else float(part)
        except ValueError:
            raise ValueError(f"{what} {part!r} is not a number") from None
        if not 0 < value <= 1:
            raise ValueError(f"{what} {part!r} must lie in (0, 1] (or (0 %, 100 %])")
        out.append(value)
    if not out:
        raise ValueError(f"no {what} given")
    return tuple(out)


def parse_capacities(text: str) -> tuple[int, ...]:
    out = []
    for part in str(text).split(","):
        part = part.strip().replace("_", "")
        if not part:
            continue
        try:
            value = int(float(part)) if "e" in part.lower() else int(part)
        except ValueError:
            raise ValueError(f"capacity {part!r} is not a whole number of blocks") from None
        if value < 1:
            raise ValueError(f"capacity {part!r} must be at least 1 block")
        out.append(value)
    if not out:
        raise ValueError("no capacity given")
    return tuple(sorted(set(out)))


def percent(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f} %"


def target_label(t: float) -> str:
    s = f"{100 * t:.3f}".rstrip("0").rstrip(".")
    return f"{s} %"


def gib(n_bytes: int | None) -> float | None:
    return None if n_bytes is None else n_bytes / GIB


def curve_rows(
    curve: HitRateCurve,
    capacities: Iterable[int],
    block_tokens: int | None,
    bytes_per_block: int | None = None,
) -> list[dict]:
    caps = [int(c) for c in capacities]
    block_rates = curve.hit_rates(caps, "blocks")
    token_rates = curve.hit_rates(caps, "tokens")
    rows = []
    for c, br, tr in zip(caps, block_rates, token_rates, strict=True):
        row = {
            "capacity_blocks": c,
            "capacity_tokens": c * block_tokens if block_tokens else None,
            "block_hit_rate": float(br),
            "token_hit_rate": float(tr),
        }
        if bytes_per_block:
            row["capacity_bytes"] = c * bytes_per_block
            row["capacity_gib"] = c * bytes_per_block / GIB
        if c > curve.horizon:
            row["beyond_horizon"] = True
        rows.append(row)
    return rows


def working_set_rows(
    curve: HitRateCurve,
    targets: Sequence[float],
    mode: str,
    block_tokens: int | None,
    bytes_per_block: int | None = None,
    unit: str = "blocks",
) -> list[dict]:
    rows = []
    for t in targets:
        ws = curve.working_set(t, mode=mode, unit=unit)
        row = {
            "target": t,
            "mode": mode,
            "unit": unit,
            "capacity_blocks": ws,
            "capacity_tokens": ws * block_tokens if ws is not None and block_tokens else None,
            "reached": ws is not None,
        }
        if bytes_per_block:
            row["capacity_bytes"] = ws * bytes_per_block if ws is not None else None
            row["capacity_gib"] = ws * bytes_per_block / GIB if ws is not None else None
        rows.append(row)
    return rows


def default_capacities(curve: HitRateCurve, n: int = 16) -> np.ndarray:
    return curve.log_capacities(n)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """Plain monospace table; `align` is one of 'l'/'r' per column (default: first left, rest right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align, strict=True))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]).rstrip()


def fmt_gib(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:,.0f} GiB"
    if x >= 1:
        return f"{x:.2f} GiB"
    return f"{x * 1024:.1f} MiB"


# -- snapshots (the live monitor's `--once`, exports) ---------------------------------------------
def _rejections(items) -> list[dict]:
    return [{"reason": r.reason, "count": r.count, "examples": list(r.examples)} for r in items]


def _finite(x):
    if x is None:
        return None
    x = float(x)
    return None if x != x else x


def operating_point(snapshot, window: str = "all") -> dict | None:
    """The snapshot's operating point as JSON: the engine's capacity and measured hit rate beside the
    curve's prediction at that capacity, in `window`."""
    op = snapshot.operating_point
    if op is None:
        return None
    return {
        "capacity_blocks": op.capacity_blocks,
        "capacity_tokens": op.capacity_tokens,
        "measured_token_hit_rate": op.measured_token_hit_rate,
        "measured_over_seconds": op.measured_over_seconds,
        "predicted_token_hit_rate": op.predicted(window),
        "predicted_window": window,
        "difference": op.difference(window),
        "curve_scope": op.curve_scope,
        "stale": op.stale,
        "label": op.label,
    }


def snapshot_json(snapshot, points: int = 32) -> dict:
    """A JSON-ready dict of everything a snapshot holds (curves sampled at log-spaced capacities)."""
    s = snapshot
    bt, bpb = s.block_tokens, s.bytes_per_block
    all_curve = s.curve("all")
    windows = {}
    for label, c in s.curves.items():
        windows[label] = {
            "seconds": c.window_seconds,
            "exact": c.exact,
            "accesses": c.accesses,
            "tokens": c.tokens,
            "attainable_hit_rate": c.attainable("blocks"),
            "attainable_token_hit_rate": c.attainable("tokens"),
            "curve": curve_rows(c, c.log_capacities(points), bt, bpb) if c.accesses else [],
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
        "bytes_per_block": bpb,
        "model": s.model,
        "curve_scope": s.curve_scope,
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
        "windows": windows,
        "targets": {k: list(v) for k, v in s.targets.items()},
        "working_sets": [
            {
                "target": r.target, "mode": r.mode, "window": r.window, "capacity_blocks": r.capacity_blocks,
                "capacity_tokens": r.capacity_tokens, "capacity_bytes": r.capacity_bytes, "reached": r.reached,
                "trend_blocks": list(r.trend_blocks), "fits_pool": r.fits_pool, "exact": r.exact,
            }
            for r in s.working_sets
        ],  # fmt: skip
        "thrashing": {
            label: {
                "capacity_blocks": t.capacity_blocks, "capacity_source": t.capacity_source, "hit_rate": t.hit_rate,
                "gain_10pct": t.gain_10pct, "gain_25pct": t.gain_25pct, "near_miss_share": t.near_miss_share,
                "level": t.level,
            }
            for label, t in s.thrashing.items()
        },  # fmt: skip
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
        "operating_point": operating_point(s),
        "engine_history": [
            {"at": r.at, "token_hit_rate": r.token_hit_rate, "kv_usage": r.kv_usage, "label": r.label, "stale": r.stale}
            for r in s.engine_history
            if r.token_hit_rate is not None or r.kv_usage is not None
        ],
        "sources": [
            {
                "source": h.source, "kind": h.kind, "connected": h.connected, "state": h.state,
                "last_data_at": h.last_data_at, "received": h.received, "accesses": h.accesses,
                "rejected": h.rejected_total, "rejections": _rejections(h.rejected), "notes": list(h.notes),
                "finished": h.finished, "details": dict(h.details),
            }
            for h in s.sources
        ],  # fmt: skip
        "rejected_total": s.rejected_total,
        "events": [{"at": e.at, "kind": e.kind, "text": e.text} for e in s.events],
        "caveats": list(CAVEATS),
    }
    if s.reserve is not None:
        r = s.reserve
        out["reserve"] = {
            "model": r.model, "full_attention_bytes_per_token": r.full_attention_bytes_per_token,
            "full_attention_bytes_per_block": r.full_attention_bytes_per_block,
            "working_set_target": r.working_set_target, "working_set_bytes": r.working_set_bytes,
            "hybrid_reserve_bytes": r.hybrid_reserve_bytes, "total_bytes": r.total_bytes,
            "concurrency": r.concurrency, "concurrency_source": r.concurrency_source,
            "pool_bytes": r.pool_bytes, "notes": list(r.notes),
        }  # fmt: skip
    if s.engine is not None:
        out["engine"] = {k: v for k, v in s.engine.__dict__.items()}
    return out


def snapshot_text(snapshot, window: str = "all", mode: str | None = None) -> str:
    """A one-shot plain-text report of a snapshot (what `kvset-top --once` prints)."""
    s = snapshot
    mode = mode or next(iter(s.targets), "coverage")
    bt, bpb = s.block_tokens, s.bytes_per_block
    c = s.curve(window)
    lines = []
    head = "kvset-top report" + ("  [DEMO: synthetic workload]" if s.demo else "")
    lines.append(head)
    for h in s.sources:
        flag = "connected" if h.connected else "not connected"
        lines.append(f"  source: {h.source}: {h.state} ({flag}); {h.accesses:,} accesses, "
                     f"{h.rejected_total:,} rejected")  # fmt: skip
        for r in h.rejected[:3]:
            lines.append(f"    rejected {r.count:,}: {r.reason}" + (f" ({'; '.join(r.examples[:2])})" if r.examples else ""))
        for note in h.notes:
            lines.append(f"    note: {note}")
    t = s.totals
    lines.append(f"  accesses {t.accesses:,}   requests {t.requests:,}   distinct blocks {t.first_time:,}   "
                 f"tokens {t.tokens:,}" + (f" ({bt} per block)" if bt else ""))  # fmt: skip
    horizon = (f"horizon {s.horizon:,} blocks REACHED: {t.beyond_horizon:,} re-references beyond it"
               if t.beyond_horizon else f"horizon {s.horizon:,} blocks, not reached")  # fmt: skip
    lines.append(f"  {horizon}; order {s.order}")
    span = "all time" if c.window_seconds is None else f"last {c.window_seconds:g} s"
    if s.curve_scope == MISSES_ONLY:
        lines.append("  the curve is of the engine's MISSES only (its KV events report no hits): not comparable "
                     "with the engine's hit rate; vLLM >= 0.26 reports hits for requests sent with "
                     "vllm_xargs {\"kv_cache_report_mode\": \"full\"}")  # fmt: skip
    if t.accesses:
        lines.append(f"  attainable hit rate ({span}): {percent(c.attainable())} of blocks, "
                     f"{percent(c.attainable('tokens'))} of tokens")  # fmt: skip
    else:
        lines.append("  no block accesses received: no curve (a metrics endpoint alone gives the engine's "
                     "operating point only; add --events or --log for the curve)")  # fmt: skip
    if c.accesses:
        rows = []
        for row in curve_rows(c, c.log_capacities(12), bt, bpb):
            cells = [f"{row['capacity_blocks']:,}", f"{row['capacity_tokens']:,}" if row["capacity_tokens"] else "-"]
            if bpb:
                cells.append(fmt_gib(row["capacity_gib"]))
            cells += [percent(row["block_hit_rate"]), percent(row["token_hit_rate"])]
            rows.append(cells)
        headers = ["capacity (blocks)", "tokens"] + (["GiB"] if bpb else []) + ["block hit rate", "token hit rate"]
        lines += ["", f"hit-rate curve ({span}{'' if c.exact else ', log grid: lower bounds between grid points'}):",
                  format_table(headers, rows)]  # fmt: skip
    ws_rows = s.working_set_rows(window, mode) if t.accesses else ()
    if ws_rows:
        headers = ["target", "blocks", "tokens"] + (["GiB"] if bpb else []) + ["fits pool", "trend (blocks)"]
        rows = []
        for r in ws_rows:
            trend = " ".join("-" if v is None else f"{v:,}" for v in r.trend_blocks)
            fits = {True: "yes", False: "NO", None: "-"}[r.fits_pool]
            if r.capacity_blocks is None:
                cells = [target_label(r.target), "not reached", "-"] + (["-"] if bpb else []) + [fits, trend]
            else:
                cells = [target_label(r.target), f"{r.capacity_blocks:,}",
                         f"{r.capacity_tokens:,}" if r.capacity_tokens else "-"]  # fmt: skip
                if bpb:
                    cells.append(fmt_gib(gib(r.capacity_bytes)))
                cells += [fits, trend]
            rows.append(cells)
        lines += ["", f"working sets ({mode}, {span}):", format_table(headers, rows)]
    th = s.thrashing.get(window)
    if th is not None:
        lines += ["", f"thrashing at {th.capacity_blocks:,} blocks ({th.capacity_source}, {span}): "
                      f"hit rate {percent(th.hit_rate)}, +10 % capacity {100 * th.gain_10pct:+.2f} pts, "
                      f"+25 % capacity {100 * th.gain_25pct:+.2f} pts, near misses {percent(th.near_miss_share, 1)} "
                      f"of misses [{th.level.upper()}]"]  # fmt: skip
    op = operating_point(s, window)
    if op is not None:
        measured = percent(op["measured_token_hit_rate"]) if op["measured_token_hit_rate"] is not None else "not reported"
        lines.append(f"engine operating point ({op['label'] or 'engine'}): {op['capacity_blocks']:,} blocks, "
                     f"measured token hit rate {measured}, predicted {percent(op['predicted_token_hit_rate'])}"
                     + (" (stale)" if op["stale"] else ""))  # fmt: skip
    if s.reserve is not None:
        r = s.reserve
        ws = fmt_gib(gib(r.working_set_bytes)) if r.working_set_bytes is not None else "not reached"
        lines.append(f"memory for {r.model}: working set ({target_label(r.working_set_target)}) {ws} + hybrid reserve "
                     f"{fmt_gib(gib(r.hybrid_reserve_bytes))} ({r.concurrency} running, {r.concurrency_source})"
                     + (f" = {fmt_gib(gib(r.total_bytes))}" if r.total_bytes is not None else "")
                     + (f"; pool {fmt_gib(gib(r.pool_bytes))}" if r.pool_bytes else ""))  # fmt: skip
    if s.events:
        lines += ["", "recent events:"] + [f"  {e.kind}: {e.text}" for e in list(s.events)[-5:]]
    lines += ["", "caveats: " + " ".join(CAVEATS)]
    return "\n".join(lines)
