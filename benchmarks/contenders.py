"""The three contenders, each measured the same way: time to a full answer and peak memory added.

- the exact analyzer (kvset.core.analyzer.Analyzer): the whole trace, then the whole curve;
- the pure-Python Fenwick baseline (benchmarks.pyfenwick): a prefix of the trace;
- libCacheSim's LRU: one pass over the whole trace per capacity, through its C trace reader
  (binary oracleGeneral file) and its C simulation loop, so no Python runs per request.

`python -m benchmarks.contenders NAME SPEC_JSON` runs one contender in a fresh process pinned
to one core and prints its result as one JSON line; benchmarks.run starts these processes.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.memory import PeakMemory
from benchmarks.pyfenwick import stack_distance_histogram
from benchmarks.trace import BenchTrace, load_trace, split_batches
from kvset.units import StreamUnits

WARMUP_ACCESSES = 50_000


# -- the exact analyzer ------------------------------------------------------------------
def _feed_all(analyzer, batches) -> None:
    for batch in batches:
        analyzer.feed_batch(batch)


def worst_bytes_per_block(tracked: int) -> float:
    """State bytes per tracked block just after the arrays double (the least favourable fill).

    The analyzer's state holds room for a power of two of blocks (from 1024 up) and doubles when
    it is full, so right after the doubling that follows `next_pow2(tracked)` blocks it holds
    twice that room for one block more.
    """
    from kvset.core.analyzer import Analyzer

    room = max(1024, 1 << max(0, tracked - 1).bit_length())
    grown = Analyzer(initial_tracked=2 * room)
    return grown.memory_bytes() / (room + 1)


def analyzer_histogram(trace: BenchTrace) -> tuple[list[int], int]:
    """(hist[1..max distance], first accesses) from kvset's analyzer: the reference for the checks."""
    from kvset.core.analyzer import Analyzer

    a = Analyzer(units=StreamUnits(trace.block_size, "format"))
    _feed_all(a, split_batches(trace))
    curve = a.curve()
    hist = np.diff(np.concatenate([[0], curve.block_hits])).tolist()
    return hist, a.first_time


def run_analyzer(trace: BenchTrace, capacities: list[int], prefix_accesses: int) -> dict:
    from kvset.core.analyzer import Analyzer

    batches = split_batches(trace)  # views into the trace, made before any clock starts
    prefix_batches = split_batches(trace.prefix(prefix_accesses))
    started = time.perf_counter()
    warm = Analyzer(units=StreamUnits(trace.block_size, "format"))
    _feed_all(warm, split_batches(trace.prefix(WARMUP_ACCESSES), 1 << 13))  # grows and compacts
    warm.curve()
    jit_seconds = time.perf_counter() - started
    del warm
    gc.collect()

    mem = PeakMemory()
    mem.start()
    started = time.perf_counter()
    a = Analyzer(units=StreamUnits(trace.block_size, "format"))
    _feed_all(a, batches)
    fed = time.perf_counter()
    curve = a.curve()
    done = time.perf_counter()
    rss = mem.delta_bytes()
    tracked = a.tracked_blocks
    result = {
        "accesses": a.accesses,
        "jit_load_seconds": jit_seconds,
        "feed_seconds": fed - started,
        "curve_seconds": done - fed,
        "total_seconds": done - started,
        "accesses_per_second": a.accesses / (fed - started),
        "state_bytes": a.memory_bytes(),
        "tracked_blocks": tracked,
        "state_bytes_per_block": a.memory_bytes() / tracked,
        "worst_state_bytes_per_block": worst_bytes_per_block(tracked),
        "rss_peak_delta_bytes": rss,
        "rss_bytes_per_block": rss / tracked,
        "memory_method": mem.method,
        "first_accesses": a.first_time,
        "attainable_hit_rate": curve.attainable(),
        "capacities": capacities,
        "hits": [curve.hits(c) for c in capacities],
    }
    del a, curve
    gc.collect()
    p = Analyzer(units=StreamUnits(trace.block_size, "format"))
    started = time.perf_counter()
    _feed_all(p, prefix_batches)
    p.curve()
    result["prefix_accesses"] = p.accesses
    result["prefix_accesses_per_second"] = p.accesses / (time.perf_counter() - started)
    return result


# -- the pure-Python Fenwick baseline ------------------------------------------------------
def run_python(trace: BenchTrace, prefix_accesses: int) -> dict:
    keys = trace.prefix(prefix_accesses).keys.tolist()  # Python ints, made before the clock starts
    gc.collect()
    mem = PeakMemory()
    mem.start()
    started = time.perf_counter()
    hist, first = stack_distance_histogram(keys)
    took = time.perf_counter() - started
    rss = mem.delta_bytes()
    top = len(hist) - 1
    while top > 0 and hist[top] == 0:
        top -= 1
    return {
        "accesses": len(keys),
        "total_seconds": took,
        "accesses_per_second": len(keys) / took,
        "tracked_blocks": first,
        "rss_peak_delta_bytes": rss,
        "rss_bytes_per_block": rss / first if first else 0.0,
        "memory_method": mem.method,
        "first_accesses": first,
        "histogram": hist[1 : top + 1],
    }


# -- libCacheSim ---------------------------------------------------------------------------
def hashpower_for(capacity: int) -> int:
    """log2 of the hash-table buckets for `capacity` objects: room for all of them, at least 2^12.

    libCacheSim's default (2^24 buckets) is sized for huge caches; on this trace it halves the
    speed of small caches (a 128 MiB table touched at random), so each pass gets a table sized
    to what it can hold: the fastest configuration we found, which is the fair one to compare.
    """
    return max(12, math.ceil(math.log2(max(2, capacity))) + 1)


def run_libcachesim(oracle_path: Path, accesses: int, capacities: list[int]) -> dict:
    import libcachesim as lcs

    reader = lcs.TraceReader(str(oracle_path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    started = time.perf_counter()
    # one pass first: maps the file and faults its pages in, as the analyzer's trace is in memory too
    lcs.LRU(capacities[0], hashpower=hashpower_for(capacities[0])).process_trace(reader)
    warm_seconds = time.perf_counter() - started
    gc.collect()
    mem = PeakMemory()
    mem.start()
    passes = []
    for cap in capacities:
        started = time.perf_counter()
        cache = lcs.LRU(cap, hashpower=hashpower_for(cap))
        miss_ratio, _ = cache.process_trace(reader)
        took = time.perf_counter() - started
        del cache
        # the reader returns ratios; with one object per access the count is exact after rounding
        passes.append({"capacity": cap, "seconds": took, "hits": round((1.0 - miss_ratio) * accesses)})
    total = sum(p["seconds"] for p in passes)
    rss = mem.delta_bytes()
    return {
        "version": lcs.__version__,
        "accesses": accesses,
        "reader_requests": int(reader.get_num_of_req()),
        "warm_pass_seconds": warm_seconds,
        "total_seconds": total,
        "passes": passes,
        "accesses_per_second_per_pass": accesses * len(capacities) / total,
        "rss_peak_delta_bytes": rss,
        "rss_bytes_per_cached_block": rss / max(capacities),
        "memory_method": mem.method,
        "capacities": capacities,
        "hits": [p["hits"] for p in passes],
    }


# -- one contender in its own process ----------------------------------------------------------
def pin_to(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


def main(argv: list[str]) -> None:
    name, spec = argv[0], json.loads(argv[1])
    pin_to(spec.get("cpu"))
    if name == "analyzer":
        result = run_analyzer(
            load_trace(Path(spec["trace_dir"])), spec["capacities"], spec["prefix_accesses"]
        )
    elif name == "python":
        result = run_python(load_trace(Path(spec["trace_dir"])), spec["prefix_accesses"])
    elif name == "libcachesim":
        result = run_libcachesim(Path(spec["oracle_path"]), spec["accesses"], spec["capacities"])
    else:
        raise SystemExit(f"unknown contender {name!r}")
    result["cpu"] = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
