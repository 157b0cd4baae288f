"""`kvset model NAME|config.json`: a model's KV bytes per token and per block, and its hybrid reserve."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from kvset.cli import COMMANDS
from kvset.cli.figure_flags import add_figure_arguments, option_values
from kvset.cli.flags import add_json_argument, add_kv_cache_arguments, add_override_arguments
from kvset.cli.from_flags import geometry_from_args
from kvset.figures.base import MODEL
from kvset.figures.hybrid_reserve import CONCURRENCY, CONTEXT, concurrency, context_tokens, sized_for
from kvset.geometry import GeometryError, ModelGeometry, hybrid_reserve, load_preset, preset_names
from kvset.geometry.presets import PRESETS
from kvset.geometry.reserve import HybridReserve
from kvset.quantities import GIB, format_bytes

DESCRIPTION = """\
Show a model's KV geometry: bytes per cached token and per block in its full-attention layers (the
prefix cache that the hit-rate curve sizes), and the hybrid reserve: sliding-window KV and
linear-attention / SSM state that every running request holds outside the prefix cache.
MODEL is a built-in preset (see --list) or a local config.json (or a directory holding one).
"""


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "model",
        help=COMMANDS["model"],
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", nargs="?", metavar="MODEL", help="preset name or path to a config.json")
    parser.add_argument("--list", action="store_true", help="list the built-in presets")
    add_json_argument(parser, "print JSON instead of text")
    add_kv_cache_arguments(parser)
    add_figure_arguments(parser, MODEL)
    add_override_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        if args.list:
            _print_list(args, out)
            return 0
        if not args.model:
            err.write("kvset model: error: give a MODEL (preset name or config.json path), or --list\n")
            return 2
        geometry = geometry_from_args(args.model, args)
        report = build_report(geometry, args)
    except GeometryError as exc:
        err.write(f"kvset model: error: {exc}\n")
        return 2
    if args.json:
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        out.write(format_report(geometry, report))
    return 0


def build_report(geometry: ModelGeometry, args: argparse.Namespace) -> dict[str, Any]:
    """Everything `kvset model` shows, as plain data (the --json output)."""
    kv_dtype = geometry.kv_dtype(args.kv_dtype)
    values = option_values(args, MODEL)
    running = sized_for(concurrency(None, values.get(CONCURRENCY))[0])
    context, context_source = context_tokens(geometry, values.get(CONTEXT))
    reserve = hybrid_reserve(geometry, running, context, kv_dtype)
    notes = list(geometry.notes)
    if geometry.is_mla and kv_dtype.startswith("fp8"):
        notes.append(
            "fp8 MLA kernels may store scale bytes beside the latent; counted here as 1 B per element"
        )
    return {
        "model": geometry.name,
        "source": geometry.source,
        "model_type": geometry.model_type,
        "layers": geometry.describe_layers(),
        "kv_dtype": kv_dtype,
        "kv_dtype_bytes": geometry.kv_dtype_bytes(kv_dtype),
        "block_size": args.block_size,
        "full_attention_bytes_per_token": geometry.full_attention_bytes_per_token(kv_dtype),
        "full_attention_bytes_per_block": geometry.full_attention_bytes_per_block(args.block_size, kv_dtype),
        "full_attention_formula": geometry.full_attention_formula(kv_dtype),
        "concurrency": running,
        "context_tokens": context,
        "context_source": context_source,
        "hybrid_reserve_bytes": reserve.total_bytes,
        "hybrid_reserve": reserve.to_dict(),
        "geometry": geometry.to_dict(),
        "notes": notes,
    }


def _bytes(n: int) -> str:
    return f"{n:,} B" if n < 1024 else f"{format_bytes(n)} ({n:,} B)"


def format_report(geometry: ModelGeometry, report: dict[str, Any]) -> str:
    kv_dtype = report["kv_dtype"]
    lines = [
        f"{geometry.name}  ({geometry.source}"
        + (f", model_type {geometry.model_type})" if geometry.model_type else ")")
    ]
    lines.append(f"  layers            {geometry.describe_layers()}")
    if geometry.is_mla:
        lines.append(
            f"  attention         MLA: kv_lora_rank {geometry.kv_lora_rank} + qk_rope_head_dim "
            f"{geometry.qk_rope_head_dim} per token per layer"
        )
    elif geometry.kv_heads:
        lines.append(f"  attention         {geometry.kv_heads} KV heads x head dim {geometry.head_dim}")
    lines.append(f"  model dtype       {geometry.model_dtype}")
    lines.append(
        f"  KV cache          {kv_dtype} ({report['kv_dtype_bytes']} B per element), "
        f"block {report['block_size']} tokens"
    )
    lines.append("")
    lines.append("Full-attention KV (the prefix cache; working sets are sized in these bytes)")
    per_token = report["full_attention_bytes_per_token"]
    per_block = report["full_attention_bytes_per_block"]
    lines.append(f"  per token         {_bytes(per_token)}")
    lines.append(f"                    = {report['full_attention_formula']}")
    lines.append(f"  per block         {_bytes(per_block)} = {per_token:,} B x {report['block_size']} tokens")
    if per_token:
        lines.append(f"  1 GiB holds       {GIB // per_token:,} tokens = {GIB // per_block:,} blocks")
    lines.append("")
    lines.extend(_reserve_lines(geometry, report, report["hybrid_reserve"]))
    if report["notes"]:
        lines.append("")
        lines.append("Notes")
        lines.extend(f"  - {note}" for note in report["notes"])
    return "\n".join(lines) + "\n"


def _reserve_lines(geometry: ModelGeometry, report: dict[str, Any], reserve: dict[str, Any]) -> list[str]:
    lines = ["Hybrid reserve (state per running request, outside the prefix cache)"]
    if not reserve["has_hybrid_layers"]:
        lines.append("  no hybrid layers: reserve 0")
        return lines
    lines.append(f"  concurrency       {reserve['concurrency']:,} running requests")
    lines.append(
        f"  context           {reserve['context_tokens']:,} tokens per request ({report['context_source']})"
    )
    sw = reserve["sliding_window"]
    if sw["layers"]:
        b = report["kv_dtype_bytes"]
        lines.append(
            f"  sliding window    {sw['layers']} layers x 2 x {geometry.kv_heads} KV heads x {geometry.head_dim} x "
            f"{b} B x {sw['tokens_per_request']:,} tokens = {format_bytes(sw['bytes_per_request'])} per request"
        )
    for key, label in (("linear_attention", "linear attention"), ("mamba", "Mamba state")):
        part = reserve[key]
        if part["layers"]:
            lines.append(
                f"  {label:<17} {part['layers']} layers x {_bytes(part['bytes_per_layer'])} = "
                f"{format_bytes(part['bytes_per_request'])} per request"
            )
    if reserve["linear_attention"]["layers"] or reserve["mamba"]["layers"]:
        lines.append(
            f"  state dtypes      conv {reserve['conv_state_dtype']}, recurrent {reserve['ssm_state_dtype']}"
        )
        lines.extend(f"                    {formula}" for formula in geometry.state_formulas)
    lines.append(f"  per request       {_bytes(reserve['per_request_bytes'])}")
    lines.append(
        f"  total             {_bytes(reserve['total_bytes'])} = per request x {reserve['concurrency']:,}"
    )
    return lines


def _print_list(args: argparse.Namespace, out: TextIO) -> None:
    rows = []
    for name in preset_names():
        geometry = load_preset(name)
        kv_dtype = geometry.kv_dtype(args.kv_dtype)
        reserve: HybridReserve = hybrid_reserve(geometry, 1, geometry.sliding_window or 0, kv_dtype)
        rows.append(
            {
                "name": name,
                "source": PRESETS[name].repo,
                "family": PRESETS[name].family,
                "layers": geometry.describe_layers(),
                "kv_dtype": kv_dtype,
                "full_attention_bytes_per_token": geometry.full_attention_bytes_per_token(kv_dtype),
                "full_attention_bytes_per_block": geometry.full_attention_bytes_per_block(
                    args.block_size, kv_dtype
                ),
                "block_size": args.block_size,
                "has_hybrid_layers": geometry.has_hybrid_layers,
                # Context-independent part: a full window and the fixed linear / SSM state.
                "hybrid_bytes_per_request_full_window": reserve.per_request_bytes,
            }
        )
    if args.json:
        out.write(json.dumps({"presets": rows}, indent=2) + "\n")
        return
    header = f"{'NAME':<22} {'B/TOKEN':>10} {'':<11} {'RESERVE/REQ':>11}  {'LAYERS':<64} SOURCE"
    out.write(header + "\n")
    for r in rows:
        per_token = r["full_attention_bytes_per_token"]
        reserve_text = (
            format_bytes(r["hybrid_bytes_per_request_full_window"]) if r["has_hybrid_layers"] else "-"
        )
        out.write(
            f"{r['name']:<22} {per_token:>10,} {'(' + format_bytes(per_token) + ')':<11} {reserve_text:>11}  "
            f"{r['layers']:<64} {r['source']}\n"
        )
    out.write(
        f"\nB/TOKEN: full-attention KV per cached token at KV dtype {args.kv_dtype} (auto = the model's dtype). "
        "RESERVE/REQ: hybrid state per running request with a full sliding window.\n"
    )
