"""One part of the large-trace benchmark in its own process: `python -m benchmarks.large_parts ROLE SPEC_JSON`.

Roles: `reader` (kvset's reader alone: bytes to batches), `analyzer` (the analyzer alone on the
trace's keys, loaded from .npy), `reference` (the msgspec line reader and the analyzer, today's
path: the figures the new one must equal), `first_replay` (the replay source's first data). Each prints one JSON line; benchmarks.large starts
them and reads the child's peak RSS from wait4.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from kvset.units import StreamUnits


def _curve_figures(analyzer, curve, capacities: list[int]) -> dict:
    return {
        "accesses": analyzer.accesses,
        "tokens": analyzer.tokens,
        "first_time": analyzer.first_time,
        "rereferences": analyzer.rereferences,
        "beyond_horizon": analyzer.beyond_horizon,
        "max_distance": curve.max_distance(),
        "block_hits": [curve.hits(c) for c in capacities],
        "token_hits": [curve.hits(c, "tokens") for c in capacities],
        "block_hit_rates": [float(r) for r in curve.hit_rates(capacities, "blocks")],
        "token_hit_rates": [float(r) for r in curve.hit_rates(capacities, "tokens")],
    }


def run_reader(path: str) -> dict:
    """kvset's reader alone, as `kvset analyze` reads a file: the stream of time-ordered batches."""
    from kvset.formats.stream import TraceStream

    started = time.perf_counter()
    stream = TraceStream(path)
    accesses = sum(len(batch) for batch in stream)
    took = time.perf_counter() - started
    return {"seconds": took, "accesses": accesses, "requests": stream.requests}


def run_reference(path: str, capacities: list[int]) -> dict:
    """Today's path: msgspec line by line (kvset.formats.traces.read_trace), then the analyzer."""
    from kvset.formats import read_trace
    from kvset.offline import InputSummary, analyze_batches

    started = time.perf_counter()
    trace = read_trace(path, **_msgspec_only())
    read = time.perf_counter() - started
    summary = InputSummary(path, trace.format, trace.units, requests=trace.requests)
    result = analyze_batches(trace.batches(), summary)
    took = time.perf_counter() - started
    return {
        "seconds": took,
        "read_seconds": read,
        "requests": trace.requests,
        "rejected": trace.rejects.total,
        **_curve_figures(result.analyzer, result.curve, capacities),
    }


def _msgspec_only() -> dict:
    """read_trace's switch for the msgspec path, where the reader has one."""
    import inspect

    from kvset.formats import read_trace

    return {"byte_scanner": False} if "byte_scanner" in inspect.signature(read_trace).parameters else {}


def run_analyzer(arrays: str, capacities: list[int]) -> dict:
    """The analyzer alone, fed as `kvset analyze` feeds it (batches of 2^20 accesses with per-access times)."""
    from kvset.core.analyzer import Analyzer
    from kvset.types import AccessBatch

    folder = Path(arrays)
    keys = np.load(folder / "keys.npy")
    tokens = np.load(folder / "tokens.npy")
    starts = np.load(folder / "request_starts.npy")
    stamps = np.repeat(np.load(folder / "request_timestamps.npy"), np.diff(np.append(starts, len(keys))))
    step = 1 << 20
    cuts = np.searchsorted(starts, np.arange(0, len(keys), step))
    bounds = np.unique(np.append(starts[np.minimum(cuts, len(starts) - 1)], len(keys)))
    batches = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        first, last = np.searchsorted(starts, [lo, hi])
        batches.append(AccessBatch(keys[lo:hi], tokens[lo:hi], starts[first:last] - lo, stamps[lo:hi], 64))
    warm = Analyzer(units=StreamUnits(64, "format"))
    warm.feed_batch(
        AccessBatch(keys[:100_000], tokens[:100_000], np.zeros(1, np.int64), stamps[:100_000], 64)
    )
    warm.curve()
    started = time.perf_counter()
    a = Analyzer(units=StreamUnits(64, "format"))
    for b in batches:
        a.feed_batch(b)
    curve = a.curve()
    took = time.perf_counter() - started
    return {"seconds": took, **_curve_figures(a, curve, capacities)}


def run_first_replay(path: str) -> dict:
    """How long `kvset-top --replay FILE --speed max` takes to hand the monitor its first accesses."""
    import threading

    from kvset.sources.replay import ReplaySource

    started = time.perf_counter()
    for update in ReplaySource(path, speed=None).updates(threading.Event()):
        if update.accesses is not None:
            return {"first_data_seconds": time.perf_counter() - started, "accesses": len(update.accesses)}
    return {"first_data_seconds": None}


def main(argv: list[str]) -> None:
    role, spec = argv[0], json.loads(argv[1])
    if role == "reader":
        result = run_reader(spec["path"])
    elif role == "reference":
        result = run_reference(spec["path"], spec["capacities"])
    elif role == "first_replay":
        result = run_first_replay(spec["path"])
    elif role == "analyzer":
        result = run_analyzer(spec["arrays"], spec["capacities"])
    else:
        raise SystemExit(f"unknown role {role!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
