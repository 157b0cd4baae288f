"""A small timed trace for the time-slot tests: accesses in 1 s slots, some slots empty."""

import numpy as np


def timed_trace(seconds: int, seed: int):
    """Accesses over `seconds` 1 s slots, some slots empty, keys reused across slots."""
    rng = np.random.default_rng(seed)
    keys, times = [], []
    for t in range(seconds):
        if t % 7 == 3:
            continue  # a slot that saw nothing
        n = int(rng.integers(1, 6))
        keys += (np.minimum(rng.zipf(1.3, n), 300) + 1000).tolist()
        times += [t + 0.5] * n
    return np.array(keys, dtype=np.uint64), np.array(times)
