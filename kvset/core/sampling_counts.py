"""Bands by access count, for a sample that dropped the head boost (kvset.core.sampling_rates): the
sketch that counts every access, the band of each access by it, and the position bands' tallies
folded into one band when the boost is dropped."""

from __future__ import annotations

import numpy as np

from kvset.core import sampling_filter as SF
from kvset.core.feed_args import MAX_TIMESTAMP
from kvset.core.kernel_types import Int
from kvset.core.sampling_rates import BEFORE_PLAIN, COUNT_BANDS, SKETCH_CELLS

NO_BANDS = np.empty(0, dtype=np.int8)  # bands by position: the kernel counts ranges, not accesses


class CountBands:
    """The sketch of access counts and the band of every access of the batch being fed."""

    def __init__(self) -> None:
        self.sketch = np.zeros(SKETCH_CELLS, dtype=np.uint16)
        self.access_band = np.empty(0, dtype=np.int8)

    def gather(
        self,
        keys: np.ndarray,
        ts: np.ndarray,
        check: bool,
        start: int,
        salt: np.uint64,
        thresholds: np.ndarray,
        found: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> tuple[Int, bool, bool]:
        """The sampled accesses of keys[start:] into found (index, band, key; sampling_filter.
        gather_counted), their bands by count into access_band; a batch whose timestamps are refused
        is taken back out of the sketch. Returns (how many, within bounds, never decreasing)."""
        n = len(keys)
        if self.access_band.shape[0] < n:
            self.access_band = np.empty(n, dtype=np.int8)
        m, ok, ordered = SF.gather_counted(
            keys[start:],
            ts[start:] if check else ts,
            check,
            MAX_TIMESTAMP,
            salt,
            thresholds,
            self.sketch,
            COUNT_BANDS - 1,
            self.access_band[start:n],
            *found,
        )
        if not ok:
            SF.uncount(keys[start:], salt, self.sketch)
        found[0][:m] += start
        return int(m), bool(ok), bool(ordered)


def fold_position_bands(
    band_counts: np.ndarray, sampled: np.ndarray, hist: np.ndarray, ghist: np.ndarray
) -> None:
    """What the position bands tallied, as the one band BEFORE_PLAIN: post-stratification scales it
    to its exact access count, as a fixed-size sample's tallies at rates since fallen."""
    for tally, axis in ((band_counts, 0), (sampled, 1), (hist, 1), (ghist, 2)):
        total = tally.sum(axis=axis)
        tally[...] = 0
        np.moveaxis(tally, axis, 0)[BEFORE_PLAIN] = total
