"""Bands by access count, for a sample that dropped the head boost (kvset.core.sampling_rates): the
sketch that counts every access, the band of each access by it, and the plain tallies that stand
for what was tallied before, as one band, when the boost is dropped."""

from __future__ import annotations

import numpy as np

from kvset.core import sampling_filter as SF
from kvset.core.feed_args import MAX_TIMESTAMP
from kvset.core.kernel_types import Int
from kvset.core.sampling_kernel import T_ACCESSES, T_BEYOND, T_FIRST_TIME
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


class PlainTallies:
    """While the heads are boosted: the tallies of the blocks kept at every band (hash <= L) alone,
    weighed 1 / R, a plain SHARDS sample of the stream. Should the boost be dropped, they stand for
    what was tallied before: the boosted bands' own tallies carry the bias the drop is for (a block
    kept only at boosted positions is first seen at a re-access: the distinct blocks came out 10-30 %
    too many on 200k-access traces cut into requests at 5 %, where the drop comes late)."""

    def __init__(self, groups: int, kinds: int, n_fine: int, n_grid: int) -> None:
        self.sampled = np.zeros((groups, kinds, 2), dtype=np.float64)  # [group, kind, unit]
        self.hist = np.zeros((2, n_fine), dtype=np.float64)  # [unit, fine bucket]
        self.ghist = np.zeros((2, groups, n_grid), dtype=np.float64)  # [unit, group, grid bucket]

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.sampled, self.hist, self.ghist

    def fill_tokens(self, same_tokens: int) -> None:
        """The tokens planes from the blocks', as SampledAnalyzer's when accesses stop having one size."""
        self.hist[1] = self.hist[0] * same_tokens
        self.ghist[1] = self.ghist[0] * same_tokens

    def fold_position_bands(
        self, band_counts: np.ndarray, sampled: np.ndarray, hist: np.ndarray, ghist: np.ndarray
    ) -> None:
        """What was tallied while the heads were boosted, as the one band BEFORE_PLAIN: its exact
        access count, and the plain tallies made to sum to it by scaling their hits alone. So its
        first accesses and those beyond the horizon stay the plain sample's (Horvitz-Thompson, each
        1 / R), and its hits are the rest: post-stratifying them all by accesses instead (a ratio
        estimate) scales the first accesses with whether the hot blocks happen to be in the sample,
        +26 % on one 200k-access trace cut into requests at 5 % (the sample missed its hottest)."""
        total = band_counts.sum(axis=0)
        band_counts[...] = 0
        band_counts[BEFORE_PLAIN] = total
        plain = self.sampled.sum(axis=0)  # [kind, unit]
        known = plain[T_FIRST_TIME] + plain[T_BEYOND]
        hits = plain[T_ACCESSES] - known
        scale = np.where(hits > 0, np.maximum(0.0, total - known) / np.where(hits > 0, hits, 1.0), 1.0)
        for u in range(2):
            self.hist[u] *= scale[u]
            self.ghist[u] *= scale[u]
            g = self.sampled[:, :, u]
            g[:, T_ACCESSES] = (
                g[:, T_FIRST_TIME]
                + g[:, T_BEYOND]
                + scale[u] * (g[:, T_ACCESSES] - g[:, T_FIRST_TIME] - g[:, T_BEYOND])
            )
        for tally, axis, part in ((sampled, 1, self.sampled), (hist, 1, self.hist), (ghist, 2, self.ghist)):
            tally[...] = 0
            np.moveaxis(tally, axis, 0)[BEFORE_PLAIN] = part
