"""`kvset verify`: the one-pass curve against a naive LRU replay per capacity."""

from __future__ import annotations

import argparse
import json
import sys
import time

from kvset.cli.flags import (
    add_analysis_arguments,
    add_input_arguments,
    add_json_argument,
    add_targets_argument,
)
from kvset.cli.inputs import InputError, load_input
from kvset.core.naive import naive_curve
from kvset.formats import TraceError
from kvset.offline import analyze_batches, keys_in_analyzed_order, verify_capacities
from kvset.quantities import parse_fractions
from kvset.report.tables import format_table, percent_cell


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check the one-pass curve against a naive LRU simulation",
                       description="Replay the trace through a plain LRU cache once per capacity (20 log-spaced "
                                   "ones plus the working-set capacities) and compare with the one-pass curve. "
                                   "Exit code 1 on any difference.")  # fmt: skip
    add_input_arguments(p)
    add_analysis_arguments(p)
    add_targets_argument(p, "working-set targets to check")
    add_json_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        targets = parse_fractions(args.targets)
        batches, summary = load_input(args)
    except (ValueError, InputError, TraceError) as e:
        print(f"kvset verify: {e}", file=sys.stderr)
        return 2
    result = analyze_batches(batches(), summary, horizon=args.horizon, order=args.order)
    if result.accesses == 0:
        print("kvset verify: no block access in the input", file=sys.stderr)
        return 2
    curve = result.curve
    caps = verify_capacities(curve, targets)
    keys, tokens = keys_in_analyzed_order(batches(), args.order)
    t0 = time.perf_counter()
    naive = naive_curve(keys.tolist(), caps, tokens.tolist())
    naive_seconds = time.perf_counter() - t0
    rows, identical = [], True
    for c in caps:
        one_b, one_t = curve.hits(c, "blocks"), curve.hits(c, "tokens")
        nb, nt = naive[c]
        same = (one_b, one_t) == (nb, nt)
        identical &= same
        rows.append({"capacity_blocks": c, "one_pass_hits": one_b, "naive_hits": nb,
                     "one_pass_token_hits": one_t, "naive_token_hits": nt, "identical": same})  # fmt: skip
    if args.json:
        print(json.dumps({"input": summary.name, "accesses": result.accesses, "capacities": rows,
                          "identical": identical, "one_pass_seconds": result.analyze_seconds,
                          "naive_seconds": naive_seconds}, indent=2))  # fmt: skip
    else:
        n = result.accesses
        table = [
            [f"{r['capacity_blocks']:,}", percent_cell(r["one_pass_hits"] / n), percent_cell(r["naive_hits"] / n),
             f"{r['one_pass_hits']:,}", f"{r['naive_hits']:,}", f"{r['one_pass_token_hits']:,}",
             f"{r['naive_token_hits']:,}", "" if r["identical"] else "DIFFERS"]
            for r in rows
        ]  # fmt: skip
        print(f"kvset verify: {summary.name} ({n:,} accesses, order {args.order}, horizon {args.horizon:,})")
        print(format_table(["capacity (blocks)", "one-pass hit rate", "naive LRU hit rate", "one-pass hits",
                            "naive hits", "one-pass token hits", "naive token hits", ""], table))  # fmt: skip
        print(f"one pass: {result.analyze_seconds:.3f} s for every capacity; "
              f"naive: {naive_seconds:.2f} s for {len(caps)} capacities")  # fmt: skip
        print(f"identical at every capacity: {'yes' if identical else 'no'}")
    return 0 if identical else 1
