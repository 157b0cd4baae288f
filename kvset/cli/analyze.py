"""`kvset analyze`: the whole hit-rate curve and the working sets of a trace, in one pass."""

from __future__ import annotations

import argparse
import json
import sys

from kvset.cli.figure_flags import add_figure_arguments, option_values
from kvset.cli.flags import (
    add_analysis_arguments,
    add_capacities_argument,
    add_csv_argument,
    add_input_arguments,
    add_json_argument,
    add_kv_dtype_argument,
    add_model_argument,
    add_opt_argument,
    add_override_arguments,
    add_reserve_arguments,
    add_sampling_arguments,
    add_tier_arguments,
)
from kvset.cli.from_flags import context_tokens_from_args, geometry_from_args
from kvset.cli.inputs import InputError, load_input
from kvset.cli.tier_flags import tier_request_from_args
from kvset.core.tiers import plan_tiers, tier_blocks
from kvset.figures.base import ANALYZE
from kvset.figures.inputs import CAPACITY, TARGET_MODE, TARGETS
from kvset.formats import TraceError
from kvset.geometry.errors import GeometryError
from kvset.geometry.reserve import hybrid_reserve
from kvset.offline import analyze_batches, opt_analysis
from kvset.quantities import parse_sizes
from kvset.report.as_csv import curve_rows_csv
from kvset.report.as_json import analysis_json
from kvset.report.as_text import analysis_text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analyze",
        help="hit rate at every capacity and the working sets of a trace",
        description="Exact LRU hit-rate curve and working sets of a trace, in one pass.",
    )
    add_input_arguments(p)
    add_analysis_arguments(p)
    add_sampling_arguments(p)
    add_figure_arguments(p, ANALYZE)
    add_capacities_argument(p)
    add_tier_arguments(p)
    add_opt_argument(p, "also MIN's hit rates and working sets, and how far LRU is from it")
    p.add_argument(
        "--bytes-per-token",
        type=int,
        metavar="N",
        help="full-attention KV bytes per token, to show capacities in GiB",
    )
    add_model_argument(p)
    add_kv_dtype_argument(p)
    add_reserve_arguments(p)
    add_override_arguments(p)
    add_json_argument(p, "print one JSON object (schema in the README)")
    add_csv_argument(p, "print the curve as CSV: one row per capacity (the same rows as the table)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        values = option_values(args, ANALYZE)
        targets, target_mode, capacity = values.get(TARGETS), values.get(TARGET_MODE), values.get(CAPACITY)
        if args.bytes_per_token is not None and args.bytes_per_token < 1:
            raise ValueError("--bytes-per-token must be positive")
        if args.model and args.bytes_per_token:
            raise ValueError("give --model or --bytes-per-token, not both")
        if args.json and args.csv:
            raise ValueError("give --json or --csv, not both")
        if capacity is not None and not args.opt:
            raise ValueError("--capacity needs --opt (the policy gap at that capacity)")
        if args.opt and (args.sample is not None or args.sample_size is not None):
            raise ValueError(
                "--opt compares MIN with the exact LRU curve: not with --sample or --sample-size"
            )
        geometry = geometry_from_args(args.model, args) if args.model else None
        sized = bool(args.model or args.bytes_per_token)
        capacities = parse_sizes(args.capacities, "capacity") if args.capacities else None
        if capacities is not None and capacities[1] == "bytes" and not sized:
            raise ValueError(
                f"--capacities {args.capacities}: sizes in bytes need the KV bytes per block; "
                "give --model or --bytes-per-token"
            )
        tiers = tier_request_from_args(args, sized, "--model or --bytes-per-token")
        # MIN takes the stream a second time, so with --opt the trace is read whole, not streamed once
        batches, summary = load_input(args, stream=not args.opt)
        # a streamed trace is read while it is analysed: its read errors surface here
        result = analyze_batches(
            batches(),
            summary,
            horizon=args.horizon,
            order=args.order,
            sample_rate=args.sample,
            sample_size=args.sample_size,
            seed=args.seed,
        )
        if args.opt and result.accesses:
            result.opt = opt_analysis(batches(), args.order)
    except (ValueError, InputError, TraceError, GeometryError) as e:
        print(f"kvset analyze: {e}", file=sys.stderr)
        return 2
    if result.accesses == 0:
        print("kvset analyze: no block access in the input", file=sys.stderr)
        return 2
    bytes_per_token = args.bytes_per_token
    reserve = context_from = None
    if geometry is not None:
        bytes_per_token = geometry.full_attention_bytes_per_token(args.kv_dtype)
        context, context_from = context_tokens_from_args(geometry, args)
        reserve = hybrid_reserve(geometry, args.concurrency, context, args.kv_dtype)
    bytes_per_block = (
        bytes_per_token * summary.block_tokens if bytes_per_token and summary.block_tokens else None
    )
    caps = None  # the reports' default: log-spaced, the knee included
    if capacities is not None:
        blocks = tier_blocks(*capacities, bytes_per_block)  # sizes in bytes: the whole blocks that fit
        if blocks is None or 0 in blocks:
            print(
                f"kvset analyze: --capacities {args.capacities}: every capacity must hold at least one block "
                f"of {bytes_per_block or 0:,} B",
                file=sys.stderr,
            )
            return 2
        caps = sorted(set(blocks))
    plan = None
    if tiers is not None:
        blocks = tier_blocks(tiers.sizes, tiers.unit, bytes_per_block)
        if blocks is None or 0 in blocks:
            print(
                f"kvset analyze: --tiers {args.tiers}: every tier must hold at least one block of "
                f"{bytes_per_block or 0:,} B",
                file=sys.stderr,
            )
            return 2
        plan = plan_tiers(result.curve, blocks, tiers.mode, tiers.next_target, target_mode)
    report = analysis_json(
        result,
        targets,
        target_mode,
        caps,
        bytes_per_block,
        geometry=geometry,
        kv_dtype=args.kv_dtype,
        reserve=reserve,
        context_from=context_from,
        tiers=plan,
        gap_capacity=capacity,
    )
    if args.json:
        print(json.dumps(report, indent=2))
    elif args.csv:
        knee = report["knee"]
        print(
            curve_rows_csv(
                report["curve"], knee and knee["capacity_blocks"], estimate=report["estimate"] is not None
            ),
            end="",
        )
    else:
        print(analysis_text(report))
    return 0
