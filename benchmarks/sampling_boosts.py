"""Head boosts compared on traces and seeds that did not choose them: mean error and accesses looked at.

The boosts at R = 1 % (kvset.core.sampling.HEAD_BOOSTS) were chosen on the traces of
benchmarks/sampling.py with seeds 0-9. This checks them, beside the rule they replaced (a boost
doubling every band toward position 0, positions 0 and 1 kept whole) and any others given, on three
other workloads (and seed 7's keys cut into requests, where block positions vary and the sample
drops any boost) with seeds 10-19: the mean absolute error of the block hit rate at 20 log-spaced
capacities (points, mean and worst seed) and the share of accesses the sample handled.

    python -m benchmarks.sampling_boosts [--accesses 10000000] [--boosts 6,6,6,4,4,3,2,1 ...]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

from benchmarks.sampling import CAPACITIES, CUT_REQUEST_BLOCKS, ISSUE_SHAPE, RATE, cut_requests
from benchmarks.trace import BenchTrace, make_trace, split_batches
from kvset.core import sampling_kernel as SK
from kvset.core import sampling_rates as S
from kvset.core.analyzer import Analyzer
from kvset.core.sampling import SampledAnalyzer
from kvset.units import StreamUnits
from kvset.workload import generate

SEEDS = range(10, 20)
PREVIOUS = (8, 7, 6, 5, 4, 3, 2, 1)  # the rule before the table, at K = 8


def held_out_traces(accesses: int) -> list[tuple[str, BenchTrace]]:
    issue = generate(accesses, replace(ISSUE_SHAPE, seed=11))
    seven = make_trace(accesses, seed=7)
    return [
        ("benchmark workload, seed 7", seven),
        (
            "benchmark workload, seed 8, 64 sessions, 8 agent types",
            make_trace(accesses, seed=8, concurrency=64, agent_types=8),
        ),
        ("issue 10's shape, seed 11", BenchTrace(issue.keys, issue.timestamps, issue.request_starts, 64)),
        # not prefix-chained: every table is dropped for bands by access count, so they all agree
        (f"seed 7's keys, {CUT_REQUEST_BLOCKS}-block requests", cut_requests(seven, CUT_REQUEST_BLOCKS)),
    ]


def evaluate(boosts: tuple[int, ...], trace: BenchTrace, caps: np.ndarray, truth: np.ndarray) -> tuple:
    """(mean error, worst seed's error, share of accesses looked at) with `boosts` in place of the table."""
    saved = S.HEAD_BOOSTS
    S.HEAD_BOOSTS = boosts
    try:
        errors, looked_at = [], 0
        for seed in SEEDS:
            a = SampledAnalyzer(sample_rate=RATE, seed=seed, units=StreamUnits(trace.block_size, "format"))
            for b in split_batches(trace):
                a.feed_batch(b)
            errors.append(float(np.abs(a.curve().hit_rates(caps) - truth).mean()))
            looked_at += int(a._s.meta[SK.S_SAMPLED])
    finally:
        S.HEAD_BOOSTS = saved
    return float(np.mean(errors)), max(errors), looked_at / len(SEEDS) / trace.accesses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sampling_boosts", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--accesses", type=int, default=10_000_000, help="accesses of each trace")
    parser.add_argument(
        "--boosts", nargs="*", default=[], help="more boost tables to compare, as 6,6,6,4,4,3,2,1"
    )
    args = parser.parse_args(argv)
    tables = [("HEAD_BOOSTS", S.HEAD_BOOSTS), ("previous rule", PREVIOUS)]
    tables += [(text, tuple(int(x) for x in text.split(","))) for text in args.boosts]
    for name, trace in held_out_traces(args.accesses):
        exact = Analyzer(units=StreamUnits(trace.block_size, "format"))
        for b in split_batches(trace):
            exact.feed_batch(b)
        curve = exact.curve()
        caps = curve.log_capacities(CAPACITIES)
        truth = curve.hit_rates(caps)
        print(name)
        for label, boosts in tables:
            mae, worst, share = evaluate(boosts, trace, caps, truth)
            print(
                f"  {label:<24} {','.join(map(str, boosts)):<20} error {100 * mae:.2f} pt (worst seed "
                f"{100 * worst:.2f})  looked at {100 * share:.2f} %"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
