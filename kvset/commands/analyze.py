"""`kvset analyze`: the whole hit-rate curve and the working sets of a trace, in one pass."""

from __future__ import annotations

import argparse
import json
import sys

from kvset.commands.inputs import InputError, add_input_arguments, load_input
from kvset.core.analyzer import DEFAULT_HORIZON, ORDERS
from kvset.formats import TraceError
from kvset.geometry.arguments import (
    add_override_arguments,
    add_reserve_arguments,
    context_tokens_from_args,
    dtype_name,
    geometry_from_args,
)
from kvset.geometry.dtypes import AUTO
from kvset.geometry.errors import GeometryError
from kvset.geometry.reserve import hybrid_reserve
from kvset.offline import DEFAULT_TARGETS, AnalysisResult, analyze_batches
from kvset.report import (
    CAVEATS,
    curve_rows,
    default_capacities,
    fmt_gib,
    format_table,
    parse_capacities,
    parse_fractions,
    percent,
    target_label,
    working_set_rows,
)


def add_analysis_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--order", choices=ORDERS, default="forward",
                   help="order of a request's blocks: forward (default) or reverse (vLLM's free order)")  # fmt: skip
    p.add_argument("--horizon", type=int, default=DEFAULT_HORIZON, metavar="BLOCKS",
                   help=f"most blocks tracked; the curve is exact up to it (default {DEFAULT_HORIZON:,})")  # fmt: skip


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="hit rate at every capacity and the working sets of a trace",
                       description="Exact LRU hit-rate curve and working sets of a trace, in one pass.")  # fmt: skip
    add_input_arguments(p)
    add_analysis_arguments(p)
    p.add_argument("--targets", default=",".join(str(t) for t in DEFAULT_TARGETS),
                   help="hit-rate targets, e.g. 0.95,0.99,0.999 (default) or 50%%,70%%")  # fmt: skip
    p.add_argument("--target-mode", choices=("coverage", "absolute"), default="coverage",
                   help="coverage: share of the attainable hit rate (default); absolute: hit rate itself")  # fmt: skip
    p.add_argument("--capacities", help="capacities in blocks for the table, e.g. 1000,10000 (default: log-spaced)")
    p.add_argument("--bytes-per-token", type=int, metavar="N",
                   help="full-attention KV bytes per token, to show capacities in GiB")  # fmt: skip
    p.add_argument("--model", metavar="NAME|config.json",
                   help="model preset or local Hugging Face config.json: capacities also in GiB, plus the "
                        "hybrid-layer reserve (see `kvset model --list`)")  # fmt: skip
    p.add_argument("--kv-dtype", type=dtype_name, default=AUTO, metavar="DTYPE",
                   help="KV cache dtype with --model: auto (the model's), bf16, fp16, fp8, fp32")  # fmt: skip
    add_reserve_arguments(p)
    add_override_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object (schema in the README)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        targets = parse_fractions(args.targets)
        capacities = parse_capacities(args.capacities) if args.capacities else None
        if args.horizon < 1:
            raise ValueError("--horizon must be at least 1 block")
        if args.bytes_per_token is not None and args.bytes_per_token < 1:
            raise ValueError("--bytes-per-token must be positive")
        if args.model and args.bytes_per_token:
            raise ValueError("give --model or --bytes-per-token, not both")
        geometry = geometry_from_args(args.model, args) if args.model else None
        batches, summary = load_input(args, stream=True)
        result = analyze_batches(batches(), summary, horizon=args.horizon, order=args.order)
    except (ValueError, InputError, TraceError, GeometryError) as e:
        print(f"kvset analyze: {e}", file=sys.stderr)
        return 2
    if result.accesses == 0:
        print("kvset analyze: no block access in the input", file=sys.stderr)
        return 2
    bytes_per_token = args.bytes_per_token
    if geometry is not None:
        bytes_per_token = geometry.full_attention_bytes_per_token(args.kv_dtype)
    bytes_per_block = bytes_per_token * summary.block_tokens if bytes_per_token and summary.block_tokens else None
    caps = capacities if capacities is not None else default_capacities(result.curve)
    report = analysis_json(result, targets, args.target_mode, caps, bytes_per_block)
    if geometry is not None:
        context, context_from = context_tokens_from_args(geometry, args)
        reserve = hybrid_reserve(geometry, args.concurrency, context, args.kv_dtype)
        report["model"] = {
            "name": geometry.name,
            "kv_dtype": geometry.kv_dtype(args.kv_dtype),
            "full_attention_bytes_per_token": bytes_per_token,
            "full_attention_bytes_per_block": bytes_per_block,
            "notes": list(geometry.notes),
        }
        report["hybrid_reserve"] = {**reserve.to_dict(), "context_from": context_from,
                                    "summary": reserve.summary()}  # fmt: skip
        report["hybrid_reserve_bytes"] = reserve.total_bytes
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(analysis_text(report))
    return 0


def analysis_json(
    result: AnalysisResult,
    targets,
    mode: str,
    capacities,
    bytes_per_block: int | None,
) -> dict:
    a, c, s = result.analyzer, result.curve, result.input
    bt = s.block_tokens
    out = {
        "input": s.name,
        "format": s.format,
        "block_tokens": bt,
        "order": a.order,
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
        "bytes_per_block": bytes_per_block,
        "curve": curve_rows(c, capacities, bt, bytes_per_block),
        "working_sets": working_set_rows(c, targets, mode, bt, bytes_per_block),
        "rejected_lines": s.rejects.total,
        "rejections": [{"reason": r.reason, "count": r.count, "examples": list(r.examples)} for r in s.rejects.summary()],
        "warnings": [{"reason": r.reason, "count": r.count, "examples": list(r.examples)} for r in s.warnings.summary()],
        "notes": list(s.notes),
        "seconds": {"read": round(s.read_seconds, 4), "analyze": round(result.analyze_seconds, 4)},
        "caveats": list(CAVEATS),
    }
    return out


def analysis_text(r: dict) -> str:
    bt = r["block_tokens"]
    lines = [
        f"kvset analyze: {r['input']} ({r['format']}, {bt} tokens per block, order {r['order']})",
        f"  requests {r['requests']:,}   accesses {r['accesses']:,}   distinct blocks {r['distinct_blocks']:,}"
        f"   tokens {r['tokens']:,}",
    ]
    if r["horizon_reached"]:
        lines.append(
            f"  horizon {r['horizon']:,} blocks REACHED: curve exact up to it; "
            f"{r['beyond_horizon']:,} re-references lay beyond it (misses at every capacity shown)"
        )
    else:
        lines.append(f"  horizon {r['horizon']:,} blocks, not reached: the curve is exact at every capacity")
    lines.append(
        f"  attainable hit rate (infinite cache): {percent(r['attainable_hit_rate'])} of blocks, "
        f"{percent(r['attainable_token_hit_rate'])} of tokens"
    )
    with_gib = r["bytes_per_block"] is not None
    headers = ["capacity (blocks)", "tokens"] + (["GiB"] if with_gib else []) + ["block hit rate", "token hit rate"]
    rows = []
    for row in r["curve"]:
        cells = [f"{row['capacity_blocks']:,}", f"{row['capacity_tokens']:,}" if row["capacity_tokens"] else "-"]
        if with_gib:
            cells.append(fmt_gib(row["capacity_gib"]))
        cells += [percent(row["block_hit_rate"]), percent(row["token_hit_rate"])]
        rows.append(cells)
    lines += ["", format_table(headers, rows)]
    ws = r["working_sets"]
    if ws:
        mode = ws[0]["mode"]
        explain = "share of the attainable hit rate" if mode == "coverage" else "hit rate"
        headers = ["target", "blocks", "tokens"] + (["GiB"] if with_gib else [])
        rows = []
        for w in ws:
            if w["capacity_blocks"] is None:
                cells = [target_label(w["target"]), "not reached", "-"] + (["-"] if with_gib else [])
            else:
                cells = [target_label(w["target"]), f"{w['capacity_blocks']:,}",
                         f"{w['capacity_tokens']:,}" if w["capacity_tokens"] else "-"]  # fmt: skip
                if with_gib:
                    cells.append(fmt_gib(w["capacity_gib"]))
            rows.append(cells)
        lines += ["", f"working sets ({mode}: {explain}):", format_table(headers, rows)]
    if "hybrid_reserve" in r:
        m, hr = r["model"], r["hybrid_reserve"]
        lines.append(f"  capacities in GiB for {m['name']}: {m['full_attention_bytes_per_token']:,} B of full-attention "
                     f"KV per token ({m['kv_dtype']}), {m['full_attention_bytes_per_block']:,} B per {bt}-token block")  # fmt: skip
        if r["hybrid_reserve_bytes"]:
            lines.append(f"  hybrid-layer reserve, NOT in the working sets above: {fmt_gib(r['hybrid_reserve_bytes'] / (1 << 30))}"
                         f" for {hr['concurrency']:,} running requests at {hr['context_tokens']:,} tokens of context "
                         f"({hr['summary']}); add it to a working set to size the pool")  # fmt: skip
        else:
            lines.append(f"  hybrid-layer reserve: 0 ({hr['summary']})")
    if r["rejected_lines"] or r["warnings"]:
        lines.append("")
        for rej in r["rejections"]:
            shown = "; ".join(rej["examples"][:3])
            lines.append(f"  {rej['count']:,} lines rejected: {rej['reason']}" + (f" ({shown})" if shown else ""))
        for w in r["warnings"]:
            lines.append(f"  {w['count']:,} requests kept with a warning: {w['reason']}")
    for note in r["notes"]:
        lines.append(f"  note: {note}")
    sec = r["seconds"]
    rate = r["accesses"] / sec["analyze"] / 1e6 if sec["analyze"] > 0 else float("inf")
    lines += [
        "",
        f"took {sec['read'] + sec['analyze']:.2f} s (read {sec['read']:.2f} s, analyze {sec['analyze']:.2f} s, "
        f"{rate:.1f} M accesses/s)",
        "caveats: " + " ".join(CAVEATS),
    ]
    return "\n".join(lines)
