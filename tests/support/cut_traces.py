"""A cache trace whose keys are not prefix-chained: blocks drawn by popularity from a pool, the stream
cut into requests of a fixed number of blocks, so a block comes back at any position of a request."""

from __future__ import annotations

import numpy as np


def cut_trace(
    rng: np.random.Generator, accesses: int, pool: int, request_blocks: int, skew: float = 0.8
) -> tuple[np.ndarray, np.ndarray]:
    """(keys, request starts): `accesses` draws from `pool` blocks, block i with weight 1 / (i + 1)^skew,
    keys spread over 64 bits; a request every `request_blocks` accesses."""
    weights = 1.0 / np.arange(1, pool + 1) ** skew
    ids = rng.choice(pool, size=accesses, p=weights / weights.sum())
    keys = (ids.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    return keys, np.arange(0, accesses, request_blocks, dtype=np.int64)
