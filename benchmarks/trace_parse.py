"""Parse throughput of the trace readers (lines/s, accesses/s) on generated files in a temp directory.

Run: .venv/bin/python benchmarks/trace_parse.py [--accesses 1000000]
Nothing is written into the repository; the files go to a temporary directory and are deleted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvset.formats import read_trace  # noqa: E402

FIXTURE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "fixtures"
    / "traces"
    / "mooncake_fast25_synthetic_trace.jsonl"
)


def write_mooncake(path: Path, accesses: int, seed: int = 1) -> None:
    """Mooncake-shaped lines: shared prefixes of popular ids followed by fresh ids, ~30 blocks a request."""
    rng = np.random.default_rng(seed)
    opener = gzip.open if path.suffix == ".gz" else open
    written, fresh, t = 0, 10_000_000, 0
    with opener(path, "wt") as f:
        while written < accesses:
            n = int(rng.integers(1, 60))
            shared = int(rng.integers(0, n + 1))
            ids = list(range(int(rng.integers(0, 50)) * 100, int(rng.integers(0, 50)) * 100 + shared))[
                :shared
            ]
            ids += list(range(fresh, fresh + n - len(ids)))
            fresh += n
            t += int(rng.integers(0, 50))
            length = 512 * (len(ids) - 1) + int(rng.integers(1, 513))
            f.write(
                json.dumps({"timestamp": t, "input_length": length, "output_length": 10, "hash_ids": ids})
                + "\n"
            )
            written += len(ids)


def write_tokens(path: Path, requests: int, seed: int = 2) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(requests):
            f.write(
                json.dumps({"timestamp": i * 0.1, "token_ids": rng.integers(0, 150_000, 512).tolist()}) + "\n"
            )


def measure(label: str, path: Path, repeat: int = 3, **kwargs) -> None:
    best = None
    for _ in range(repeat):
        started = time.perf_counter()
        trace = read_trace(path, **kwargs)
        took = time.perf_counter() - started
        best = took if best is None else min(best, took)
    assert best is not None
    print(
        f"{label:<34} {trace.lines:>9,} lines {trace.accesses:>10,} accesses {best:7.3f} s "
        f"{trace.lines / best:>12,.0f} lines/s {trace.accesses / best:>12,.0f} accesses/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accesses", type=int, default=1_000_000)
    args = parser.parse_args()
    measure("mooncake fixture (real, 1.1 MB)", FIXTURE, repeat=5)
    with tempfile.TemporaryDirectory() as tmp:
        plain, packed, tokens = Path(tmp) / "m.jsonl", Path(tmp) / "m.jsonl.gz", Path(tmp) / "t.jsonl"
        write_mooncake(plain, args.accesses)
        write_mooncake(packed, args.accesses)
        write_tokens(tokens, 500)
        print(
            f"generated {plain.stat().st_size / 1e6:.1f} MB mooncake JSONL ({packed.stat().st_size / 1e6:.1f} MB gz)"
        )
        measure("mooncake generated", plain)
        measure("mooncake generated, gzip", packed)
        measure("tokens (512 ids/request, sha256)", tokens, repeat=1)
        measure("tokens (512 ids/request, cbor)", tokens, repeat=1, hash_algo="sha256_cbor")


if __name__ == "__main__":
    main()
