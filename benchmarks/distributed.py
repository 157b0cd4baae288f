"""`make bench-dask`: the distributed analysis (kvset.distributed) measured on the large agentic trace.

On this machine (2 cores, shared): the one-process `kvset analyze` (its parser and analyzer on two
threads), one single-threaded Dask worker, two; each worker's peak memory; the ordered merge's cost
with 64 partitions against the horizon C and against the partitions p (not `--sample`: refused with
workers while a sampled run's time windows do not merge). Each distributed shape twice: on a local
cluster started and ended with the run (as `kvset analyze --workers N` does: about 2 s of Dask's and
its workers' start in every figure), and on one kept running between runs (as a cluster at --dask
is), where what scaling out gains and costs shows apart from starting a cluster; the goals' figures
(`goals`) are printed for both. Every distributed run's JSON is compared with the one-process JSON (all but the
notes and the seconds). The load average is recorded before and after each run: other work on the
machine slows every figure. Results in benchmarks/results/distributed.json; the README's projection
of a month of a fleet reads its inputs from there.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.large import run_child_rusage
from benchmarks.large_trace import ACCESSES, DATA, SEED, large_trace
from kvset.cli import main as cli_main
from kvset.core.feed_args import DEFAULT_HORIZON
from kvset.distributed.driver import Cluster, analyze_distributed, close_local_cluster, start_local_cluster
from kvset.distributed.worker import ReadConfig
from kvset.figures.base import ANALYZE
from kvset.offline import analysis_snapshot
from kvset.report import snapshot_json
from kvset.snapshot.builder import SnapshotConfig

RESULTS = Path(__file__).resolve().parent / "results" / "distributed.json"
UNCOMPARED = {"notes", "seconds", "input", "taken_at", "accesses_per_second"}  # how, how long, when, how fast
# what the histogram alone decides: every hit rate up to the horizon (the split of the misses into first
# accesses and re-references beyond the horizon is not merged exactly once the horizon is reached)
HISTOGRAM = ("accesses", "tokens", "rereferences", "max_stack_distance", "attainable_hit_rate")
HISTOGRAM += ("attainable_token_hit_rate", "horizon_reached", "requests")


def plain_trace(gz: Path) -> Path:
    """The trace without gzip (a gzip file cannot be cut into byte ranges), made once beside it."""
    plain = gz.with_suffix("")
    if not plain.exists():
        tmp = plain.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            subprocess.run(["gzip", "-dc", str(gz)], stdout=out, check=True)
        tmp.rename(plain)
    return plain


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def one_process(path: Path, extra: list[str]) -> dict:
    load = _load()
    wall, rss, cpu, out = run_child_rusage(
        [sys.executable, "-m", "kvset", "analyze", str(path), "--json", *extra]
    )
    return {"wall": wall, "cpu": cpu, "peak_rss": rss, "json": json.loads(out), "load": [load, _load()]}


def one_process_here(path: Path) -> dict:
    """`kvset analyze PATH --json` called in this process, its imports done and its kernels loaded (a
    first call on the trace's head): the one-process run as the running cluster's analyses are timed,
    without an interpreter's start. CPU: this process's, the parsing thread's included."""
    with contextlib.redirect_stdout(io.StringIO()):
        cli_main(["analyze", str(_head(path)), "--json"])
    load = _load()
    out = io.StringIO()
    cpu0, t0 = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = cli_main(["analyze", str(path), "--json"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if code:
        raise SystemExit(f"kvset analyze {path} exited {code}")
    return {"wall": wall, "cpu": cpu, "json": json.loads(out.getvalue()), "load": [load, _load()]}


def cli(path: Path, workers: int) -> dict:
    """`kvset analyze --workers N` as a user runs it, a child process timed as the one-process run is:
    its interpreter's start and imports, the cluster's start (the workers' server starting while the
    client imports Dask) and end included; the CPU seconds of every process of it."""
    run = one_process(path, ["--workers", str(workers)])
    run["cpu_total"] = run.pop("cpu")
    return run


def _cpu_here_and_children() -> float:
    """CPU seconds of this process and of its children that ended (the local cluster's worker
    processes, reaped when it closes): the whole distributed run's, startup, pickling and comms
    included, which the workers' own thread times leave out."""
    here, gone = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return here.ru_utime + here.ru_stime + gone.ru_utime + gone.ru_stime


def distributed(
    path: Path, workers: int, partitions: int, horizon: int, sample: float | None, address: str | None = None
) -> dict:
    """One distributed analysis timed: on a local cluster started and ended in it, or on the running
    cluster at `address` (its start not timed; its workers' CPU then only as their threads measure it,
    for the processes have not ended: cpu_total None)."""
    load = _load()
    cpu0 = _cpu_here_and_children()
    t0 = time.perf_counter()
    result = analyze_distributed(
        [str(path)],
        ReadConfig(horizon=horizon, sample_rate=sample, seed=1 if sample else 0),
        Cluster(address=address) if address else Cluster(workers=workers),
        partitions,
        progress=False,
    )
    computed = result.analyzer.computed  # type: ignore[attr-defined]
    parts, merges = computed["partitions"], computed["merges"]
    report = snapshot_json(
        analysis_snapshot(result, SnapshotConfig(command=ANALYZE))
    )  # as `kvset analyze --json`, which the one-process run's time includes too
    wall = time.perf_counter() - t0
    cpu_total = _cpu_here_and_children() - cpu0
    rounds: dict[int, float] = {}
    round_cpu: dict[int, float] = {}
    merge_phases: dict[str, float] = {}
    for m in merges:
        rounds[m["round"]] = max(rounds.get(m["round"], 0.0), m["seconds"])
        round_cpu[m["round"]] = round_cpu.get(m["round"], 0.0) + m["cpu_seconds"]
        for phase, cpu in m["phases"].items():
            merge_phases[phase] = merge_phases.get(phase, 0.0) + cpu
    analyse = sum(p["analyse_cpu_seconds"] for p in parts)
    state = sum(p["state_cpu_seconds"] for p in parts)
    return {
        "workers": workers,
        "partitions": partitions,
        "horizon": horizon,
        "sample": sample,
        "wall": wall,
        "cpu_total": None if address else cpu_total,
        "worker_cpu": sum(p["cpu_seconds"] for p in parts),
        # the partitions' thread CPU seconds: reading and parsing, the analyzer, making the state
        "partition_cpu": {
            "read and parse": sum(p["cpu_seconds"] for p in parts) - analyse - state,
            "analyse": analyse,
            "state": state,
        },
        "merge_cpu_by_phase": merge_phases,
        "merge_cpu_by_round": round_cpu,
        "partition_seconds_max": max(p["seconds"] for p in parts),
        "peak_rss_per_worker_max": max(p["peak_rss_bytes"] for p in parts),
        "state_bytes_max": max(p["state_bytes"] for p in parts),
        "state_bytes_sum": sum(p["state_bytes"] for p in parts),
        "merge_seconds_sum": sum(m["seconds"] for m in merges),
        "merge_cpu_sum": sum(m["cpu_seconds"] for m in merges),
        "merge_seconds_critical_path": sum(rounds.values()),
        "merge_bytes_in_sum": sum(m["bytes_in"] for m in merges),
        "merge_seconds_max": max((m["seconds"] for m in merges), default=0.0),
        "json": report,
        "phases": {k: round(v, 2) for k, v in computed["phases"].items()},
        "load": [load, _load()],
    }


RUNNING = "on a running cluster"


def sixty_four(bits: int = DEFAULT_HORIZON.bit_length() - 1) -> str:
    """The name of the cold run of 64 partitions on 2 workers at a horizon of 2**bits."""
    return f"2 workers, 64 partitions, C=2^{bits}"


HERE = "one process, in the benchmark's process"
HEAD_BYTES = 8 << 20  # the warm-up analysis's input: the trace's first lines


def _head(path: Path) -> Path:
    """The trace's first HEAD_BYTES cut at a line's end, written once beside it."""
    head = path.with_name("head.jsonl")
    if not head.exists():
        with open(path, "rb") as f:
            data = f.read(HEAD_BYTES)
        head.write_bytes(data[: data.rindex(b"\n") + 1])
    return head


def on_running_clusters(path: Path, shapes: list[tuple[int, int, str]], repeat: int) -> dict[str, list[dict]]:
    """The analyses of `shapes` (workers, partitions, name) on a local cluster of that many workers kept
    running between them, as a cluster at --dask is: Dask's start and its workers' (about 2 s here,
    the cold runs' `cluster` phase) not timed, and each worker warmed by a small analysis first (the
    first task of a fresh worker process faults in its memory). What scaling out gains and costs,
    apart from starting a cluster. One cluster at a time (they share the worker server, which ends
    with the first closed), `repeat` rounds of them."""
    tries: dict[str, list[dict]] = {name: [] for _, _, name in shapes}
    head = _head(path)
    for _ in range(max(1, repeat)):
        for n in sorted({w for w, _, _ in shapes}):
            local = start_local_cluster(n)
            try:
                distributed(head, n, n, DEFAULT_HORIZON, None, local.scheduler_address)
                for workers, partitions, name in shapes:
                    if workers == n:
                        run = distributed(path, n, partitions, DEFAULT_HORIZON, None, local.scheduler_address)
                        tries[name].append(run)
            finally:
                close_local_cluster(local)
    return tries


def goals(runs: dict[str, dict]) -> list[str]:
    """The issue's three figures: on the running clusters against the one-process run in this process
    (neither starts an interpreter or a cluster), and on clusters started with each run against the
    one-process run as a child process (both do)."""
    lines = []
    for how, suffix, one, big in (
        ("running cluster", f", {RUNNING}", runs.get(HERE), f"2 workers, 64 partitions, {RUNNING}"),
        ("cold", "", runs["one process"], sixty_four()),
    ):
        w1, w2, w64 = (
            runs.get(f"1 worker{suffix}"),
            runs.get(f"2 workers, 2 partitions{suffix}"),
            runs.get(big),
        )
        if one is None:
            continue
        if w1 and w2:
            lines.append(
                f"{how}: 2 workers {w1['wall'] / w2['wall']:.2f}x one worker (goal >= 1.7); "
                f"{w2['wall']:.2f} s against the one process's {one['wall']:.2f} s (goal: no slower)"
            )
        if w2 and w64:
            added = w64["wall"] - w2["wall"]
            lines.append(
                f"{how}: 64 partitions add {added:+.2f} s to 2 partitions' wall, {100 * added / one['wall']:+.1f} % "
                f"of the one process's {one['wall']:.2f} s (goal < 10 %); their merges "
                f"{w64['merge_cpu_sum']:.2f} CPU s, {100 * w64['merge_cpu_sum'] / one['cpu']:.1f} % of its "
                f"{one['cpu']:.2f} CPU s"
            )
    return lines


def same(a: dict, b: dict) -> list[str]:
    return sorted(k for k in a if k not in UNCOMPARED and a[k] != b.get(k))


MONTH = 5e12  # 200 nodes at 10 k accesses/s for 30 days
NETWORK = 1.25e9  # bytes/s a worker sends or receives (10 Gbit/s), assumed: not measurable here


def projection(out: dict) -> list[dict]:
    """A month of a fleet on 64 and 512 workers, from this run's measurements: the one-worker rate (CPU
    seconds, which the machine's load inflates less than wall time), the state's size and the merge's
    seconds per byte of states merged at the default horizon C, and the workers' peak memory."""
    runs = out["runs"]
    one = runs["1 worker"]
    rate = out["accesses"] / one["worker_cpu"]  # accesses a second of one single-threaded worker
    at_default = runs[sixty_four()]
    per_byte = at_default["merge_cpu_sum"] / at_default["merge_bytes_in_sum"]
    state = 40 * DEFAULT_HORIZON  # at most C keys of stack (8 B), C firsts (16 B), C histogram rows (16 B)
    rows = []
    for workers in (64, 512):
        rounds = (workers - 1).bit_length()
        analyse = MONTH / workers / rate
        merge_round = 2 * state * per_byte + state / NETWORK  # both inputs merged; one sent to the merger
        rows.append(
            {
                "workers": workers,
                "accesses_per_worker": MONTH / workers,
                "analyse_seconds": analyse,
                "merge_rounds": rounds,
                "merge_seconds": rounds * merge_round,
                "wall_seconds": analyse + rounds * merge_round,
                "state_bytes": state,
                "memory_per_worker_bytes": one["peak_rss_per_worker_max"] + 2 * state,
                "bytes_moved": (workers - 1) * state + state,  # each merge's later input, and the root
                "inputs": {"accesses_per_cpu_second": rate, "merge_seconds_per_byte": per_byte},
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--accesses", type=int, default=ACCESSES)
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument(
        "--quick",
        action="store_true",
        help="only the one-process run, 1 and 2 workers (and 64 partitions on a running cluster)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="the one-process run, 1 and 2 workers N times, interleaved; the fastest of each is kept "
        "(on a shared machine, the least disturbed)",
    )
    p.add_argument(
        "--sixty-four",
        action="store_true",
        help="only the one-process run and 2 workers on 64 partitions at the default horizon (the merge's goal)",
    )
    p.add_argument(
        "--project", action="store_true", help="only the projection, from the results written last"
    )
    args = p.parse_args(argv)
    if args.project:
        for row in projection(json.loads(RESULTS.read_text())):
            print(json.dumps(row))
        return 0
    trace = large_trace(args.accesses, SEED, args.data, progress=lambda m: print(m, flush=True))
    path = plain_trace(trace.path)
    print(trace.describe(), f"; read here as {path.name} ({path.stat().st_size / 1e9:.1f} GB)", flush=True)
    out: dict = {"trace": trace.describe(), "accesses": trace.accesses, "cpus": os.cpu_count(), "runs": {}}

    def record(name: str, run: dict, reference: dict | None) -> None:
        differs = same(reference, run["json"]) if reference is not None else []
        run["identical_to_one_process"] = not differs
        run["differs"] = differs
        if reference is not None:
            mine = run["json"]

            # the rows at the capacities both list (the knee's row moves with the count beyond the horizon)
            def rows(report: dict) -> dict:
                return {
                    r["capacity_blocks"]: {k: r[k] for k in r if "hit_rate" in k} for r in report["curve"]
                }

            theirs, ours = rows(reference), rows(mine)
            common = theirs.keys() & ours.keys()
            run["rows_compared"] = len(common)
            run["histogram_identical"] = (
                len(common) >= len(theirs) - 1
                and all(theirs[c] == ours[c] for c in common)
                and all(mine[k] == reference[k] for k in HISTOGRAM)
            )
            run["beyond_horizon"] = {
                "one_process": reference["beyond_horizon"],
                "merged": mine["beyond_horizon"],
            }
        del run["json"]
        out["runs"][name] = run
        extra = (
            f"  merges {run['merge_seconds_sum']:.2f} s ({run['merge_cpu_sum']:.2f} CPU s; critical path "
            f"{run['merge_seconds_critical_path']:.2f} s)  workers' CPU {run['worker_cpu']:.1f} s"
            + (f"  all processes' CPU {run['cpu_total']:.1f} s" if run["cpu_total"] is not None else "")
            if "merge_seconds_sum" in run
            else f"  CPU {run['cpu_total' if 'cpu_total' in run else 'cpu']:.1f} s"
        )
        print(
            f"{name:<28} wall {run['wall']:7.1f} s  {trace.accesses / run['wall'] / 1e6:6.2f} M acc/s{extra}"
            f"  identical: {'yes' if not differs else 'histogram ' + ('yes' if run['histogram_identical'] else 'NO') + '; differ: ' + ', '.join(differs)}"
            f"  load {run['load']}"
            + (f"  phases {run['phases']}" if "phases" in run else "")
            + "".join(
                f"\n    {k}: " + ", ".join(f"{n} {v:.2f}" for n, v in run[k].items())
                for k in ("partition_cpu", "merge_cpu_by_phase", "merge_cpu_by_round")
                if k in run
            ),
            flush=True,
        )

    c22 = sixty_four()
    pairs = ((1, 1, "1 worker"), (2, 2, "2 workers, 2 partitions"))
    if args.sixty_four:
        pairs = ((2, 64, c22),)
    tries: dict[str, list[dict]] = {"one process": [], **{name: [] for _, _, name in pairs}}
    as_cli = "2 workers, `kvset analyze --workers 2`"
    if not args.sixty_four:
        tries[as_cli] = []
    tries[HERE] = []
    for _ in range(max(1, args.repeat)):
        tries["one process"].append(one_process(path, []))
        tries[HERE].append(one_process_here(path))
        for workers, partitions, name in pairs:
            tries[name].append(distributed(path, workers, partitions, DEFAULT_HORIZON, None))
        if not args.sixty_four:
            tries[as_cli].append(cli(path, 2))
    shapes = [(1, 1, f"1 worker, {RUNNING}"), (2, 2, f"2 workers, 2 partitions, {RUNNING}")]
    shapes += [(2, 64, f"2 workers, 64 partitions, {RUNNING}")]
    tries.update(on_running_clusters(path, shapes[1:] if args.sixty_four else shapes, args.repeat))
    reference = tries["one process"][0]["json"]
    for name, runs in tries.items():
        best = min(runs, key=lambda r: r["wall"])
        best["walls"] = [round(r["wall"], 2) for r in runs]
        record(name, best, None if name in ("one process", HERE) else reference)
    # --sample is refused with workers until a sampled run's time windows merge (docs/method.md, section 13)
    if not (args.quick or args.sixty_four):
        record("2 workers, 8 partitions", distributed(path, 2, 8, DEFAULT_HORIZON, None), reference)
        for bits in (16, 18, 20, 22):
            horizon = 1 << bits
            ref = (
                reference
                if horizon == DEFAULT_HORIZON
                else one_process(path, ["--horizon", str(horizon)])["json"]
            )
            record(sixty_four(bits), distributed(path, 2, 64, horizon, None), ref)
    out["goals"] = goals(out["runs"])
    for line in out["goals"]:
        print(line, flush=True)
    if not (args.quick or args.sixty_four):
        out["projection"] = projection(out)
        for row in out["projection"]:
            print(
                f"projection, {row['workers']} workers: {row['wall_seconds'] / 3600:.2f} h "
                f"({row['analyse_seconds'] / 3600:.2f} h analysing, {row['merge_seconds']:.0f} s merging in "
                f"{row['merge_rounds']} rounds), {row['memory_per_worker_bytes'] / 2**30:.1f} GiB a worker, "
                f"{row['bytes_moved'] / 1e9:.0f} GB moved",
                flush=True,
            )
    written = RESULTS
    if args.quick or args.sixty_four:
        written = RESULTS.with_name("distributed-quick.json" if args.quick else "distributed-64.json")
    written.parent.mkdir(parents=True, exist_ok=True)
    written.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {written}")
    return 0 if all(r.get("histogram_identical", True) for r in out["runs"].values()) else 1


if __name__ == "__main__":
    shutil.which("gzip") or sys.exit("bench-dask needs gzip")
    sys.exit(main())
