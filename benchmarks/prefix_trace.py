"""A trace shaped like a coding agent's real one: long conversations re-sent whole, turn after turn.

WEKA's curated Claude Code traces (94.3M accesses over 3.45M distinct blocks, 49,334 requests of
about 1,900 blocks each, largest stack distance about 17k) are mostly prefix re-reads: a request
sends its conversation's whole context again (chained prefix hashes, so the same block keys in
the same order) and appends the few blocks of the new turn. 99.95 % of its re-references continue
a run of consecutive earlier uses, about 2,000 blocks a run. The real file is not in the repo;
this generator reproduces that structure with a seeded random model:

- a handful of conversations are open at once (`concurrency`), served in turn, now and then out
  of turn;
- a conversation starts with one of a few shared system prompts, then its own blocks;
- every request re-reads its conversation's context from the first block and appends fresh ones;
- now and then a conversation is cut back to a shorter prefix (an edited or retried turn) or
  closes and a new one opens in its place.

Keys are random 64-bit values, like chained prefix hashes.
"""

from __future__ import annotations

import numpy as np

from benchmarks.trace import BenchTrace

ACCESSES = 20_000_000
PREFIX_WORKLOAD = {
    "seed": 2026,
    "concurrency": 4,  # open conversations, served in turn: what bounds the stack distances
    "jump_probability": 0.1,  # a request goes to another conversation than the next in turn
    "system_prompts": 1,
    "system_blocks": 180,
    "first_context_blocks": 400,
    "new_blocks_mean": 70.0,  # fresh blocks a turn: ~3.7 % of the accesses are first touches
    "turns_mean": 45.0,
    "cut_probability": 0.02,  # a turn re-sends only part of the context
    "requests_per_second": 2.0,
    "block_size": 64,
}


def make_prefix_trace(accesses: int = ACCESSES, **overrides: float) -> BenchTrace:
    p = {**PREFIX_WORKLOAD, **overrides}
    rng = np.random.default_rng(int(p["seed"]))
    systems = [_fresh(rng, int(p["system_blocks"])) for _ in range(int(p["system_prompts"]))]

    def open_conversation() -> list[np.ndarray]:
        system = systems[int(rng.integers(len(systems)))]
        return [system, _fresh(rng, int(p["first_context_blocks"]))]

    open_ = [open_conversation() for _ in range(int(p["concurrency"]))]
    turns_left = [int(rng.geometric(1 / p["turns_mean"])) for _ in open_]
    parts: list[np.ndarray] = []
    starts: list[int] = []
    total = 0
    c = 0
    while total < accesses:
        c = (c + 1) % len(open_)
        if rng.random() < p["jump_probability"]:
            c = int(rng.integers(len(open_)))
        context = np.concatenate(open_[c])
        if rng.random() < p["cut_probability"]:
            context = context[: int(rng.integers(1, len(context) + 1))]
        new = _fresh(rng, 1 + int(rng.poisson(p["new_blocks_mean"])))
        request = np.concatenate([context, new])
        starts.append(total)
        parts.append(request)
        total += len(request)
        open_[c] = [request]
        turns_left[c] -= 1
        if turns_left[c] <= 0:
            open_[c] = open_conversation()
            turns_left[c] = int(rng.geometric(1 / p["turns_mean"]))
    keys = np.concatenate(parts)
    request_starts = np.asarray(starts, dtype=np.int64)
    arrival = np.cumsum(rng.exponential(1 / p["requests_per_second"], len(starts)))
    lengths = np.diff(np.append(request_starts, len(keys)))
    timestamps = np.repeat(arrival, lengths)
    return BenchTrace(keys, timestamps, request_starts, int(p["block_size"]))


def _fresh(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)
