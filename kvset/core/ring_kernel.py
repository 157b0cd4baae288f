"""A time slot's tallies into a slot ring, compiled: both analyzers' kernels add each slot's
histograms and counters to the fine and coarse rings (kvset.core.slots.SlotRing) as the slot ends,
without returning to Python once per slot."""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core.kernel_layout import NO_SLOT
from kvset.core.kernel_types import Int
from kvset.core.slots import SlotRing

Ring = tuple[np.ndarray, ...]  # ring_arrays(...)
Spill = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # spill_arrays(...)
Rings = tuple[Ring, Spill, float, Ring, Spill]  # the fine ring and its spill, the coarse width, ring, spill


def ring_arrays(ring: SlotRing) -> Ring:
    """A SlotRing's arrays, as ring_add takes them."""
    return ring.blocks, ring.tokens, ring.counts, ring.requests, ring.slot_ids


def spill_arrays(ring: SlotRing) -> Spill:
    """Where ring_add sums the rows a newer slot takes over (a partition's SpillRing keeps them,
    kvset.core.partial_slots): empty arrays for a ring that drops them."""
    spill = getattr(ring, "spill_arrays", None)
    if spill is not None:
        kept: Spill = spill()
        return kept
    none = np.zeros(0, dtype=np.int64)
    return none, none, none, none


@njit(inline="always")
def ring_add(
    ring: Ring,
    spill: Spill,
    slot: Int,
    bucket_blocks: np.ndarray,
    bucket_tokens: np.ndarray,
    token_planes: bool,
    counts: np.ndarray,
    meta: np.ndarray,
    current_at: Int,
    requests_begun: Int,
) -> None:
    """`slot` becomes the ring's newest (meta[current_at]) unless it is older (time never runs
    backwards in a ring: an older slot's tallies go to the newest), its row taken over if it held
    another slot (that slot summed into `spill` first when it is kept); then the slot's tallies,
    the scratch, and the requests begun in it are added to the newest row. ring = ring_arrays(...).
    Without token planes the ring's tokens are left unwritten (the sampled analyzer fills them from
    the blocks). Loops by unsigned index, not slices: a slice's reference counts are atomic updates
    (see sampling_filter.gather_segment), and the rows were 4 % of the sampled kernel's time."""
    blocks, tokens, ring_counts, requests, ids = ring
    spill_blocks, spill_tokens, spill_counts, spill_requests = spill
    current = meta[current_at]
    fresh = False
    if current == NO_SLOT or slot > current:
        row = slot % ids.shape[0]
        if ids[row] != slot:
            fresh = True
            if spill_blocks.shape[0] > 0 and ids[row] != NO_SLOT:
                ur = np.uint64(row)
                for q in range(spill_blocks.shape[0]):
                    spill_blocks[np.uint64(q)] += blocks[ur, np.uint64(q)]
                    spill_tokens[np.uint64(q)] += tokens[ur, np.uint64(q)]
                for q in range(spill_counts.shape[0]):
                    spill_counts[np.uint64(q)] += ring_counts[ur, np.uint64(q)]
                spill_requests[0] += requests[ur]
            requests[row] = 0
            ids[row] = slot
        current = slot
        meta[current_at] = slot
    row = np.uint64(current % ids.shape[0])
    keep = 0 if fresh else 1  # a row taken over is written once, not cleared and then added to
    for q in range(bucket_blocks.shape[0]):
        blocks[row, np.uint64(q)] = keep * blocks[row, np.uint64(q)] + bucket_blocks[np.uint64(q)]
    if token_planes:
        for q in range(bucket_tokens.shape[0]):
            tokens[row, np.uint64(q)] = keep * tokens[row, np.uint64(q)] + bucket_tokens[np.uint64(q)]
    for q in range(counts.shape[0]):
        ring_counts[row, np.uint64(q)] = keep * ring_counts[row, np.uint64(q)] + counts[np.uint64(q)]
    requests[row] += requests_begun
