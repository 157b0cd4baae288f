"""What `kvset analyze --by` costs: peak memory and time with and without it, on a synthetic trace of
many sessions (python -m benchmarks.principals_memory [--requests N] [--sessions S]).

Each request is a session's own 3-block prefix and 2 random blocks; tenants are sessions modulo 50.
Each run is its own process, so its peak resident memory is its own.
"""

from __future__ import annotations

import argparse
import json
import random
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


def write_trace(path: Path, requests: int, sessions: int, seed: int = 2) -> None:
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(requests):
            s = rng.randrange(sessions)
            ids = [s * 10 + k for k in range(3)] + [rng.randrange(2_000_000) for _ in range(2)]
            line = {"timestamp": i, "input_length": 512 * 5, "hash_ids": ids, "session": f"s{s}"}
            f.write(json.dumps({**line, "tenant": f"t{s % 50}"}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--sessions", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "sessions.jsonl"
        write_trace(trace, args.requests, args.sessions)
        print(f"{args.requests:,} requests ({5 * args.requests:,} accesses), {args.sessions:,} sessions")
        base = None
        for by in ([], ["--by", "session"], ["--by", "tenant,session"]):
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


if __name__ == "__main__":
    main()
