"""`kvset verify`: the one-pass curve against a naive LRU replay per capacity; with --opt also Belady
MIN's one-pass curve against a heap replay of MIN per capacity."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from kvset.cli import COMMANDS
from kvset.cli.figure_flags import add_figure_arguments, option_values
from kvset.cli.flags import (
    add_analysis_arguments,
    add_input_arguments,
    add_json_argument,
    add_opt_argument,
)
from kvset.figures.base import VERIFY
from kvset.figures.inputs import TARGETS
from kvset.figures.tables import format_table, percent_cell

if TYPE_CHECKING:  # the analysis only when verifying: `kvset completion` builds this parser too
    from kvset.core.curve import HitRateCurve


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help=COMMANDS["verify"],
        description="Replay the trace through a plain LRU cache once per capacity (20 log-spaced "
        "ones plus the working-set capacities) and compare with the one-pass curve. "
        "Exit code 1 on any difference.",
    )
    add_input_arguments(p)
    add_analysis_arguments(p)
    add_figure_arguments(p, VERIFY)
    add_opt_argument(
        p,
        "also check MIN's one-pass curve against MIN replayed with a heap at the same capacities "
        "(and MIN's own working sets)",
    )
    add_json_argument(p)
    p.set_defaults(func=run)


def _compare(
    curve: HitRateCurve, naive: dict[int, tuple[int, int]], caps: list[int]
) -> tuple[list[dict], bool]:
    """The one-pass hits against the replay's at each capacity, and whether all of them agree."""
    rows, identical = [], True
    for c in caps:
        one_b, one_t = curve.hits(c, "blocks"), curve.hits(c, "tokens")
        nb, nt = naive[c]
        same = (one_b, one_t) == (nb, nt)
        identical &= same
        rows.append(
            {
                "capacity_blocks": c,
                "one_pass_hits": one_b,
                "naive_hits": nb,
                "one_pass_token_hits": one_t,
                "naive_token_hits": nt,
                "identical": same,
            }
        )
    return rows, identical


def _table(rows: list[dict], n: int, policy: str, replay: str) -> str:
    cells = [
        [
            f"{r['capacity_blocks']:,}",
            percent_cell(r["one_pass_hits"] / n),
            percent_cell(r["naive_hits"] / n),
            f"{r['one_pass_hits']:,}",
            f"{r['naive_hits']:,}",
            f"{r['one_pass_token_hits']:,}",
            f"{r['naive_token_hits']:,}",
            "" if r["identical"] else "DIFFERS",
        ]
        for r in rows
    ]
    return format_table(
        [
            "capacity (blocks)",
            "one-pass hit rate",
            f"{replay} {policy} hit rate",
            "one-pass hits",
            f"{replay} hits",
            "one-pass token hits",
            f"{replay} token hits",
            "",
        ],
        cells,
    )


def run(args: argparse.Namespace) -> int:
    # the analysis and the replays are loaded when verifying, not to build the parser (`kvset --help`)
    from kvset.cli.inputs import EXIT_PARTIAL, InputError, load_input, partial_read
    from kvset.core.naive import naive_curve, naive_min_curve
    from kvset.formats import TraceError
    from kvset.offline import analyze_batches, keys_in_analyzed_order, opt_analysis, verify_capacities

    try:
        targets = option_values(args, VERIFY).get(TARGETS)
        batches, summary = load_input(args)
    except (ValueError, InputError, TraceError) as e:
        print(f"kvset verify: {e}", file=sys.stderr)
        return 2
    result = analyze_batches(batches(), summary, horizon=args.horizon, order=args.order)
    partial = partial_read(summary, "verify", args.allow_partial)
    if partial is not None:
        print(partial, file=sys.stderr)
        if not args.allow_partial:
            return EXIT_PARTIAL
    if result.accesses == 0:
        print("kvset verify: no block access in the input", file=sys.stderr)
        return 2
    curve = result.curve
    opt = opt_analysis(batches(), args.order) if args.opt else None
    # with MIN: its own working sets (and the capacity just below each) are checked too
    caps = verify_capacities(curve, targets, also=[opt.curve] if opt is not None else ())
    keys, tokens = keys_in_analyzed_order(batches(), args.order)
    keys, tokens = keys.tolist(), tokens.tolist()
    t0 = time.perf_counter()
    rows, identical = _compare(curve, naive_curve(keys, caps, tokens), caps)
    naive_seconds = time.perf_counter() - t0
    checked: dict[str, Any] = {}
    if opt is not None:
        t0 = time.perf_counter()
        opt_rows, opt_identical = _compare(opt.curve, naive_min_curve(keys, caps, tokens), caps)
        heap_seconds = time.perf_counter() - t0
        # MIN hits at least what LRU hits at every capacity: the one-pass curves must say so too
        never_below = all(
            o["one_pass_hits"] >= r["one_pass_hits"] for o, r in zip(opt_rows, rows, strict=True)
        )
        checked = {
            "capacities": opt_rows,
            "identical": opt_identical,
            "never_below_lru": never_below,
            "one_pass_seconds": opt.seconds,
            "naive_seconds": heap_seconds,
        }
    n = result.accesses
    if args.json:
        print(
            json.dumps(
                {
                    "input": summary.name,
                    "accesses": n,
                    "capacities": rows,
                    "identical": identical,
                    "one_pass_seconds": result.analyze_seconds,
                    "naive_seconds": naive_seconds,
                    "opt": checked or None,
                },
                indent=2,
            )
        )
    else:
        print(f"kvset verify: {summary.name} ({n:,} accesses, order {args.order}, horizon {args.horizon:,})")
        print(_table(rows, n, "LRU", "naive"))
        print(
            f"one pass: {result.analyze_seconds:.3f} s for every capacity; "
            f"naive: {naive_seconds:.2f} s for {len(caps)} capacities"
        )
        print(f"identical at every capacity: {'yes' if identical else 'no'}")
        if checked:
            yes = {True: "yes", False: "no"}
            print()
            print(
                "Belady MIN: the one-pass OPT curve against MIN replayed with a heap of next uses, per capacity"
            )
            print(_table(checked["capacities"], n, "MIN", "heap"))
            print(
                f"MIN one pass: {checked['one_pass_seconds']:.3f} s for every capacity; "
                f"heap: {checked['naive_seconds']:.2f} s for {len(caps)} capacities"
            )
            print(f"MIN identical at every capacity: {yes[checked['identical']]}")
            print(f"MIN >= LRU at every capacity: {yes[checked['never_below_lru']]}")
    ok = identical and (not checked or (checked["identical"] and checked["never_below_lru"]))
    return 0 if ok else 1
