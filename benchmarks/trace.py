"""The benchmark's trace: a seeded agentic workload of 10M accesses over about 1M distinct blocks.

The workload generator's defaults give long sessions with few fresh blocks per access; the
benchmark asks for shorter sessions, more of them and a larger document pool, so that about
one access in ten is a first touch (10M accesses -> ~1M distinct blocks). The generator's
defaults stay as they are; only these overrides are the benchmark's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kvset.types import AccessBatch
from kvset.workload import WorkloadConfig, generate

ACCESSES = 10_000_000
BATCH_ACCESSES = 1 << 20  # what kvset's trace reader hands the analyzer per batch
BENCH_WORKLOAD = {
    "seed": 2026,
    "mean_turns": 6.0,
    "concurrency": 128,
    "documents": 100_000,
    "document_zipf": 1.1,
}

# libCacheSim's oracleGeneral binary record: clock time, object id, object size, next access (vtime).
ORACLE_GENERAL = np.dtype([("time", "<u4"), ("obj_id", "<u8"), ("size", "<u4"), ("next_access", "<i8")])


@dataclass(frozen=True)
class BenchTrace:
    keys: np.ndarray  # uint64, one access each
    timestamps: np.ndarray  # float64 seconds, one per access
    request_starts: np.ndarray  # int64
    block_size: int  # tokens per block

    @property
    def accesses(self) -> int:
        return len(self.keys)

    def prefix(self, n: int) -> BenchTrace:
        """The first n accesses, extended to the end of the request that access n-1 belongs to."""
        i = int(np.searchsorted(self.request_starts, n, side="left"))
        cut = int(self.request_starts[i]) if i < len(self.request_starts) else self.accesses
        return BenchTrace(self.keys[:cut], self.timestamps[:cut], self.request_starts[:i], self.block_size)


@dataclass(frozen=True)
class TraceShape:
    accesses: int
    distinct_blocks: int
    requests: int
    attainable_hit_rate: float  # re-references / accesses: the infinite-cache hit rate
    trace_seconds: float
    workload: dict

    def describe(self) -> str:
        return (
            f"{self.accesses:,} accesses over {self.distinct_blocks:,} distinct blocks in {self.requests:,} requests "
            f"({self.accesses / self.requests:.0f} blocks a request, {self.trace_seconds:,.0f} s of trace time); "
            f"attainable hit rate {100 * self.attainable_hit_rate:.2f} %"
        )


def make_trace(accesses: int = ACCESSES, **overrides) -> BenchTrace:
    params = {**BENCH_WORKLOAD, **overrides}
    batch = generate(accesses, WorkloadConfig(), **params)
    assert batch.request_starts is not None and isinstance(batch.timestamps, np.ndarray)
    return BenchTrace(batch.keys, batch.timestamps, batch.request_starts, int(batch.block_size or 1))


def shape_of(trace: BenchTrace, **overrides) -> TraceShape:
    distinct = int(len(np.unique(trace.keys)))
    return TraceShape(
        accesses=trace.accesses,
        distinct_blocks=distinct,
        requests=len(trace.request_starts),
        attainable_hit_rate=(trace.accesses - distinct) / trace.accesses if trace.accesses else 0.0,
        trace_seconds=float(trace.timestamps[-1] - trace.timestamps[0]) if trace.accesses else 0.0,
        workload={**asdict(WorkloadConfig()), **BENCH_WORKLOAD, **overrides},
    )


def split_batches(trace: BenchTrace, max_accesses: int = BATCH_ACCESSES) -> list[AccessBatch]:
    """Whole requests per batch, at most max_accesses each, as kvset's trace reader batches a file."""
    bounds = np.append(trace.request_starts, trace.accesses)
    batches = []
    first = 0
    while first < len(trace.request_starts):
        begin = int(bounds[first])
        last = int(np.searchsorted(bounds, begin + max_accesses, side="right")) - 1
        last = min(max(last, first + 1), len(trace.request_starts))
        end = int(bounds[last])
        batches.append(
            AccessBatch(
                keys=trace.keys[begin:end],
                request_starts=trace.request_starts[first:last] - begin,
                timestamps=trace.timestamps[begin:end],
                block_size=trace.block_size,
            )
        )
        first = last
    return batches


def save_trace(trace: BenchTrace, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    np.save(directory / "keys.npy", trace.keys)
    np.save(directory / "timestamps.npy", trace.timestamps)
    np.save(directory / "request_starts.npy", trace.request_starts)
    (directory / "block_tokens.txt").write_text(str(trace.block_size))


def load_trace(directory: Path) -> BenchTrace:
    return BenchTrace(
        keys=np.load(directory / "keys.npy"),
        timestamps=np.load(directory / "timestamps.npy"),
        request_starts=np.load(directory / "request_starts.npy"),
        block_size=int((directory / "block_tokens.txt").read_text()),  # the file keeps its old name
    )


def write_oracle_general(trace: BenchTrace, path: Path) -> None:
    """The trace as libCacheSim's binary oracleGeneral records, every object of size 1 (one block)."""
    records = np.empty(trace.accesses, dtype=ORACLE_GENERAL)
    records["time"] = trace.timestamps.astype(np.uint32)
    records["obj_id"] = trace.keys
    records["size"] = 1
    records["next_access"] = -1  # unused by LRU
    records.tofile(path)


def log_capacities(distinct_blocks: int, n: int = 20) -> list[int]:
    """n log-spaced capacities from 1 block to the number of distinct blocks (where LRU stops missing)."""
    caps = np.unique(np.round(np.geomspace(1, max(1, distinct_blocks), n)).astype(np.int64))
    return [int(c) for c in caps]
