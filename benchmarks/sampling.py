"""`make bench`, sampling: the exact analyzer against the sampled one on the same keys, side by side.

For each trace: accesses per second and memory of the exact analyzer and of the sampled one at rate
1 % (runs interleaved, medians), then the error of the sampled curve against the exact one: mean and
worst absolute difference of the block hit rate at 20 log-spaced capacities, for several seeds, beside
plain SHARDS (the same hash filter, distances scaled by 1/R, hits over sampled accesses) and a fixed-size
sample of as many blocks as the rate-1 % one tracked. The traces: the benchmark's agentic workload, an
agentic workload of issue 10's shape (64-token blocks, long sessions, 8k-token system prompts), the
real Mooncake FAST'25 trace of tests/fixtures (small: 44k blocks, so 1 % of them is 440), and the
benchmark's keys cut into 32-block requests (not prefix-chained: the sample drops the head boost).

Each timed run is a fresh process pinned to one core (memory is its peak RSS added, as in
benchmarks.contenders), exact and sampled runs interleaved; the errors are computed in this process.

    python -m benchmarks.sampling [--trace-dir DIR] [--cpu N] [--seeds 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.memory import PeakMemory
from benchmarks.trace import BenchTrace, load_trace, make_trace, save_trace, split_batches
from kvset.core.analyzer import Analyzer
from kvset.core.sampling import SampledAnalyzer
from kvset.core.sampling_filter import sample_filter
from kvset.core.stack_distance import Sampling, new_analyzer
from kvset.formats import read_trace
from kvset.units import StreamUnits
from kvset.workload import WorkloadConfig, generate

ROOT = Path(__file__).resolve().parent.parent
MOONCAKE = ROOT / "tests" / "fixtures" / "traces" / "mooncake_fast25_synthetic_trace.jsonl"
RATE = 0.01
CAPACITIES = 20
GOAL_MAE = 0.005  # mean absolute error of the block hit rate, averaged over seeds
GOAL_SPEEDUP = 10.0
ISSUE_SHAPE_ACCESSES = 10_000_000
CUT_REQUEST_BLOCKS = 32  # the benchmark's keys cut into requests of this many blocks: not prefix-chained
# Agentic sessions as issue 10 describes its real trace: 64-token blocks, long contexts re-sent each
# turn (an 8k-token system prompt per agent type, tool results of 0.5-6k tokens, 30 turns a session).
ISSUE_SHAPE = WorkloadConfig(
    seed=10,
    concurrency=64,
    agent_types=8,
    prefix_blocks=128,
    mean_turns=30.0,
    tool_blocks=(8, 96),
    reply_blocks=(1, 8),
    documents=50_000,
    document_blocks=(16, 256),
    document_zipf=1.1,
    document_share=0.3,
    block_size=64,
    requests_per_second=20.0,
)


@dataclass
class Run:
    seconds: float
    cpu_seconds: float  # this process's CPU time: on a shared machine, less moved by the others' load
    rss_bytes: int
    state_bytes: int
    analyzer: object
    curve: object


def _timed(make, batches) -> Run:
    gc.collect()
    mem = PeakMemory()
    mem.start()
    started, cpu = time.perf_counter(), time.process_time()
    a = make()
    for b in batches:
        a.feed_batch(b)
    curve = a.curve()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return Run(seconds, cpu, mem.delta_bytes(), a.memory_bytes(), a, curve)


def _errors(rates: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    diff = np.abs(rates - truth)
    return float(diff.mean()), float(diff.max())


def plain_shards(trace: BenchTrace, rate: float, seed: int, capacities: np.ndarray) -> np.ndarray:
    """SHARDS as published: the kept accesses through the exact analyzer, distances times 1/R, hits
    over kept accesses."""
    keep = sample_filter(trace.keys, rate, seed)
    d = Analyzer().feed(trace.keys[keep], timestamps=0.0, return_distances=True)
    scaled = np.sort(d[d > 0]) / rate
    return np.searchsorted(scaled, capacities, side="right") / max(1, int(keep.sum()))


def _make(kind: str, block_size: int):
    units = StreamUnits(block_size, "format")
    return new_analyzer(units, sampling=None if kind == "exact" else Sampling(rate=RATE, seed=0))


def run_one(kind: str, trace_dir: Path) -> dict:
    """One timed run in this (fresh) process: the whole trace in the reader's batches, then the curve."""
    trace = load_trace(trace_dir)
    batches = split_batches(trace)  # views, made before the clock starts
    head = int(np.searchsorted(trace.request_starts, 50_000))
    warm = split_batches(
        BenchTrace(
            trace.keys[: trace.request_starts[head] if head < len(trace.request_starts) else trace.accesses],
            trace.timestamps,
            trace.request_starts[:head],
            trace.block_size,
        ),
        1 << 13,
    )
    _timed(lambda: _make(kind, trace.block_size), warm)  # compiles and loads the JIT before the clock
    run = _timed(lambda: _make(kind, trace.block_size), batches)
    sample = run.curve.sample
    return {
        "seconds": run.seconds,
        "cpu_seconds": run.cpu_seconds,
        "rss_peak_delta_bytes": run.rss_bytes,
        "state_bytes": run.state_bytes,
        "tracked_blocks": run.analyzer.tracked_blocks,
        "tracked_share": sample.tracked_share if sample else 1.0,
    }


def spawn(kind: str, trace_dir: Path, cpu: int | None) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    pin = [] if cpu is None else ["--cpu", str(cpu)]
    cmd = [sys.executable, "-m", "benchmarks.sampling", "--one", kind, "--trace-dir", str(trace_dir), *pin]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the {kind} run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(
    name: str, trace: BenchTrace, trace_dir: Path, seeds: int, repeat: int, cpu: int | None, progress=print
) -> dict:
    exact_runs, sampled_runs = [], []
    for i in range(repeat):
        progress(f"  {name}: timed run {i + 1}/{repeat}")
        exact_runs.append(spawn("exact", trace_dir, cpu))
        sampled_runs.append(spawn("sampled", trace_dir, cpu))
    progress(f"  {name}: errors over {seeds} seeds")
    batches = split_batches(trace)
    units = StreamUnits(trace.block_size, "format")
    exact = _timed(lambda: Analyzer(units=units), batches)
    caps = exact.curve.log_capacities(CAPACITIES)
    truth = exact.curve.hit_rates(caps)
    sampled, plain, fixed, covered, boosted = [], [], [], [], []
    size = sampled_runs[0]["tracked_blocks"]
    for seed in range(seeds):
        curve = _timed(lambda s=seed: SampledAnalyzer(sample_rate=RATE, seed=s, units=units), batches).curve
        rates = curve.hit_rates(caps)
        sampled.append(_errors(rates, truth))
        boosted.append(curve.sample.head_boost)
        covered.append(float(np.mean(np.abs(rates - truth) <= 2 * curve.hit_rate_stderrs(caps) + 1e-12)))
        plain.append(_errors(plain_shards(trace, RATE, seed, caps), truth))
        fixed.append(
            _errors(
                _timed(
                    lambda s=seed: SampledAnalyzer(sample_size=size, seed=s, units=units), batches
                ).curve.hit_rates(caps),
                truth,
            )
        )
    exact_s = statistics.median(r["seconds"] for r in exact_runs)
    sampled_s = statistics.median(r["seconds"] for r in sampled_runs)
    exact_cpu = statistics.median(r["cpu_seconds"] for r in exact_runs)
    sampled_cpu = statistics.median(r["cpu_seconds"] for r in sampled_runs)
    return {
        "trace": name,
        "accesses": trace.accesses,
        "distinct_blocks": exact.analyzer.first_time,
        "rate": RATE,
        "seeds": seeds,
        "capacities": [int(c) for c in caps],
        "exact": {
            "seconds": exact_s,
            "accesses_per_second": trace.accesses / exact_s,
            "rss_peak_delta_bytes": statistics.median(r["rss_peak_delta_bytes"] for r in exact_runs),
            "state_bytes": exact_runs[0]["state_bytes"],
            "runs": exact_runs,
        },
        "sampled": {
            "seconds": sampled_s,
            "accesses_per_second": trace.accesses / sampled_s,
            "rss_peak_delta_bytes": statistics.median(r["rss_peak_delta_bytes"] for r in sampled_runs),
            "state_bytes": sampled_runs[0]["state_bytes"],
            "runs": sampled_runs,
            "tracked_blocks": size,
            "tracked_share": sampled_runs[0]["tracked_share"],
            "mae": float(np.mean([e[0] for e in sampled])),
            "worst": max(e[1] for e in sampled),
            "mae_per_seed": [e[0] for e in sampled],
            "within_2_stderr": float(np.mean(covered)),
            "head_boost": all(boosted),  # False: block positions vary, bands by access count
        },
        "plain_shards": {
            "mae": float(np.mean([e[0] for e in plain])),
            "worst": max(e[1] for e in plain),
            "mae_per_seed": [e[0] for e in plain],
        },
        "fixed_size": {
            "sample_size": size,
            "mae": float(np.mean([e[0] for e in fixed])),
            "worst": max(e[1] for e in fixed),
        },
        "speedup": exact_s / sampled_s,
        "speedup_cpu": exact_cpu / sampled_cpu,
    }


def cut_requests(trace: BenchTrace, blocks: int) -> BenchTrace:
    """The same keys cut into requests of `blocks` accesses: not prefix-chained, as a generic cache
    trace or a stream cut into fixed-size requests, so a block comes back at any position."""
    starts = np.arange(0, trace.accesses, blocks, dtype=np.int64)
    return BenchTrace(trace.keys, trace.timestamps, starts, trace.block_size)


def traces(trace_dir: Path | None, accesses: int) -> list[tuple[str, BenchTrace]]:
    bench = load_trace(trace_dir) if trace_dir else make_trace(accesses)
    issue = generate(ISSUE_SHAPE_ACCESSES, ISSUE_SHAPE)
    real = read_trace(MOONCAKE)
    return [
        ("agentic, the benchmark trace", bench),
        ("agentic, issue 10's shape", BenchTrace(issue.keys, issue.timestamps, issue.request_starts, 64)),
        (
            "Mooncake FAST'25 trace (real)",
            BenchTrace(real.keys, real.access_timestamps(), real.request_starts, real.block_size),
        ),
        ("agentic keys, 32-block requests", cut_requests(bench, CUT_REQUEST_BLOCKS)),
    ]


def _pt(x: float) -> str:
    return f"{100 * x:.2f}"


def report_lines(results: list[dict]) -> list[str]:
    lines = [
        f"{'trace':<31} {'accesses':>11} {'exact acc/s':>12} {'sampled acc/s':>14} {'speedup':>8} {'(CPU)':>6} "
        f"{'peak RSS+ exact / sampled':>26} {'state exact / sampled':>22} {'tracked':>8}"
    ]
    for r in results:
        e, s = r["exact"], r["sampled"]
        lines.append(
            f"{r['trace']:<31} {r['accesses']:>11,} {e['accesses_per_second'] / 1e6:>10.1f} M "
            f"{s['accesses_per_second'] / 1e6:>12.1f} M {r['speedup']:>7.1f}x {r['speedup_cpu']:>5.1f}x "
            f"{e['rss_peak_delta_bytes'] / 2**20:>11.1f} / {s['rss_peak_delta_bytes'] / 2**20:>6.1f} MiB "
            f"{e['state_bytes'] / 2**20:>9.1f} / {s['state_bytes'] / 2**20:>5.1f} MiB "
            f"{100 * s['tracked_share']:>7.1f}%"
        )
    lines += [
        "",
        f"error of the block hit rate at {CAPACITIES} log-spaced capacities, rate {100 * RATE:g} %, "
        f"points: mean over seeds (worst capacity of any seed)",
    ]
    lines.append(
        f"{'trace':<31} {'sampled':>16} {'plain SHARDS':>16} {'fixed size':>22} {'within ±2 s.e.':>15} "
        f"{'head boost':>10}"
    )
    for r in results:
        s, p, f = r["sampled"], r["plain_shards"], r["fixed_size"]
        lines.append(
            f"{r['trace']:<31} {_pt(s['mae']):>7} ({_pt(s['worst']):>6}) {_pt(p['mae']):>7} "
            f"({_pt(p['worst']):>6}) {_pt(f['mae']):>6} ({_pt(f['worst']):>5}) S={f['sample_size']:<6,} "
            f"{100 * s['within_2_stderr']:>14.0f}% {'kept' if s['head_boost'] else 'dropped':>10}"
        )
    return lines


def goals(results: list[dict]) -> list[tuple[str, str, str, bool]]:
    out = []
    for r in results:
        out.append(
            (
                f"sampled MAE, {r['trace']}",
                f"{_pt(r['sampled']['mae'])} pt",
                f"<= {_pt(GOAL_MAE)} pt",
                r["sampled"]["mae"] <= GOAL_MAE,
            )
        )
    for r in results[:2]:  # the real trace is too small for speed to mean anything
        out.append(
            (
                f"sampled vs exact accesses/s, {r['trace']}",
                f"{r['speedup']:.1f}x",
                f">= {GOAL_SPEEDUP:g}x",
                r["speedup"] >= GOAL_SPEEDUP,
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sampling", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--trace-dir", type=Path, help="the benchmark trace saved by benchmarks.run (else generated)"
    )
    parser.add_argument(
        "--accesses", type=int, default=10_000_000, help="benchmark trace length when generated"
    )
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the sample (errors are averaged)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each analyzer, interleaved")
    parser.add_argument("--cpu", type=int, help="the core to pin to")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--one", choices=("exact", "sampled"), help=argparse.SUPPRESS
    )  # a timed run (internal)
    args = parser.parse_args(argv)
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    if args.one:
        print(json.dumps(run_one(args.one, args.trace_dir)))
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="kvset-sampling-") as tmp:
        for k, (name, trace) in enumerate(traces(args.trace_dir, args.accesses)):
            trace_dir = Path(tmp) / f"trace{k}"
            save_trace(trace, trace_dir)
            results.append(
                measure(
                    name,
                    trace,
                    trace_dir,
                    args.seeds,
                    args.repeat,
                    args.cpu,
                    progress=lambda m: print(m, file=sys.stderr, flush=True),
                )
            )
    for line in report_lines(results):
        print(line)
    print()
    print(
        "speedup: median wall time of the exact runs over the sampled ones' (CPU: the same with the process's CPU time)"
    )
    print(f"{'goal (sampling)':<62} {'measured':>10} {'goal':>10}  result")
    for goal, measured, target, passed in goals(results):
        print(f"{goal:<62} {measured:>10} {target:>10}  {'PASS' if passed else 'MISS'}")
    if args.json:
        payload = {
            "results": results,
            "goals": [{"goal": g, "measured": m, "target": t, "passed": p} for g, m, t, p in goals(results)],
        }
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
