"""Log-spaced grids of stack distances: exact up to 2^X, then 2^Q buckets per doubling.

The windowed histograms of both analyzers use WINDOW_GRID (exact to 128, then about 3 % steps); the
sampled analyzer's all-time histograms FINE_GRID (exact to 256, then 0.3 % steps, so the grid adds
nothing measurable to the sampling error). A grid curve is exact at each bucket's upper edge.

bucket_of() is the compiled form for the kernels; with the grid's bits as constants it folds to the
few instructions each kernel had written out.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np
from numba import njit

from kvset.core.intrinsics import ctlz
from kvset.core.kernel_types import Int


@njit(inline="always")
def bucket_of(d: Int, exact_bits: Int, octave_bits: Int) -> Int:
    """LogGrid(exact_bits, octave_bits).bucket(d) in registers (d >= 1)."""
    if d <= (1 << exact_bits):
        return d - 1
    e = 63 - np.int64(ctlz(np.uint64(d)))
    return (1 << exact_bits) + (e - exact_bits - 1) * (1 << octave_bits) + (d >> (e - octave_bits))


class LogGrid(NamedTuple):
    exact_bits: int  # distances up to 2^exact_bits have a bucket each
    octave_bits: int  # then 2^octave_bits buckets per doubling

    @property
    def exact(self) -> int:
        return 1 << self.exact_bits

    @property
    def per_octave(self) -> int:
        return 1 << self.octave_bits

    def bucket(self, d: int) -> int:
        """Bucket index of stack distance d >= 1."""
        if d <= self.exact:
            return d - 1
        e = d.bit_length() - 1
        return (
            self.exact
            + (e - self.exact_bits) * self.per_octave
            + (d >> (e - self.octave_bits))
            - self.per_octave
        )

    def upper_edge(self, bucket: int) -> int:
        """Largest distance in `bucket`: the capacity at which a grid curve is exact."""
        if bucket < self.exact:
            return bucket + 1
        k = bucket - self.exact
        e = self.exact_bits + k // self.per_octave
        return ((self.per_octave + k % self.per_octave + 1) << (e - self.octave_bits)) - 1

    def size(self, horizon: int) -> int:
        """Buckets up to the horizon."""
        return self.bucket(max(1, horizon)) + 1

    def capacities(self, horizon: int) -> np.ndarray:
        """Each bucket's upper edge up to the horizon (read-only; made once per grid and horizon)."""
        return _capacities(self, int(horizon))


@lru_cache(maxsize=16)
def _capacities(grid: LogGrid, horizon: int) -> np.ndarray:
    caps = np.minimum(
        np.array([grid.upper_edge(b) for b in range(grid.size(horizon))], dtype=np.int64), horizon
    )
    caps.setflags(write=False)
    return caps


WINDOW_GRID = LogGrid(exact_bits=7, octave_bits=5)
FINE_GRID = LogGrid(exact_bits=8, octave_bits=8)
