"""The sampled analyzer's state arrays (kvset.core.sampling): the hash table of tracked blocks, their
slots and the Fenwick tree of slot weights, sized for a number of tracked blocks and grown by doubling,
with the weights in the kernel's fixed point; and the time-slot rings' arrays the kernel adds to."""

from __future__ import annotations

import numpy as np

from kvset.core import hash_table as HT
from kvset.core import sampling_kernel as SK
from kvset.core import sampling_slots as SS
from kvset.core.feed_args import no_hugepage_advice

MIN_TRACKED = 1 << 14  # blocks the arrays start with: growing from 1k to 16k was 8 ms of a 65 ms run


class SampleState:
    """The sampled kernel's arrays, sized for `capacity` tracked blocks; grown by doubling."""

    def __init__(self, capacity: int) -> None:
        self.meta = np.zeros(SK.META_SIZE, dtype=np.int64)
        self._allocate(capacity)

    def _allocate(self, capacity: int) -> None:
        with no_hugepage_advice():
            cells = 1 << max(0, int(2 * capacity - 1).bit_length())
            self.mask = cells - 1
            self.table = np.empty(2 * cells, dtype=np.uint64)
            self.table[1::2] = HT.EMPTY
            n = (
                4 * capacity
            )  # slots: 4 times the blocks, so compaction is amortized (2: 0.1 ns an access more)
            self.slot_key = np.zeros(n, dtype=np.uint64)
            self.slot = np.zeros((n, 4), dtype=np.int64)  # (weight, weighted accesses before, index, band)
            self.fen = np.zeros(n + 1, dtype=np.int64)
        self.meta[SK.S_CAPACITY] = capacity

    def slots(self) -> tuple[np.ndarray, np.ndarray]:
        return self.slot_key, self.slot

    def grow(self) -> None:
        old_table, old_mask, old_slots = self.table, self.mask, self.slots()
        now = int(self.meta[SK.S_NOW])
        self._allocate(2 * int(self.meta[SK.S_CAPACITY]))
        tracked = SS.move_slots(old_table, old_mask, *old_slots, now, self.table, self.mask, *self.slots())
        self.meta[SK.S_NOW] = tracked
        self.meta[SK.S_LIVE] = SS.rebuild_fenwick(self.slot, self.fen, tracked)

    def reweight(self, fixed: np.ndarray) -> None:
        """Give every tracked block its band's weight at the current rates."""
        now = int(self.meta[SK.S_NOW])
        live = self.slot[:now, SS.W_WEIGHT] > 0
        self.slot[:now, SS.W_WEIGHT] = np.where(live, fixed[self.slot[:now, SS.W_BAND]], 0)
        self.meta[SK.S_LIVE] = SS.rebuild_fenwick(self.slot, self.fen, now)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.table, self.fen, *self.slots()))


def fixed_weights(weights: np.ndarray) -> np.ndarray:
    """Weights in the kernel's fixed point (weight 1 = WEIGHT_ONE)."""
    return np.round(weights * SK.WEIGHT_ONE).astype(np.int64)
