"""`python -m benchmarks.runs_bench`: runs of re-read blocks against the per-block kernel, on a real trace's shape.

On benchmarks.prefix_trace's trace (conversations re-sent whole, like WEKA's Claude Code traces)
and, for keys that are not prefix-chained, on the benchmark's agentic trace (benchmarks.trace),
side by side in one run, each part in its own process pinned to one core, with its CPU seconds
and peak RSS:
  gzip -dc                       inflating the prefix trace's file (Mooncake JSONL), the floor
  kvset analyze                  the command end to end on that file (runs on: the default)
  analyzer, per-block kernel     the API on the trace's keys (Analyzer(runs=False))
  analyzer, runs                 the same with runs taken at once (blocks a run, runs a second)
  Belady MIN                     the one-pass OPT histogram (kvset.core.opt) on the same keys (both traces)
The two analyzers' curves must be identical (blocks and tokens), or the run fails.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.large import run_child_rusage
from benchmarks.prefix_trace import ACCESSES, make_prefix_trace
from benchmarks.trace import BenchTrace, load_trace, make_trace, save_trace, split_batches

RANDOM_ACCESSES = 10_000_000
GOAL_SPEEDUP = 4.0
GOAL_MIN_RATE = 5e6
GOAL_VS_GZIP = 2.0


def write_mooncake(trace: BenchTrace, path: Path) -> None:
    """The trace as Mooncake JSONL (hash_ids, full 64-token blocks), gzip -6 in its own process."""
    bounds = np.append(trace.request_starts, trace.accesses)
    ms = np.round(trace.timestamps[trace.request_starts] * 1000).astype(np.int64)
    text = trace.keys.astype(str).tolist()
    with open(path, "wb") as raw:
        proc = subprocess.Popen(["gzip", "-6", "-c"], stdin=subprocess.PIPE, stdout=raw)
        assert proc.stdin is not None
        for r in range(len(trace.request_starts)):
            lo, hi = int(bounds[r]), int(bounds[r + 1])
            line = (
                f'{{"timestamp": {ms[r]}, "input_length": {trace.block_size * (hi - lo)}, '
                f'"output_length": 100, "hash_ids": [{", ".join(text[lo:hi])}]}}\n'
            )
            proc.stdin.write(line.encode())
        proc.stdin.close()
        if proc.wait() != 0:
            raise RuntimeError("gzip failed")


# -- one part in its own process ------------------------------------------------------------------
def run_analyzer(trace_dir: str, runs: bool) -> dict:
    from kvset.core import kernel_layout as KL
    from kvset.core.analyzer import Analyzer
    from kvset.units import StreamUnits

    trace = load_trace(Path(trace_dir))
    batches = split_batches(trace)
    warm = Analyzer(units=StreamUnits(trace.block_size, "format"), runs=runs)
    for batch in split_batches(trace.prefix(50_000), 1 << 13):
        warm.feed_batch(batch)
    a = Analyzer(units=StreamUnits(trace.block_size, "format"), runs=runs)
    started, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        a.feed_batch(batch)
    curve = a.curve()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    taken, in_runs = a.runs_taken
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "accesses": a.accesses,
        "runs": taken,
        "run_accesses": in_runs,
        "max_distance": curve.max_distance(),
        "compactions": int(a._t.meta[KL.M_COMPACTIONS]),
        # the whole curve, every capacity, as a digest: the two kernels' must be the same
        "block_hits": hashlib.sha256(curve.block_hits.astype(np.int64).tobytes()).hexdigest(),
        "token_hits": hashlib.sha256(curve.token_hits.astype(np.int64).tobytes()).hexdigest(),
    }


def run_min(trace_dir: str) -> dict:
    from kvset.core.opt import opt_histogram

    trace = load_trace(Path(trace_dir))
    small = trace.prefix(50_000)
    opt_histogram(small.keys, request_starts=small.request_starts).curve()
    started, cpu = time.perf_counter(), time.process_time()
    opt_histogram(trace.keys, trace.block_size, request_starts=trace.request_starts).curve()
    return {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu}


def _child(cpu: int | None, role: str, spec: dict) -> tuple[float, int, float, dict]:
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    cmd = [*pin, sys.executable, "-m", "benchmarks.runs_bench", "--child", role, json.dumps(spec)]
    took, rss, cpu_s, out = run_child_rusage(cmd)
    return took, rss, cpu_s, json.loads(out.strip().splitlines()[-1])


def _shape(trace: BenchTrace) -> str:
    distinct = len(np.unique(trace.keys))
    return (
        f"{trace.accesses:,} accesses, {distinct:,} distinct blocks, {len(trace.request_starts):,} requests "
        f"({trace.accesses / len(trace.request_starts):,.0f} blocks a request)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.runs_bench", description=__doc__.splitlines()[0])
    p.add_argument("--accesses", type=int, default=ACCESSES, help=f"prefix trace size (default {ACCESSES:,})")
    p.add_argument(
        "--random-accesses", type=int, default=RANDOM_ACCESSES, help="agentic trace size (0: skip)"
    )
    p.add_argument(
        "--cpu", type=int, default=max(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    )
    p.add_argument("--no-min", action="store_true", help="skip Belady MIN")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        role, spec = args.child[0], json.loads(args.child[1])
        result = (
            run_min(spec["trace_dir"]) if role == "min" else run_analyzer(spec["trace_dir"], role == "runs")
        )
        print(json.dumps(result))
        return 0

    load = os.getloadavg()
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start ({os.cpu_count()} cores)",
        flush=True,
    )
    rows: list[tuple[str, int, float, int, float, dict]] = []  # label, accesses, wall, rss, cpu, result
    ok = True
    figures: dict = {}
    with tempfile.TemporaryDirectory(prefix="kvset-bench-runs-") as tmp:
        traces = [("prefix-chained", make_prefix_trace(args.accesses))]
        if args.random_accesses:
            traces.append(("agentic, not prefix-chained", make_trace(args.random_accesses)))
        for name, trace in traces:
            print(f"trace {name}: {_shape(trace)}", flush=True)
            folder = Path(tmp) / name.split(",")[0]
            save_trace(trace, folder)
            spec = {"trace_dir": str(folder)}
            if name == "prefix-chained":
                gz = Path(tmp) / "prefix.jsonl.gz"
                write_mooncake(trace, gz)
                gzips = [run_child_rusage(["gzip", "-dc", str(gz)], stdout_to_null=True) for _ in range(3)]
                took, rss, cpu_s, _ = min(gzips)
                rows.append((f"{name}: gzip -dc (best of 3)", trace.accesses, took, rss, cpu_s, {}))
                analyze = [
                    run_child_rusage(
                        [sys.executable, "-m", "kvset", "analyze", str(gz), "--block-size", "64", "--json"]
                    )
                    for _ in range(2)
                ]
                took, rss, cpu_s, out = min(analyze)
                rows.append(
                    (f"{name}: kvset analyze (best of 2)", trace.accesses, took, rss, cpu_s, json.loads(out))
                )
                figures["analyze_vs_gzip"] = took / rows[-2][2]
            del trace
            both = {}
            for role in ("blocks", "runs"):
                took, rss, cpu_s, result = _child(args.cpu, role, spec)
                label = "analyzer, per-block kernel" if role == "blocks" else "analyzer, runs"
                rows.append(
                    (
                        f"{name}: {label}",
                        result["accesses"],
                        result["seconds"],
                        rss,
                        result["cpu_seconds"],
                        result,
                    )
                )
                both[role] = result
            same = all(
                both["blocks"][k] == both["runs"][k] for k in ("block_hits", "token_hits", "max_distance")
            )
            ok &= same
            r = both["runs"]
            figures[name] = {
                "speedup": both["blocks"]["seconds"] / r["seconds"],
                "cpu_speedup": both["blocks"]["cpu_seconds"] / r["cpu_seconds"],
                "identical": same,
                "blocks_per_run": r["run_accesses"] / r["runs"] if r["runs"] else 0.0,
                "runs_per_second": r["runs"] / r["seconds"],
                "share_in_runs": r["run_accesses"] / r["accesses"],
            }
            if not args.no_min:
                took, rss, cpu_s, result = _child(args.cpu, "min", spec)
                rows.append(
                    (
                        f"{name}: Belady MIN, one pass",
                        both["runs"]["accesses"],
                        result["seconds"],
                        rss,
                        result["cpu_seconds"],
                        result,
                    )
                )
                figures.setdefault("min_rates", {})[name] = (
                    both["runs"]["accesses"] / result["seconds"],
                    both["runs"]["accesses"] / result["cpu_seconds"],
                )
    print()
    print(
        f"{'part (each its own process, one core)':<58} {'work s':>7} {'CPU s':>6} {'accesses/s':>11} {'peak RSS':>9}"
    )
    for label, accesses, seconds, rss, cpu_s, _ in rows:
        print(
            f"{label:<58} {seconds:7.2f} {cpu_s:6.2f} {accesses / seconds / 1e6:8.1f} M/s {rss / 2**20:6.0f} MiB"
        )
    print("(work s: the part's own clock; CPU s: the process's, interpreter start and loading included for")
    print(" gzip and kvset analyze, the work's only for the analyzers and MIN)")
    for name, f in figures.items():
        if isinstance(f, dict) and name != "min_rates":
            print(
                f"{name}: runs {f['speedup']:.2f}x the per-block kernel ({f['cpu_speedup']:.2f}x in CPU seconds); "
                f"{100 * f['share_in_runs']:.2f} % of the accesses taken in runs, {f['blocks_per_run']:,.0f} blocks a run "
                "(beside the two per-block accesses each starts from), "
                f"{f['runs_per_second']:,.0f} runs/s; curves identical: {'yes' if f['identical'] else 'NO'}"
            )
    if "analyze_vs_gzip" in figures:
        ratio = figures["analyze_vs_gzip"]
        print(
            f"goal: kvset analyze within {GOAL_VS_GZIP:.0f}x of gzip -dc: {ratio:.2f}x {'PASS' if ratio <= GOAL_VS_GZIP else 'MISS'}"
        )
    for name, (rate, cpu_rate) in figures.get("min_rates", {}).items():
        print(
            f"goal: Belady MIN at {GOAL_MIN_RATE / 1e6:.0f} M accesses/s on the {name} trace: {rate / 1e6:.2f} M/s "
            f"({cpu_rate / 1e6:.2f} M per CPU second) {'PASS' if rate >= GOAL_MIN_RATE else 'MISS'}"
        )
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end", flush=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rows": [r[:5] for r in rows], "figures": figures, "curves_identical": ok, "load_end": load},
                indent=1,
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
