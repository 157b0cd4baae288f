"""Small prefix-chained traces for the property tests of the run kernel and of Belady MIN: a few
conversations re-sent whole turn after turn, cut back now and then, with stray re-reads of any
earlier block that break the runs (the shape of real KV traces, in miniature)."""

from __future__ import annotations

import numpy as np


def conversations_trace(
    rng: np.random.Generator,
    conversations: int,
    requests: int,
    turn_blocks: int,
    stray: float,
    system_blocks: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(keys as uint64 from 1 up, request starts): each request is its conversation's context plus a
    new turn of up to `turn_blocks` blocks; a shared system prompt of up to `system_blocks` first."""
    fresh = iter(range(1, 1 << 30))
    system = [next(fresh) for _ in range(int(rng.integers(0, system_blocks)))]
    contexts = [list(system) for _ in range(conversations)]
    keys: list[int] = []
    starts: list[int] = []
    for _ in range(requests):
        c = int(rng.integers(conversations))
        context = contexts[c]
        if context and rng.random() < 0.2:
            context = context[: int(rng.integers(0, len(context) + 1))]
        request = context + [next(fresh) for _ in range(1 + int(rng.integers(turn_blocks)))]
        contexts[c] = request
        starts.append(len(keys))
        for key in request:
            if keys and rng.random() < stray:
                keys.append(keys[int(rng.integers(len(keys)))])
            keys.append(key)
    return np.asarray(keys, dtype=np.uint64), np.asarray(starts, dtype=np.int64)
