"""`make bench` / `python -m benchmarks`: the exact analyzer against a pure-Python baseline and libCacheSim.

One trace, three contenders, each run `--repeat` times in a fresh process pinned to one core,
the runs interleaved (analyzer, Python, libCacheSim, analyzer, ...) so that the load of a shared
machine falls on all of them alike. Ratios use the median run of each. Then the trace readers,
sampling, Belady MIN, runs of re-read blocks and kvset-top's CPU and key latency in tmux
(benchmarks/tui_bench.py; skipped without tmux or with --no-tui), each with its goals. The results
go to stdout and to benchmarks/results/latest.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.contenders import analyzer_histogram
from benchmarks.trace import (
    ACCESSES,
    BenchTrace,
    log_capacities,
    make_trace,
    save_trace,
    shape_of,
    write_oracle_general,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
PYTHON_PREFIX = 1_000_000

GOAL_RATE = 6_000_000
GOAL_VS_PYTHON = 20.0
GOAL_VS_LIBCACHESIM = 10.0
GOAL_BYTES_PER_BLOCK = 150.0
GOAL_TUI_LIVE_PCT = 3.0
GOAL_TUI_PAUSED_PCT = 0.5
GOAL_KEY_MS = 50
TUI_SECONDS = 15.0  # each scenario's CPU window (--tui-seconds)


def tui_bench_args(seconds: float) -> tuple[str, ...]:
    """tui_bench.py's arguments: both scenarios, a warm-up of at most 5 s before each window."""
    warmup = min(5.0, seconds)
    return (
        "--seconds",
        f"{seconds:g}",
        "--warmup",
        f"{warmup:g}",
        "--presses",
        "10",
        "--scenarios",
        "idle-paused,live",
    )


def default_cpu() -> int | None:
    if not hasattr(os, "sched_getaffinity"):
        return None
    return max(os.sched_getaffinity(0))  # the last core: cpu 0 takes most interrupts


def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for mod in ("numpy", "numba", "libcachesim"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            versions[mod] = None
    return {
        "cpu_model": model or platform.processor(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
    }


def libcachesim_available() -> bool:
    return importlib.util.find_spec("libcachesim") is not None


def spawn(name: str, spec: dict) -> dict:
    """Run one contender in a fresh interpreter (benchmarks.contenders) and return its result."""
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "benchmarks.contenders", name, json.dumps(spec)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the {name} run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_sampling_benchmark(trace: BenchTrace, cpu: int | None) -> tuple[list[str], dict | None]:
    """Exact against sampled (benchmarks/sampling.py) on this trace and two others, same core."""
    with tempfile.TemporaryDirectory(prefix="kvset-bench-sampling-") as tmp:
        save_trace(trace, Path(tmp) / "trace")
        out = Path(tmp) / "sampling.json"
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.sampling",
            "--trace-dir",
            str(Path(tmp) / "trace"),
            "--json",
            str(out),
        ]
        cmd += [] if cpu is None else ["--cpu", str(cpu)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            return [
                f"sampling.py failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"
            ], None
        return proc.stdout.rstrip().splitlines(), json.loads(out.read_text())


def run_opt_benchmark(
    cpu: int | None, sizes: str = "1e6,1e7", heap_up_to: str = "1e6"
) -> tuple[list[str], list | None]:
    """Belady MIN's one pass against the LRU analyzer and MIN heap replays (benchmarks/opt_bench.py),
    same core; the heap replays on the smaller trace only (on 1e7 accesses each takes about a minute)."""
    with tempfile.TemporaryDirectory(prefix="kvset-bench-opt-") as tmp:
        out = Path(tmp) / "opt.json"
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.opt_bench",
            "--sizes",
            sizes,
            "--heap-up-to",
            heap_up_to,
            "--json",
            str(out),
        ] + ([] if cpu is None else ["--cpu", str(cpu)])
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not out.exists():
            return [
                f"opt_bench.py failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"
            ], None
        return proc.stdout.rstrip().splitlines(), json.loads(out.read_text())


def run_runs_benchmark(cpu: int | None) -> tuple[list[str], dict | None]:
    """Runs of re-read blocks against the per-block kernel on a real trace's shape (benchmarks/runs_bench.py)."""
    with tempfile.TemporaryDirectory(prefix="kvset-bench-runs-") as tmp:
        out = Path(tmp) / "runs.json"
        cmd = [sys.executable, "-m", "benchmarks.runs_bench", "--json", str(out)]
        cmd += [] if cpu is None else ["--cpu", str(cpu)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        if not out.exists():
            return [
                f"runs_bench.py failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"
            ], None
        return proc.stdout.rstrip().splitlines(), json.loads(out.read_text())


def run_tui_benchmark(seconds: float) -> tuple[list[str], list[dict] | None, list[Goal]]:
    """kvset-top --demo in a tmux pane (benchmarks/tui_bench.py): CPU live and paused, key latency."""
    if shutil.which("tmux") is None:
        return ["tui_bench.py skipped: tmux is not installed"], None, []
    cmd = [sys.executable, str(ROOT / "benchmarks" / "tui_bench.py"), *tui_bench_args(seconds), "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return (
            [f"tui_bench.py failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"],
            None,
            [],
        )
    results = json.loads(proc.stdout)
    lines = [
        f"{r['scenario']:<12} CPU {r['cpu_process_pct']:>5.1f} % of a core (UI thread {r['cpu_ui_thread_pct']:.1f} %), "
        f"key press to changed screen {r.get('key_latency_ms_median', '-')} ms median"
        for r in results
    ]
    by_name = {r["scenario"]: r for r in results}
    goals = []
    for name, label, limit in (
        ("live", "kvset-top --demo live, CPU of the process", GOAL_TUI_LIVE_PCT),
        ("idle-paused", "kvset-top --demo paused, CPU of the process", GOAL_TUI_PAUSED_PCT),
    ):
        if name in by_name:
            cpu = by_name[name]["cpu_process_pct"]
            goals.append(Goal(label, f"{cpu:.1f} %", f"< {limit:g} %", cpu < limit))
    latencies = [r["key_latency_ms_median"] for r in results if "key_latency_ms_median" in r]
    if latencies:
        worst = max(latencies)
        goals.append(
            Goal(
                "kvset-top key press, median (worst scenario)",
                f"{worst:.0f} ms",
                f"< {GOAL_KEY_MS} ms",
                worst < GOAL_KEY_MS,
            )
        )
    return lines, results, goals


def run_parse_benchmark(cpu: int | None, accesses: int) -> list[str]:
    """The trace readers' throughput (benchmarks/trace_parse.py), pinned to the same core."""
    script = ROOT / "benchmarks" / "trace_parse.py"
    pin = f"os.sched_setaffinity(0, {{{cpu}}}); " if cpu is not None else ""
    code = (
        f"import os, runpy, sys; {pin}sys.argv = {[str(script), '--accesses', str(accesses)]!r}; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return [f"trace_parse.py failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"]
    return proc.stdout.rstrip().splitlines()


@dataclass
class Runs:
    analyzer: list[dict] = field(default_factory=list)
    python: list[dict] = field(default_factory=list)
    libcachesim: list[dict] = field(default_factory=list)


def measure(
    trace: BenchTrace,
    capacities: list[int],
    python_prefix: int,
    repeat: int,
    cpu: int | None,
    with_libcachesim: bool,
    progress=print,
) -> Runs:
    """Every contender `repeat` times, interleaved, each in its own pinned process."""
    runs = Runs()
    with tempfile.TemporaryDirectory(prefix="kvset-bench-") as tmp:
        tdir = Path(tmp)
        save_trace(trace, tdir / "trace")
        oracle = tdir / "trace.oracleGeneral.bin"
        if with_libcachesim:
            write_oracle_general(trace, oracle)
        base = {"cpu": cpu, "trace_dir": str(tdir / "trace")}
        for i in range(repeat):
            progress(f"run {i + 1}/{repeat}: analyzer")
            runs.analyzer.append(
                spawn("analyzer", {**base, "capacities": capacities, "prefix_accesses": python_prefix})
            )
            progress(f"run {i + 1}/{repeat}: pure Python")
            runs.python.append(spawn("python", {**base, "prefix_accesses": python_prefix}))
            if with_libcachesim:
                progress(f"run {i + 1}/{repeat}: libCacheSim x {len(capacities)}")
                spec = {
                    "cpu": cpu,
                    "oracle_path": str(oracle),
                    "accesses": trace.accesses,
                    "capacities": capacities,
                }
                runs.libcachesim.append(spawn("libcachesim", spec))
    return runs


def spread(runs: list[dict], key: str, best=max) -> dict:
    values = [r[key] for r in runs]
    return {"best": best(values), "median": statistics.median(values), "runs": values}


def check(trace: BenchTrace, runs: Runs, python_prefix: int) -> dict:
    """Correctness guards: identical histograms and hit counts, or the figures mean nothing.

    Takes the Python baseline's histograms out of `runs` (they are large and checked here).
    """
    hists = [r.pop("histogram") for r in runs.python]
    ref_hist, ref_first = analyzer_histogram(trace.prefix(python_prefix))
    python_same = all(h == ref_hist for h in hists) and all(
        r["first_accesses"] == ref_first for r in runs.python
    )
    hits = runs.analyzer[0]["hits"]
    result = {
        "python_histogram_equals_analyzer": python_same,
        "analyzer_hits_stable": all(r["hits"] == hits for r in runs.analyzer),
        "libcachesim_hits_equal_analyzer": None,
    }
    if runs.libcachesim:
        result["libcachesim_hits_equal_analyzer"] = all(
            r["hits"] == hits and r["reader_requests"] == trace.accesses for r in runs.libcachesim
        )
    return result


@dataclass
class Goal:
    goal: str
    measured: str
    target: str
    passed: bool

    @property
    def result(self) -> str:
        return "PASS" if self.passed else "MISS"


def summarize(trace: BenchTrace, runs: Runs) -> tuple[dict, list[Goal]]:
    a, p, lc = runs.analyzer, runs.python, runs.libcachesim
    a_rate = spread(a, "accesses_per_second")
    a_total = spread(a, "total_seconds", best=min)
    a_prefix_rate = spread(a, "prefix_accesses_per_second")
    p_rate = spread(p, "accesses_per_second")
    vs_python = a_rate["median"] / p_rate["median"]
    vs_python_same = a_prefix_rate["median"] / p_rate["median"]
    bytes_per_block = max(r["state_bytes_per_block"] for r in a)
    figures: dict = {
        "analyzer_accesses_per_second": a_rate,
        "analyzer_feed_seconds": spread(a, "feed_seconds", best=min),
        "analyzer_curve_seconds": spread(a, "curve_seconds", best=min),
        "analyzer_total_seconds": a_total,
        "analyzer_jit_load_seconds": spread(a, "jit_load_seconds", best=min),
        "analyzer_state_bytes": a[0]["state_bytes"],
        "analyzer_tracked_blocks": a[0]["tracked_blocks"],
        "analyzer_state_bytes_per_block": bytes_per_block,
        "analyzer_worst_state_bytes_per_block": a[0]["worst_state_bytes_per_block"],
        "analyzer_rss_peak_delta_bytes": spread(a, "rss_peak_delta_bytes", best=min),
        "analyzer_rss_bytes_per_block": spread(a, "rss_bytes_per_block", best=min),
        "analyzer_prefix_accesses": a[0]["prefix_accesses"],
        "analyzer_prefix_accesses_per_second": a_prefix_rate,
        "python_accesses": p[0]["accesses"],
        "python_accesses_per_second": p_rate,
        "python_total_seconds": spread(p, "total_seconds", best=min),
        "python_rss_peak_delta_bytes": spread(p, "rss_peak_delta_bytes", best=min),
        "python_rss_bytes_per_block": p[0]["rss_bytes_per_block"],
        "ratio_vs_python_same_input": vs_python_same,
        "ratio_vs_python_whole_trace_vs_prefix": vs_python,
    }
    same = "whole trace" if p[0]["accesses"] == trace.accesses else f"same {p[0]['accesses']:,}-access prefix"
    goals = [
        Goal(
            "exact analyzer, accesses/s",
            _rate(a_rate["median"]),
            f">= {_rate(GOAL_RATE)}",
            a_rate["median"] >= GOAL_RATE,
        ),
        Goal(
            f"vs pure-Python Fenwick, {same}",
            f"{vs_python_same:,.1f}x",
            f">= {GOAL_VS_PYTHON:.0f}x",
            vs_python_same >= GOAL_VS_PYTHON,
        ),
        Goal(
            "vs pure-Python Fenwick, whole trace vs its prefix",
            f"{vs_python:,.1f}x",
            f">= {GOAL_VS_PYTHON:.0f}x",
            vs_python >= GOAL_VS_PYTHON,
        ),
    ]
    if lc:
        l_total = spread(lc, "total_seconds", best=min)
        vs_lcs = l_total["median"] / a_total["median"]
        figures.update(
            {
                "libcachesim_total_seconds": l_total,
                "libcachesim_accesses_per_second_per_pass": spread(lc, "accesses_per_second_per_pass"),
                "libcachesim_rss_peak_delta_bytes": spread(lc, "rss_peak_delta_bytes", best=min),
                "ratio_vs_libcachesim": vs_lcs,
                "ratio_vs_libcachesim_best_vs_best": l_total["best"] / a_total["best"],
            }
        )
        goals.append(
            Goal(
                f"whole curve vs libCacheSim LRU x {len(lc[0]['capacities'])}",
                f"{vs_lcs:,.1f}x",
                f">= {GOAL_VS_LIBCACHESIM:.0f}x",
                vs_lcs >= GOAL_VS_LIBCACHESIM,
            )
        )
    goals.append(
        Goal(
            "analyzer state, bytes per tracked block",
            f"{bytes_per_block:,.1f} B",
            f"<= {GOAL_BYTES_PER_BLOCK:.0f} B",
            bytes_per_block <= GOAL_BYTES_PER_BLOCK,
        )
    )
    return figures, goals


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _rate(n: float) -> str:
    return f"{n / 1e6:,.2f} M/s"


def print_report(runs: Runs, figures: dict, goals: list[Goal], checks: dict) -> None:
    f = figures
    a0, p0 = runs.analyzer[0], runs.python[0]

    def row(label: str, rate: dict, seconds: float, rss: float, note: str = "") -> None:
        print(
            f"{label:<46} {_rate(rate['best']):>11} / {_rate(rate['median']):>11} {seconds:>9.2f} s "
            f"{_mib(rss):>11}{note}"
        )

    print()
    print(
        f"{'contender (accesses/s: best / median of runs)':<46} {'best':>11}   {'median':>11} "
        f"{'time':>11} {'peak RSS+':>11}"
    )
    row(
        "exact analyzer: whole trace, then whole curve",
        f["analyzer_accesses_per_second"],
        f["analyzer_total_seconds"]["median"],
        f["analyzer_rss_peak_delta_bytes"]["median"],
    )
    row(
        f"pure-Python Fenwick: first {p0['accesses']:,} accesses",
        f["python_accesses_per_second"],
        f["python_total_seconds"]["median"],
        f["python_rss_peak_delta_bytes"]["median"],
    )
    if runs.libcachesim:
        lc0 = runs.libcachesim[0]
        row(
            f"libCacheSim {lc0['version']} LRU: {len(lc0['capacities'])} passes",
            f["libcachesim_accesses_per_second_per_pass"],
            f["libcachesim_total_seconds"]["median"],
            f["libcachesim_rss_peak_delta_bytes"]["median"],
            "  (rate per pass)",
        )
    print()
    print(
        f"analyzer: feed {f['analyzer_feed_seconds']['median']:.3f} s + curve "
        f"{1000 * f['analyzer_curve_seconds']['median']:.1f} ms (medians); JIT load from numba's cache "
        f"{f['analyzer_jit_load_seconds']['median']:.2f} s, before the clock"
    )
    print(
        f"analyzer memory: state {_mib(a0['state_bytes'])} for {a0['tracked_blocks']:,} tracked blocks = "
        f"{f['analyzer_state_bytes_per_block']:.1f} B/block ({a0['worst_state_bytes_per_block']:.1f} B/block "
        f"right after its arrays double); peak RSS added {f['analyzer_rss_bytes_per_block']['median']:.1f} B/block "
        f"(state + batch buffers + old and new arrays while growing)"
    )
    print(
        f"same input ({a0['prefix_accesses']:,} accesses): analyzer {_rate(f['analyzer_prefix_accesses_per_second']['median'])}, "
        f"pure Python {_rate(f['python_accesses_per_second']['median'])} "
        f"({f['python_rss_bytes_per_block']:,.0f} B/block peak RSS in Python)"
    )
    yes = {True: "yes", False: "NO", None: "skipped"}
    print(
        f"check: pure-Python histogram == analyzer's on the prefix: {yes[checks['python_histogram_equals_analyzer']]}"
    )
    print(f"check: analyzer hits identical in every run: {yes[checks['analyzer_hits_stable']]}")
    if runs.libcachesim:
        caps = runs.libcachesim[0]["capacities"]
        print(
            f"check: libCacheSim LRU hits == analyzer's curve at {len(caps)} capacities "
            f"({caps[0]}..{caps[-1]:,} blocks): {yes[checks['libcachesim_hits_equal_analyzer']]}"
        )
    print(f"memory measured as {a0['memory_method']}")
    print()
    print(f"{'goal (one core, median runs, side by side)':<52} {'measured':>11} {'goal':>12}  result")
    for g in goals:
        print(f"{g.goal:<52} {g.measured:>11} {g.target:>12}  {g.result}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--accesses", type=int, default=ACCESSES, help="trace length (default 10M)")
    parser.add_argument(
        "--python-prefix",
        type=int,
        default=PYTHON_PREFIX,
        help="accesses the pure-Python baseline runs on (a prefix of the trace; 0: all)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per contender (best and median shown)")
    parser.add_argument("--cpu", type=int, default=default_cpu(), help="the core to pin every run to")
    parser.add_argument("--capacities", type=int, default=20, help="libCacheSim capacities (log-spaced)")
    parser.add_argument("--no-libcachesim", action="store_true", help="skip libCacheSim even if installed")
    parser.add_argument("--no-parse", action="store_true", help="skip the trace-parse throughput figures")
    parser.add_argument(
        "--no-sampling", action="store_true", help="skip exact against sampled (benchmarks/sampling.py)"
    )
    parser.add_argument(
        "--no-opt", action="store_true", help="skip Belady MIN's one pass (benchmarks/opt_bench.py)"
    )
    parser.add_argument(
        "--no-runs",
        action="store_true",
        help="skip the real-trace shape: runs against the per-block kernel (benchmarks/runs_bench.py)",
    )
    parser.add_argument(
        "--no-tui", action="store_true", help="skip kvset-top's CPU and key latency (benchmarks/tui_bench.py)"
    )
    parser.add_argument(
        "--tui-seconds",
        type=float,
        default=TUI_SECONDS,
        help=f"kvset-top's CPU window per scenario (default {TUI_SECONDS:g})",
    )
    parser.add_argument("--json", type=Path, default=RESULTS, help="where to write the results")
    args = parser.parse_args(argv)
    if args.python_prefix <= 0 or args.python_prefix > args.accesses:
        args.python_prefix = args.accesses

    began = time.perf_counter()
    info = machine()
    load_before = os.getloadavg()
    pin = f"pinned to cpu {args.cpu}" if args.cpu is not None else "not pinned"
    print(
        f"kvset benchmark on {info['cpu_model']} ({info['cores']} cores): one core per run ({pin}), "
        f"{args.repeat} runs per contender, interleaved; load average {load_before[0]:.2f}"
    )
    started = time.perf_counter()
    trace = make_trace(args.accesses)
    shape = shape_of(trace)
    print(f"trace: agentic workload, {shape.describe()}; generated in {time.perf_counter() - started:.1f} s")
    capacities = log_capacities(shape.distinct_blocks, args.capacities)
    with_lcs = not args.no_libcachesim and libcachesim_available()
    if not with_lcs:
        why = "--no-libcachesim given" if args.no_libcachesim else "not installed (pip install -e '.[bench]')"
        print(f"libCacheSim: skipped, {why}")

    runs = measure(
        trace,
        capacities,
        args.python_prefix,
        args.repeat,
        args.cpu,
        with_lcs,
        progress=lambda msg: print(msg, flush=True),
    )
    checks = check(trace, runs, args.python_prefix)
    figures, goals = summarize(trace, runs)
    print_report(runs, figures, goals, checks)

    parse_lines: list[str] = []
    if not args.no_parse:
        print("\ntrace readers (benchmarks/trace_parse.py, same core):")
        parse_lines = run_parse_benchmark(args.cpu, 1_000_000)
        for line in parse_lines:
            print("  " + line)

    sampling_lines, sampling = [], None
    if not args.no_sampling:
        print("\nexact against sampled (benchmarks/sampling.py, same core):", flush=True)
        sampling_lines, sampling = run_sampling_benchmark(trace, args.cpu)
        for line in sampling_lines:
            print("  " + line)

    opt_lines, opt = [], None
    if not args.no_opt:
        print(
            "\nBelady MIN, one pass against the LRU analyzer and MIN heap replays (benchmarks/opt_bench.py, "
            "same core):",
            flush=True,
        )
        opt_lines, opt = run_opt_benchmark(args.cpu)
        for line in opt_lines:
            print("  " + line)

    runs_lines, runs_figures = [], None
    if not args.no_runs:
        print(
            "\nthe real-trace shape: runs of re-read blocks against the per-block kernel "
            "(benchmarks/runs_bench.py, same core):",
            flush=True,
        )
        runs_lines, runs_figures = run_runs_benchmark(args.cpu)
        for line in runs_lines:
            print("  " + line)

    tui_lines, tui, tui_goals = [], None, []
    if not args.no_tui:
        print(
            "\nkvset-top --demo in a 120x40 tmux pane (benchmarks/tui_bench.py "
            f"{' '.join(tui_bench_args(args.tui_seconds))}; load average {os.getloadavg()[0]:.2f}):",
            flush=True,
        )
        tui_lines, tui, tui_goals = run_tui_benchmark(args.tui_seconds)
        for line in tui_lines:
            print("  " + line)
        for g in tui_goals:
            print(f"  {g.goal:<52} {g.measured:>11} {g.target:>12}  {g.result}")
        goals += tui_goals

    load_after = os.getloadavg()
    elapsed = time.perf_counter() - began
    print(f"\nload average {load_after[0]:.2f} at the end; whole run {elapsed:.0f} s; results in {args.json}")
    report = {
        "command": "make bench",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": info,
        "cpu": args.cpu,
        "repeat": args.repeat,
        "load_average": {"start": load_before[0], "end": load_after[0]},
        "trace": shape.__dict__,
        "capacities": capacities,
        "figures": figures,
        "checks": checks,
        "goals": [
            {"goal": g.goal, "measured": g.measured, "target": g.target, "result": g.result} for g in goals
        ],
        "runs": {"analyzer": runs.analyzer, "python": runs.python, "libcachesim": runs.libcachesim},
        "trace_parse": parse_lines,
        "sampling": sampling,
        "opt": opt,
        "real_trace_runs": runs_figures,
        "tui": tui,
        "seconds": elapsed,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    ok = checks["python_histogram_equals_analyzer"] and checks["analyzer_hits_stable"]
    ok &= runs_figures is None or runs_figures.get("curves_identical") is True  # both kernels, every trace
    ok &= opt is None or all(
        same for r in opt for _, _, same in r["replays"]
    )  # MIN's replays agree with its curve
    return 0 if ok and checks["libcachesim_hits_equal_analyzer"] is not False else 1
