"""The large benchmark trace: agentic sessions as Mooncake JSONL, 64-token blocks, gzip, seeded.

Shaped like the 94M-access agentic trace of issue 10: long sessions that re-send their whole
context each turn (a shared system prefix, the session's history, sometimes a popular
document) plus a few fresh blocks, so most accesses are re-references and a few percent are
first touches. Hash ids are small dense integers as in Mooncake's own traces (prefixes first,
then documents, then fresh blocks in the order they are made).

Written once per (accesses, seed, version) to benchmarks/data/ (gitignored) or --data DIR;
the keys, tokens, request starts and timestamps go beside it as .npy for the analyzer-alone run.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvset.workload import AgenticWorkload, WorkloadConfig

VERSION = 1  # bump when the shape changes: the cache name changes with it
ACCESSES = 80_000_000
SEED = 10
BLOCK_TOKENS = 64
DATA = Path(__file__).resolve().parent / "data"
# Long agentic contexts of 64-token blocks: an 8k-token system prefix, tool results of 1-6k tokens.
LARGE_WORKLOAD = WorkloadConfig(
    seed=SEED,
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
    block_size=BLOCK_TOKENS,
    requests_per_second=20.0,
)
# The workload's key ranges (kvset.workload): prefixes below 2^32, documents from 2^32, fresh from 2^40.
_DOC_BASE = 1 << 32
_FRESH_BASE = 1 << 40


@dataclass(frozen=True)
class LargeTrace:
    path: Path  # the .jsonl.gz
    arrays: Path  # folder of keys.npy, tokens.npy, request_starts.npy, request_timestamps.npy
    accesses: int
    requests: int
    distinct_blocks: int
    plain_bytes: int

    def describe(self) -> str:
        return (
            f"{self.path.name}: {self.accesses:,} accesses, {self.requests:,} requests "
            f"({self.accesses / self.requests:,.0f} blocks each), {self.distinct_blocks:,} distinct blocks, "
            f"{self.plain_bytes / 1e6:,.0f} MB of JSONL in {self.path.stat().st_size / 1e6:,.0f} MB of gzip"
        )


def _dense_ids(keys: np.ndarray, documents_blocks: int, prefix_span: int) -> np.ndarray:
    """Workload keys -> small dense ids: prefixes, then documents, then fresh blocks."""
    out = keys.copy()
    docs = (keys >= _DOC_BASE) & (keys < _FRESH_BASE)
    fresh = keys >= _FRESH_BASE
    out[docs] = keys[docs] - np.uint64(_DOC_BASE) + np.uint64(prefix_span)
    out[fresh] = keys[fresh] - np.uint64(_FRESH_BASE) + np.uint64(prefix_span + documents_blocks)
    return out


def _name(accesses: int, seed: int) -> str:
    return f"agentic-v{VERSION}-{accesses}-seed{seed}"


def _load(folder: Path, path: Path) -> LargeTrace:
    meta = dict(line.split("=", 1) for line in (folder / "meta.txt").read_text().split())
    return LargeTrace(
        path,
        folder,
        int(meta["accesses"]),
        int(meta["requests"]),
        int(meta["distinct"]),
        int(meta["plain_bytes"]),
    )


def large_trace(accesses: int = ACCESSES, seed: int = SEED, data: Path = DATA, progress=print) -> LargeTrace:
    """The cached trace, generated first if it is not there yet."""
    folder = data / _name(accesses, seed)
    path = folder / "trace.jsonl.gz"
    if (folder / "meta.txt").exists() and path.exists():
        return _load(folder, path)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    progress(f"generating {path} ({accesses:,} accesses; once, then cached)")
    cfg = LARGE_WORKLOAD if seed == SEED else WorkloadConfig(**{**LARGE_WORKLOAD.__dict__, "seed": seed})
    workload = AgenticWorkload(cfg)
    rng = np.random.default_rng(seed + 1)
    prefix_span = cfg.agent_types * 4096
    doc_blocks = int(workload._doc_offsets[-1])
    keys_parts, tokens_parts, starts, stamps = [], [], [], []
    written = plain = 0
    tmp = path.with_suffix(".tmp")
    gz = shutil.which("gzip")
    with open(tmp, "wb") as raw:
        # gzip in its own process: the second core compresses while this one formats
        proc = subprocess.Popen([gz, "-6", "-c"], stdin=subprocess.PIPE, stdout=raw) if gz else None
        if proc is None:
            import gzip

            sink = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6)
        else:
            sink = proc.stdin
        assert sink is not None
        while written < accesses:
            batch = workload.batch(1 << 18)
            ids = _dense_ids(batch.keys, doc_blocks, prefix_span)
            bounds = np.append(batch.request_starts, len(ids))
            lengths = np.diff(bounds)
            last = rng.integers(1, BLOCK_TOKENS + 1, len(lengths))
            input_lengths = BLOCK_TOKENS * (lengths - 1) + last
            outputs = rng.integers(16, 2048, len(lengths))
            ms = np.round(batch.timestamps[batch.request_starts] * 1000).astype(np.int64)
            text = ids.astype(str).tolist()
            out = []
            for r in range(len(lengths)):
                joined = ", ".join(text[bounds[r] : bounds[r + 1]])
                out.append(
                    f'{{"timestamp": {ms[r]}, "input_length": {input_lengths[r]}, '
                    f'"output_length": {outputs[r]}, "hash_ids": [{joined}]}}\n'
                )
            chunk = "".join(out).encode()
            plain += len(chunk)
            sink.write(chunk)
            tok = np.full(len(ids), BLOCK_TOKENS, dtype=np.int32)
            tok[bounds[1:] - 1] = last
            keys_parts.append(ids)
            tokens_parts.append(tok)
            starts.append(batch.request_starts + written)
            stamps.append(ms / 1000.0)
            written += len(ids)
        sink.close()
        if proc is not None and proc.wait() != 0:
            raise RuntimeError("gzip failed")
    keys = np.concatenate(keys_parts)
    del keys_parts
    np.save(folder / "keys.npy", keys)
    np.save(folder / "tokens.npy", np.concatenate(tokens_parts))
    np.save(folder / "request_starts.npy", np.concatenate(starts))
    np.save(folder / "request_timestamps.npy", np.concatenate(stamps))
    distinct = len(np.unique(keys))
    requests = sum(len(s) for s in starts)
    tmp.rename(path)
    (folder / "meta.txt").write_text(
        f"accesses={written} requests={requests} distinct={distinct} plain_bytes={plain}\n"
    )
    progress(f"generated in {time.perf_counter() - started:.0f} s")
    return _load(folder, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--accesses", type=int, default=ACCESSES)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--data", type=Path, default=DATA)
    args = p.parse_args(argv)
    print(large_trace(args.accesses, args.seed, args.data).describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
