"""What `--by` costs in memory, with and without it, on synthetic streams of many sessions.

    python -m benchmarks.principals_memory [--requests N] [--sessions S]
        `kvset analyze` of a trace file (peak memory and time of each run)
    python -m benchmarks.principals_memory --live ACCESSES [--sessions S] [--by-window N] [--mmap-threshold]
        the live path (kvset-top / kvset serve): the monitor's analyzer and LivePrincipals fed
        ACCESSES accesses batch by batch, read every --read-every accesses as the monitor would
        every 10 s (streams, pool trace, and the pool figure's replay as a snapshot asks for it),
        resident memory sampled as they go; --mmap-threshold: glibc's mmap threshold fixed in every
        run, as `kvset serve` fixes it

Each request is a session's own 3-block prefix and 2 random blocks; tenants are sessions modulo 50.
Each run is its own process, so its memory is its own; the principals' names are interned in every
run, --by or not, as a trace reader does. Every run reads the same stream (one seed). The live runs
are preceded by a small one that leaves numba's caches written, so that no measured run compiles a
kernel (a compilation's memory would count in its peak, and in that run's only).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# runs the command in a child and prints the child's peak resident memory (KiB)
_PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)
RUNS = ((), ("session",), ("tenant", "session"))
REQUEST_BLOCKS = 5
BATCH_REQUESTS = 1000


def write_trace(path: Path, requests: int, sessions: int, seed: int = 2) -> None:
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(requests):
            s = rng.randrange(sessions)
            ids = [s * 10 + k for k in range(3)] + [rng.randrange(2_000_000) for _ in range(2)]
            line = {"timestamp": i, "input_length": 512 * 5, "hash_ids": ids, "session": f"s{s}"}
            f.write(json.dumps({**line, "tenant": f"t{s % 50}"}) + "\n")


def analyze_runs(requests: int, sessions: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "sessions.jsonl"
        write_trace(trace, requests, sessions)
        print(f"{requests:,} requests ({5 * requests:,} accesses), {sessions:,} sessions")
        base = None
        for levels in RUNS:
            by = ["--by", ",".join(levels)] if levels else []
            t0 = time.perf_counter()
            cmd = [sys.executable, "-m", "kvset", "analyze", str(trace), "--json", *by]
            out = subprocess.run(
                [sys.executable, "-c", _PEAK, *cmd], capture_output=True, text=True, check=True
            )
            peak = int(out.stdout.split()[-1])
            base = base or peak
            label = " ".join(by) or "(no --by)"
            print(
                f"{label:<22} {time.perf_counter() - t0:6.2f} s  {peak / 1024:7.0f} MiB  {peak / base:.2f}x"
            )


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def live_child(
    accesses: int, sessions: int, levels: tuple[str, ...], window: int, every: int, mmap_threshold: bool
) -> None:
    """One run of the live path; prints one JSON line per sample: accesses fed, RSS, read CPU s."""
    import numpy as np

    from kvset.cli.serve import HeapTrim, glibc_malloc
    from kvset.core.principals import LivePrincipals, PrincipalCollector
    from kvset.core.stack_distance import new_analyzer
    from kvset.figures.principal_pool import compute_pool
    from kvset.types import PRINCIPAL_LEVELS, AccessBatch, PrincipalNames
    from kvset.units import StreamUnits

    libc = glibc_malloc() if mmap_threshold else None
    if libc is not None:
        HeapTrim(libc)  # fixes the threshold (no trims: they are timed, and a peak is not trimmed)
    units = StreamUnits(16, "flag")
    analyzer = new_analyzer(units, preallocate=True)
    live = LivePrincipals(PrincipalCollector(levels, window=window), every=0.0) if levels else None
    names = PrincipalNames()
    rng = np.random.default_rng(2)
    per_batch = BATCH_REQUESTS * REQUEST_BLOCKS
    fed, read_cpu, next_read, requests = 0, 0.0, every, 0
    tenant, session = PRINCIPAL_LEVELS.index("tenant"), PRINCIPAL_LEVELS.index("session")
    while fed < accesses:
        who = rng.integers(0, sessions, BATCH_REQUESTS)
        keys = np.empty((BATCH_REQUESTS, REQUEST_BLOCKS), dtype=np.uint64)
        keys[:, :3] = (10**9 + who * 10)[:, None] + np.arange(3)
        keys[:, 3:] = rng.integers(0, 2_000_000, (BATCH_REQUESTS, 2))
        ids = np.zeros((BATCH_REQUESTS, len(PRINCIPAL_LEVELS)), dtype=np.int32)
        ids[:, session] = [names.id(f"s{s}") for s in who]
        ids[:, tenant] = [names.id(f"t{s % 50}") for s in who]
        batch = AccessBatch(
            keys=keys.reshape(-1),
            request_starts=np.arange(0, per_batch, REQUEST_BLOCKS),
            timestamps=np.repeat(np.arange(requests, requests + BATCH_REQUESTS) * 0.01, REQUEST_BLOCKS),
            block_size=16,
            principals=np.repeat(ids, REQUEST_BLOCKS, axis=0),
            principal_names=names,
        )
        requests += BATCH_REQUESTS
        if live is None:
            analyzer.feed_batch(batch)
        else:
            live.feed(analyzer, batch)
        fed += per_batch
        if fed >= next_read or fed >= accesses:
            next_read += every
            if live is not None:
                t0 = time.process_time()
                streams, trace = live.read(analyzer, now=float(fed))
                assert trace is not None
                compute_pool(trace, streams, 100_000, "chosen")  # what a snapshot's figure asks for
                # held by LivePrincipals alone until its next read lets them go, as in the monitor
                # (a snapshot keeps the figures' results, not their inputs)
                del streams, trace
                read_cpu = time.process_time() - t0
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(json.dumps({"accesses": fed, "rss": rss_mib(), "peak": peak, "read": read_cpu}), flush=True)


def live_runs(accesses: int, sessions: int, window: int, every: int, mmap_threshold: bool) -> None:
    print(
        f"live path: {accesses:,} accesses, {sessions:,} sessions, --by-window {window:,}, "
        f"read every {every:,} accesses" + (", mmap threshold fixed" if mmap_threshold else "")
    )

    def child(accesses: int, sessions: int, levels: tuple[str, ...]) -> str:
        cmd = [sys.executable, "-m", "benchmarks.principals_memory", "--live", str(accesses)]
        cmd += ["--sessions", str(sessions), "--by-window", str(window), "--read-every", str(every)]
        cmd += ["--child", ",".join(levels)] + (["--mmap-threshold"] if mmap_threshold else [])
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    child(min(accesses, 20_000), 100, RUNS[-1])  # numba's caches written before any run is measured
    runs = {}
    for levels in RUNS:
        out = child(accesses, sessions, levels)
        runs[" ".join(levels) or "(no --by)"] = [json.loads(line) for line in out.splitlines()]
    names = list(runs)
    print("| accesses | " + " | ".join(f"RSS {n} (MiB)" for n in names) + " |")
    print("| ---: |" + " ---: |" * len(names))
    for i, sample in enumerate(runs[names[0]]):
        cells = " | ".join(f"{runs[n][i]['rss']:,.0f}" for n in names)
        print(f"| {sample['accesses']:,} | {cells} |")
    base = runs[names[0]][-1]["peak"]
    for n in names:
        last = runs[n][-1]
        print(
            f"{n:<16} peak {last['peak']:7.0f} MiB ({last['peak'] / base:.2f}x), "
            f"last read {last['read']:.2f} s CPU"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--live", type=int, metavar="ACCESSES", help="the live path, this many accesses")
    ap.add_argument("--by-window", type=int, default=None, help="the live window (default: kvset's)")
    ap.add_argument("--read-every", type=int, default=2_000_000, metavar="ACCESSES")
    ap.add_argument(
        "--mmap-threshold", action="store_true", help="glibc's mmap threshold fixed, as serve does"
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.live is None:
        analyze_runs(args.requests, args.sessions)
        return
    if args.by_window is None:
        from kvset.figures.principal_window import DEFAULT_PRINCIPAL_WINDOW

        args.by_window = DEFAULT_PRINCIPAL_WINDOW
    if args.child is not None:
        levels = tuple(lv for lv in args.child.split(",") if lv)
        live_child(args.live, args.sessions, levels, args.by_window, args.read_every, args.mmap_threshold)
    else:
        live_runs(args.live, args.sessions, args.by_window, args.read_every, args.mmap_threshold)


if __name__ == "__main__":
    main()
