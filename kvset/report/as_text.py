"""The plain-text reports: `kvset analyze` (from its JSON object) and `kvset-top --once` (from a
snapshot). Both build their curve and working-set tables in kvset.report.tables."""

from __future__ import annotations

from kvset.quantities import duration, plural, points, target_label
from kvset.report.as_json import estimate_json
from kvset.report.caveats import caveat_lines
from kvset.report.policy_gap import policy_gap_json, policy_gap_lines
from kvset.report.ranks import rank_lines, ranks_json
from kvset.report.tables import (
    NOT_KNOWN,
    curve_table,
    gib_cell,
    knee_line,
    knee_row,
    percent_cell,
    report_curve_rows,
    working_set_table,
)
from kvset.report.tiers import tier_lines, tiers_json
from kvset.snapshot import MISSES_ONLY, RANK_POOL_SOURCE

# What each kind of source adds, for the advice when no block access arrived.
CURVE_SOURCES = {"events": "--events", "log": "--log", "replay": "--replay"}


def _caveats() -> str:
    return "caveats: " + " ".join(caveat_lines())


def estimate_text(estimate: dict | None) -> list[str]:
    """The label of a sampled analysis (from kvset.report.as_json.estimate_json): what was sampled and
    what the ± bounds mean. Nothing for a measured one."""
    if estimate is None:
        return []
    size = f", at most {estimate['sample_size']:,} blocks" if estimate["sample_size"] else ""
    return [
        f"  ESTIMATE from a {target_label(estimate['sample_rate'])} spatial sample of the blocks{size} "
        f"(seed {estimate['seed']}; request heads sampled more: {percent_cell(estimate['tracked_share'], 1)} of the "
        f"accesses looked at, {estimate['tracked_blocks']:,} blocks tracked)",
        f"  every number but requests, accesses and tokens is an estimate; ± is {estimate['error_bound']}",
    ]


def analysis_text(r: dict) -> str:
    """What `kvset analyze` prints, read off its JSON object (kvset.report.as_json.analysis_json)."""
    bt = r["block_tokens"]
    lines = [
        f"kvset analyze: {r['input']} ({r['format']}, {bt} tokens per block, order {r['order']})",
        *estimate_text(r["estimate"]),
        f"  requests {r['requests']:,}   accesses {r['accesses']:,}   distinct blocks {r['distinct_blocks']:,}"
        f"   tokens {r['tokens']:,}",
    ]
    if r["horizon_reached"]:
        lines.append(
            f"  horizon {r['horizon']:,} blocks REACHED: curve exact up to it; "
            f"{r['beyond_horizon']:,} re-references lay beyond it (misses at every capacity shown)"
        )
    elif r["estimate"]:
        lines.append(f"  horizon {r['horizon']:,} blocks, not reached")
    else:
        lines.append(f"  horizon {r['horizon']:,} blocks, not reached: the curve is exact at every capacity")
    if r["horizon_reached"]:
        # coverage targets are shares of what an infinite cache hits: the beyond-horizon re-references too
        lines.append(
            f"  hit rate at the horizon: {percent_cell(r['attainable_hit_rate'])} of blocks, "
            f"{percent_cell(r['attainable_token_hit_rate'])} of tokens; an infinite cache: "
            f"{percent_cell(r['infinite_cache_hit_rate'])} of blocks, {percent_cell(r['infinite_cache_token_hit_rate'])} "
            "of tokens (coverage targets are shares of it)"
        )
    else:
        lines.append(
            f"  attainable hit rate (infinite cache): {percent_cell(r['attainable_hit_rate'])} of blocks, "
            f"{percent_cell(r['attainable_token_hit_rate'])} of tokens"
        )
    with_gib = r["bytes_per_block"] is not None
    knee = r.get("knee")
    lines += ["", curve_table(r["curve"], with_gib, knee and knee["capacity_blocks"]), f"  {knee_line(knee)}"]
    ws = r["working_sets"]
    if ws:
        mode = ws[0]["mode"]
        explain = "share of an infinite cache's hit rate" if mode == "coverage" else "hit rate"
        lines += ["", f"working sets ({mode}: {explain}):", working_set_table(ws, with_gib)]
    if r.get("policy_gap") is not None:
        lines += ["", *policy_gap_lines(r["policy_gap"])]
    if "hybrid_reserve" in r:
        m, hr = r["model"], r["hybrid_reserve"]
        lines.append(
            f"  capacities in GiB for {m['name']}: {m['full_attention_bytes_per_token']:,} B of full-attention "
            f"KV per token ({m['kv_dtype']}), {m['full_attention_bytes_per_block']:,} B per {bt}-token block"
        )
        if r["hybrid_reserve_bytes"]:
            lines.append(
                f"  hybrid-layer reserve, NOT in the working sets above: {gib_cell(r['hybrid_reserve_bytes'])}"
                f" for {hr['concurrency']:,} running requests at {hr['context_tokens']:,} tokens of context "
                f"({hr['summary']}); add it to a working set to size the pool"
            )
        else:
            lines.append(f"  hybrid-layer reserve: 0 ({hr['summary']})")
    if "tiers" in r:
        lines += ["", *tier_lines(r)]
    if r["rejected_lines"] or r["warnings"]:
        lines.append("")
        for rej in r["rejections"]:
            shown = "; ".join(rej["examples"][:3])
            lines.append(
                f"  {plural(rej['count'], 'line')} rejected: {rej['reason']}"
                + (f" ({shown})" if shown else "")
            )
        for w in r["warnings"]:
            lines.append(f"  {plural(w['count'], 'request')} kept with a warning: {w['reason']}")
    for note in r["notes"]:
        lines.append(f"  note: {note}")
    sec = r["seconds"]
    rate = r["accesses"] / sec["analyze"] / 1e6 if sec["analyze"] > 0 else float("inf")
    opt_seconds = r["opt"]["seconds"] if r.get("opt") else None
    took = sec["read"] + sec["analyze"] + (opt_seconds or 0.0)
    lines += [
        "",
        f"took {took:.2f} s (read {sec['read']:.2f} s, analyze {sec['analyze']:.2f} s, {rate:.1f} M accesses/s"
        + (f"; Belady MIN {opt_seconds:.2f} s" if opt_seconds is not None else "")
        + ")",
        _caveats(),
    ]
    return "\n".join(lines)


def _no_accesses_advice(sources) -> str:
    """Why there is no curve, and what to add: only sources that were not given."""
    kinds = {h.kind for h in sources}
    given = [flag for kind, flag in CURVE_SOURCES.items() if kind in kinds]
    if given:
        return (
            f"no block accesses received from {' or '.join(given)}: no curve (see the source lines "
            "above for why)"
        )
    if "metrics" in kinds:
        return (
            "no block accesses received: no curve (a metrics endpoint alone gives the engine's operating "
            "point only; add --events or --log for the curve)"
        )
    return "no block accesses received: no curve"


def snapshot_text(snapshot, window: str = "all", mode: str | None = None) -> str:
    """A one-shot plain-text report of a snapshot (what `kvset-top --once` prints)."""
    s = snapshot
    mode = mode or next(iter(s.targets), "coverage")
    bt, bpb = s.block_tokens, s.bytes_per_block
    c = s.curve(window)
    lines = []
    head = "kvset-top report" + ("  [DEMO: synthetic workload]" if s.demo else "")
    lines.append(head)
    lines += estimate_text(estimate_json(s.sample))
    for h in s.sources:
        flag = "connected" if h.connected else "not connected"
        lines.append(
            f"  source: {h.source}: {h.state} ({flag}); {plural(h.accesses, 'access', 'accesses')}, "
            f"{h.rejected_total:,} rejected"
        )
        for r in h.rejected[:3]:
            lines.append(
                f"    rejected {r.count:,}: {r.reason}"
                + (f" ({'; '.join(r.examples[:2])})" if r.examples else "")
            )
        backlog = dict(h.details).get("backlog")
        if backlog:
            lines.append(f"    backlog: {backlog}")
        for note in h.notes:
            lines.append(f"    note: {note}")
    t = s.totals
    lines.append(
        f"  accesses {t.accesses:,}   requests {t.requests:,}   distinct blocks {t.first_time:,}   "
        f"tokens {t.tokens:,}"
        + (f"; {s.units.describe()}" if s.units else f" ({bt} per block)" if bt else "")
    )
    horizon = (
        f"horizon {s.horizon:,} blocks REACHED: {t.beyond_horizon:,} re-references beyond it"
        if t.beyond_horizon
        else f"horizon {s.horizon:,} blocks, not reached"
    )
    lines.append(f"  {horizon}; order {s.order}")
    span = "all time" if c.window_seconds is None else f"last {duration(c.window_seconds)}"
    if s.curve_scope == MISSES_ONLY and t.accesses:
        lines.append(
            "  the curve is of the engine's MISSES only (its KV events report no hits): not comparable "
            "with the engine's hit rate; vLLM >= 0.26 reports hits for requests sent with "
            'vllm_xargs {"kv_cache_report_mode": "full"}'
        )
    if t.accesses:
        lines.append(
            f"  attainable hit rate ({span}): {percent_cell(c.attainable())} of blocks, "
            f"{percent_cell(c.attainable('tokens'))} of tokens"
        )
    else:
        lines.append(f"  {_no_accesses_advice(s.sources)}")
    if c.accesses:
        # an estimate's all-time curve has a fine grid (0.3 % steps): no note for it
        grid = "" if c.exact or c.window_seconds is None else ", log grid: lower bounds between grid points"
        grid += ", ESTIMATE" if c.estimate else ""
        opt = s.opt_curve if window == "all" else None  # MIN's curve is of the whole trace
        knee = knee_row(c, bt, bpb, opt)
        at = knee["capacity_blocks"] if knee else None
        rows = report_curve_rows(c, bt, bpb, knee=at, opt=opt)
        lines += [
            "",
            f"hit-rate curve ({span}{grid}):",
            curve_table(rows, bool(bpb), at),
            f"  {knee_line(knee)}",
        ]
    ws_rows = s.working_set_rows(window, mode) if t.accesses else ()
    if ws_rows:
        rows = [
            {
                "target": r.target,
                "capacity_blocks": r.capacity_blocks,
                "capacity_tokens": r.capacity_tokens,
                "capacity_bytes": r.capacity_bytes,
            }
            for r in ws_rows
        ]
        extra = [
            [
                {True: "yes", False: "NO", None: NOT_KNOWN}[r.fits_pool],
                " ".join(NOT_KNOWN if v is None else f"{v:,}" for v in r.trend_blocks),
            ]
            for r in ws_rows
        ]
        table = working_set_table(rows, bool(bpb), ["fits pool", "trend (blocks)"], extra)
        lines += ["", f"working sets ({mode}, {span}):", table]
    if s.policy_gap is not None and window == "all":
        lines += ["", *policy_gap_lines(policy_gap_json(s.policy_gap, mode))]
    elif s.opt_note:
        lines += ["", s.opt_note]
    th = s.thrashing.get(window)
    if th is not None:
        lines += [
            "",
            f"thrashing at {th.capacity_blocks:,} blocks ({th.capacity_source}, {span}): "
            f"hit rate {percent_cell(th.hit_rate)}, +10 % capacity {points(th.gain_10pct, 2, NOT_KNOWN)}, "
            f"+25 % capacity {points(th.gain_25pct, 2, NOT_KNOWN)}, near misses "
            f"{percent_cell(th.near_miss_share, 1)} of misses [{th.level.upper()}]",
        ]
    elif (
        t.accesses
        and (all_time := s.thrashing.get("all")) is not None
        and all_time.capacity_source == RANK_POOL_SOURCE
    ):
        lines += ["", "thrashing: judged over all time only (each data-parallel rank has its own pool)"]
    elif t.accesses:
        lines += [
            "",
            "thrashing: not judged (no cache capacity: give --capacity BLOCKS, or --metrics/--events "
            "of an engine that reports its pool)",
        ]
    op = s.operating_point
    if op is not None:
        lines += operating_point_lines(op, window)
    if s.reserve is not None:
        r = s.reserve
        ws = gib_cell(r.working_set_bytes) if r.working_set_bytes is not None else "not reached"
        lines.append(
            f"memory for {r.model}: working set ({target_label(r.working_set_target)}) {ws} + hybrid reserve "
            f"{gib_cell(r.hybrid_reserve_bytes)} ({r.concurrency} running, {r.concurrency_source})"
            + (f" = {gib_cell(r.total_bytes)}" if r.total_bytes is not None else "")
            + (f"; pool {gib_cell(r.pool_bytes)}" if r.pool_bytes else "")
        )
    if s.tiers is not None:
        lines += ["", *tier_lines(tiers_json(s.tiers, bt, bpb))]
    if s.ranks:
        lines += ["", *rank_lines(ranks_json(s), mode)]
    if s.events:
        lines += ["", "recent events:"] + [f"  {e.kind}: {e.text}" for e in list(s.events)[-5:]]
    lines += ["", _caveats()]
    return "\n".join(lines)


def operating_point_lines(op, window: str) -> list[str]:
    """The engine's operating point: measured, the exact LRU curve there, the model and its inputs."""
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
