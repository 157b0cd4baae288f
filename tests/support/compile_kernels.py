"""Compile the numba kernels once, in the pytest process that starts the workers, before they start.

numba caches a compiled kernel on disk (cache=True) the first time it runs with a given signature. On
a fresh clone, or after a compiled module changed (kvset.core.jit_cache drops every cache then), both
xdist workers and the `kvset` processes the tests start would otherwise compile the same kernels at
the same time, each its own copy. Here one process runs each kernel on a few accesses, with the
signatures the tests use most (per-access and shared tokens, int32 and int64, both orders, growth),
and writes the caches the others load. A cache already written is only loaded, so a warm run pays
about a second.

The work is cut in three parts, the analysis kernels, Belady MIN's, and the engine model with the
command's own paths, so that `make test` compiles them in three processes beside mypy (about 30, 25
and 20 CPU s on a fresh clone, mypy 20: four jobs of about equal length on the two cores).
"""

from __future__ import annotations

import contextlib
import io
import sys

import numpy as np

from tests.support.paths import MOONCAKE_TRACE


def compile_analysis() -> None:
    """The analyzer's kernels in every order, token kind and sampling, the distributed partial states
    and their merges, the free queue, the resident set and the pool replay."""
    from kvset.core.partial_sample import partial_sample
    from kvset.core.partial_sample_merge import merge as merge_samples
    from kvset.core.partial_stack import partial_stack
    from kvset.core.partial_stack_merge import merge as merge_stacks
    from kvset.core.pool_replay import PoolTrace
    from kvset.core.stack_distance import Sampling, new_analyzer
    from kvset.engine.resident_set import U64Set
    from kvset.engine_model.free_queue import FreeQueue
    from kvset.units import StreamUnits

    units = StreamUnits(16, "default")
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 300, 4000).astype(np.uint64)
    starts = np.arange(0, 4000, 40)
    stamps = np.linspace(0.0, 120.0, 4000)
    for order in ("forward", "reverse"):
        for tokens in (rng.integers(1, 17, 4000), rng.integers(1, 17, 4000).astype(np.int32), None):
            a = new_analyzer(units, horizon=64, order=order)  # a small horizon: growth and compaction
            a.feed(keys, tokens=tokens, request_starts=starts, timestamps=stamps)
            a.feed(keys[:100], timestamps=130.0)
            a.curve()
        for sampling in (Sampling(rate=0.5), Sampling(size=64)):
            s = new_analyzer(units, order=order, sampling=sampling)
            s.feed(keys, request_starts=starts, timestamps=stamps)
            s.curve()
    # the partial states of a distributed analysis and their merges (kvset.core.partial_stack, partial_sample)
    halves = [(keys[:2000], starts[:50]), (keys[2000:], starts[50:] - 2000)]
    for tokens in (rng.integers(1, 17, 4000), 16):
        cut = [
            tokens if np.ndim(tokens) == 0 else tokens[:2000],
            tokens if np.ndim(tokens) == 0 else tokens[2000:],
        ]
        stacks = [partial_stack(k, t, 64, "forward", s) for (k, s), t in zip(halves, cut, strict=True)]
        merge_stacks(*stacks).curve()
        samples = [
            partial_sample(k, t, 64, 0.5, 0, "forward", s) for (k, s), t in zip(halves, cut, strict=True)
        ]
        merge_samples(*samples).curve()
    queue = FreeQueue()
    queue.run(np.zeros(100, dtype=np.int8), keys[:100])
    resident = U64Set()
    resident.add(keys[:100])
    resident.contains(keys[:50])
    resident.discard(keys[:50])
    PoolTrace.of(keys, np.zeros((4000, 3), dtype=np.int32), stamps, starts).replay(64, {"tenant": [1]})


def compile_min() -> None:
    """Belady MIN's one pass, both of its methods in both orders (`auto` picks one by the trace):
    about a third of the compiling, so a process of its own."""
    from kvset.core.opt import opt_histogram

    rng = np.random.default_rng(0)
    keys = rng.integers(0, 300, 4000).astype(np.uint64)
    starts = np.arange(0, 4000, 40)
    for order in ("forward", "reverse"):
        for method in ("priority", "critical"):
            opt_histogram(keys, rng.integers(1, 17, 4000), request_starts=starts, order=order, method=method)


def compile_commands() -> None:
    """The engine model, then the trace scanner and `kvset analyze`'s own paths, exact and sampled."""
    from kvset.cli import main

    compile_engine_model()
    with contextlib.redirect_stdout(io.StringIO()):
        main(["analyze", str(MOONCAKE_TRACE), "--json"])
        main(["analyze", str(MOONCAKE_TRACE), "--sample", "0.1", "--json"])


def compile_engine_model() -> None:
    """The KV-event tracker and the engine model behind it (its tables, prefix chains, free queue),
    in both of vLLM's report modes: a source test's first batch would otherwise compile them for
    seconds while its publisher's next batches wait."""
    from kvset.engine.kv_event_tracker import KvEventTracker
    from kvset.rejects import RejectCounter
    from tests.support.kv_values import sim_messages
    from tests.support.vllm_engine_sim import SimEngine, agentic_requests

    for report_hits in (True, False):
        batches = SimEngine(250, report_hits=report_hits).run(agentic_requests(8, 10, sessions=3, seed=5))
        tracker = KvEventTracker(["tcp://e"], [None], RejectCounter())
        for frames in sim_messages(batches):
            tracker.published(0, frames, now=0.0, at=0.0)
        tracker.take(at=0.0, final=True)


PARTS = {"analysis": compile_analysis, "min": compile_min, "commands": compile_commands}


def compile_kernels(parts: list[str] | None = None) -> None:
    for name in parts or list(PARTS):
        PARTS[name]()


if __name__ == "__main__":  # make test, before the workers start: `python -m ... [analysis|min|commands]`
    compile_kernels(sys.argv[1:])
