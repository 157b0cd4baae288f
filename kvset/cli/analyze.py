"""`kvset analyze`: the whole hit-rate curve and the working sets of a trace, in one pass.

The trace is read and analysed (kvset.offline), and the analyzer read into the same figures the live
monitor shows (kvset.snapshot.builder): one pipeline, one JSON schema for both.
"""

from __future__ import annotations

import argparse
import json
import sys

from kvset.cli import COMMANDS
from kvset.cli.argtypes import positive_int
from kvset.cli.distributed_flags import add_distributed_arguments, analyze_from_args, distributed_requested
from kvset.cli.figure_flags import add_figure_arguments, check_figure_options, option_values
from kvset.cli.flags import (
    add_analysis_arguments,
    add_csv_argument,
    add_input_arguments,
    add_json_argument,
    add_kv_dtype_argument,
    add_model_argument,
    add_opt_argument,
    add_override_arguments,
    add_sampling_arguments,
)
from kvset.figures import curve, principals, tiers
from kvset.figures.base import ANALYZE
from kvset.figures.inputs import CAPACITY


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analyze",
        help=COMMANDS["analyze"],
        description="Exact LRU hit-rate curve and working sets of a trace, in one pass.",
    )
    add_input_arguments(p)
    add_distributed_arguments(p)
    add_analysis_arguments(p)
    add_sampling_arguments(p)
    add_opt_argument(p, "also MIN's hit rates and working sets, and how far LRU is from it")
    p.add_argument(
        "--bytes-per-token",
        type=positive_int,
        metavar="N",
        help="full-attention KV bytes per token, to show capacities in GiB",
    )
    add_model_argument(p)
    add_kv_dtype_argument(p)
    add_figure_arguments(p, ANALYZE)
    add_override_arguments(p)
    add_json_argument(p, "print one JSON object (schema in the README)")
    add_csv_argument(
        p,
        "print the curve as CSV: one row per capacity (the same rows as the table); with --by, each "
        "principal's curves, one row per principal and capacity",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The analysis (numba kernels, the readers, the sources the flags may name) is loaded here, when
    # analysing: building the parser (`kvset --help`, completion) loads none of it.
    from kvset.cli.from_flags import geometry_from_args
    from kvset.cli.inputs import EXIT_PARTIAL, InputError, load_input, partial_read
    from kvset.core.stack_distance import Sampling
    from kvset.formats import TraceError
    from kvset.geometry.errors import GeometryError
    from kvset.offline import analysis_snapshot, analyze_batches, opt_analysis
    from kvset.report import analysis_text, curve_csv, principals_csv, snapshot_json
    from kvset.snapshot.builder import SnapshotConfig

    try:
        values = option_values(args, ANALYZE)
        if args.model and args.bytes_per_token:
            raise ValueError("give --model or --bytes-per-token, not both")
        if args.json and args.csv:
            raise ValueError("give --json or --csv, not both")
        if values.get(CAPACITY) is not None and not args.opt:
            raise ValueError("--capacity needs --opt (the policy gap at that capacity)")
        if args.opt and (args.sample is not None or args.sample_size is not None):
            raise ValueError(
                "--opt compares MIN with the exact LRU curve: not with --sample or --sample-size"
            )
        geometry = geometry_from_args(args.model, args) if args.model else None
        sized = bool(args.model or args.bytes_per_token)
        check_figure_options(values, None if sized else "--model or --bytes-per-token")
        if distributed_requested(args) and values.get(principals.BY):
            raise ValueError("--by is read on one machine: not with the distributed flags")
        if distributed_requested(args):
            result = analyze_from_args(args)  # partitions on Dask workers, merged: the same result
            summary = result.input
        else:
            # MIN takes the stream a second time, so with --opt the trace is read whole, not streamed once
            batches, summary = load_input(args, stream=not args.opt)
            # a streamed trace is read while it is analysed: its read errors surface here
            result = analyze_batches(
                batches(),
                summary,
                horizon=args.horizon,
                order=args.order,
                sampling=Sampling.of(args.sample, args.sample_size, args.seed),
                by=values.get(principals.BY),
                top_principals=values.get(principals.TOP_PRINCIPALS),
            )
            if args.opt and result.accesses:
                result.opt = opt_analysis(batches(), args.order)
    except (ValueError, InputError, TraceError, GeometryError) as e:
        print(f"kvset analyze: {e}", file=sys.stderr)
        return 2
    partial = partial_read(summary, "analyze", args.allow_partial)
    if partial is not None:
        print(partial, file=sys.stderr)
        if not args.allow_partial:
            return EXIT_PARTIAL
    if result.accesses == 0:
        print("kvset analyze: no block access in the input", file=sys.stderr)
        return 2
    config = SnapshotConfig(
        options=values,
        command=ANALYZE,
        geometry=geometry,
        kv_dtype=args.kv_dtype,
        bytes_per_token=args.bytes_per_token,
        demo=bool(args.demo),
    )
    snapshot = analysis_snapshot(result, config)
    try:  # sizes in bytes hold whole blocks only once the stream's block size is known: now
        curve.capacities_in_blocks(values, snapshot.sizes)
        tiers.check_blocks(values, snapshot.sizes)
    except ValueError as e:
        print(f"kvset analyze: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(snapshot_json(snapshot), indent=2))
    elif args.csv and values.get(principals.BY):
        print(principals_csv(snapshot), end="")
    elif args.csv:
        print(curve_csv(snapshot), end="")
    else:
        print(analysis_text(snapshot))
    return 0
