"""Time slots: per-slot histograms and counters behind the windowed curves and the churn series.

The analyzer keeps two rings of slots (fine: 1 s for the last minutes; coarse: 60 s for the last
hours). A slot holds a stack-distance histogram on the kernel's log grid of capacities (about 3 %
steps) plus the kernel's counters, so any run of consecutive slots sums to a grid curve.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kvset.core import kernel_layout as KL
from kvset.core.curve import HitRateCurve

NO_SLOT = KL.NO_SLOT


class SlotRing:
    """Histograms and counters per time slot, for the last `n_slots` slots of `width` seconds."""

    def __init__(self, width: float, n_slots: int, n_buckets: int) -> None:
        self.width = float(width)
        self.n_slots = int(n_slots)
        self.blocks = np.zeros((n_slots, n_buckets), dtype=np.int64)
        self.tokens = np.zeros((n_slots, n_buckets), dtype=np.int64)
        self.counts = np.zeros((n_slots, KL.COUNTS_SIZE), dtype=np.int64)
        self.requests = np.zeros(n_slots, dtype=np.int64)
        self.slot_ids = np.full(n_slots, NO_SLOT, dtype=np.int64)
        self.current: int | None = None  # absolute index of the newest slot
        # The kernels add each slot's tallies as it ends (ring_kernel.ring_add). Rows are taken over
        # lazily, when a newer slot first writes to them: readers check the slot ids, so a jump
        # over many empty slots costs nothing.

    def slot_of(self, t: float) -> int:
        return math.floor(t / self.width)

    def rows_between(self, first_slot: int, last_slot: int) -> np.ndarray:
        """Rows holding slots in [first_slot, last_slot]."""
        return np.flatnonzero((self.slot_ids >= first_slot) & (self.slot_ids <= last_slot))

    def span_seconds(self) -> float:
        return self.width * self.n_slots

    def series(self, seconds: float, grid: np.ndarray, horizon: int) -> SlotSeries:
        """The last `seconds` of slots, oldest first; slots that saw nothing are zeros. The
        histograms stay in the ring (read when asked), the counters are copied."""
        n = min(self.n_slots, max(1, math.ceil(seconds / self.width)))
        end = -1 if self.current is None else self.current
        want = np.arange(end - n + 1, end + 1)
        rows = want % self.n_slots
        if self.current is None:
            rows[:] = -1
        else:
            rows[self.slot_ids[rows] != want] = -1
        present = rows >= 0
        counts = np.zeros((n, KL.COUNTS_SIZE), dtype=np.int64)
        requests = np.zeros(n, dtype=np.int64)
        counts[present] = self.counts[rows[present]]
        requests[present] = self.requests[rows[present]]
        return SlotSeries(self.width, end, counts, requests, grid, horizon, self.blocks, self.tokens, rows)

    def window_curve(self, window: float, grid: np.ndarray, horizon: int) -> HitRateCurve:
        """The grid curve of the slots inside the last `window` seconds."""
        n = max(1, math.ceil(window / self.width))
        end = -1 if self.current is None else self.current
        return self.span_curve(end - n + 1, end, grid, horizon, window)

    def span_curve(
        self, first_slot: int, last_slot: int, grid: np.ndarray, horizon: int, window: float
    ) -> HitRateCurve:
        """The grid curve of the slots in [first_slot, last_slot], summed where they lie in the ring."""
        rows = self.rows_between(first_slot, last_slot)
        return grid_curve(
            grid,
            horizon,
            _sum_rows(self.blocks, rows),
            _sum_rows(self.tokens, rows),
            _sum_rows(self.counts, rows),
            window,
        )


def _sum_rows(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """values[rows].sum(axis=0) without copying the rows out when they are consecutive (the usual
    case: a window that does not wrap round the ring), since the copy costs more than the sum."""
    if len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):
        summed: np.ndarray = values[int(rows[0]) : int(rows[-1]) + 1].sum(axis=0)
        return summed
    picked: np.ndarray = values[rows].sum(axis=0)
    return picked


@dataclass(frozen=True, eq=False)
class SlotSeries:
    """Per-slot counters and grid histograms over the recent past, oldest first (missing slots are zeros).

    The histograms are read from the ring's arrays when asked, not copied out (a live snapshot
    reads 300 slots of them every second and uses a few sums): read them before the analyzer is
    fed again. `scale` divides every count (a sampled analyzer's fixed point)."""

    width: float  # seconds per slot
    end_slot: int  # absolute index of the newest slot (-1: none yet)
    counts: np.ndarray  # (n, COUNTS_SIZE): the kernel's counters per slot (already divided by scale)
    requests: np.ndarray
    grid: np.ndarray  # capacities of the grid buckets
    horizon: int
    ring_blocks: np.ndarray  # the ring's (n_slots, n_buckets) grid histograms
    ring_tokens: np.ndarray
    rows: np.ndarray  # each slot's row in the ring; -1 where the ring does not hold it
    scale: float = 1.0

    def __len__(self) -> int:
        return len(self.counts)

    @property
    def end_time(self) -> float:
        """Timestamp at which the newest slot ends."""
        return (self.end_slot + 1) * self.width

    @property
    def accesses(self) -> np.ndarray:
        return self.counts[:, KL.C_ACCESSES]

    @property
    def first_time(self) -> np.ndarray:
        return self.counts[:, KL.C_FIRST_TIME]

    @property
    def rereferences(self) -> np.ndarray:
        """Accesses that were hits inside the horizon."""
        return self.counts[:, KL.C_HITS]

    @property
    def beyond_horizon(self) -> np.ndarray:
        return self.counts[:, KL.C_BEYOND]

    @property
    def blocks(self) -> np.ndarray:
        """(n, n_buckets) block histograms, copied out of the ring."""
        return self._per_slot(self.ring_blocks)

    @property
    def tokens(self) -> np.ndarray:
        return self._per_slot(self.ring_tokens)

    def _per_slot(self, ring: np.ndarray) -> np.ndarray:
        present = self.rows >= 0
        out = np.zeros((len(self.rows), ring.shape[1]), dtype=np.int64)
        out[present] = ring[self.rows[present]]
        return self._scaled(out)

    def _scaled(self, values: np.ndarray) -> np.ndarray:
        return values if self.scale == 1 else values / self.scale

    def block_hits_at(self, capacity: int) -> np.ndarray:
        """Per slot, the block hits of an LRU cache of `capacity` (on the grid: at the largest grid
        capacity not above it, so a lower bound between grid points)."""
        upto = int(np.searchsorted(self.grid, capacity, side="right"))
        per_row = self.ring_blocks[:, :upto].sum(axis=1)  # summed in place, every row of the ring
        hits = np.where(self.rows >= 0, per_row[self.rows], 0)
        return self._scaled(hits)

    def curve(self, first: int, last: int) -> HitRateCurve:
        """The grid curve of slots [first, last)."""
        rows = self.rows[first:last]
        rows = rows[rows >= 0]
        return grid_curve(
            self.grid,
            self.horizon,
            self._scaled(_sum_rows(self.ring_blocks, rows)),
            self._scaled(_sum_rows(self.ring_tokens, rows)),
            self.counts[first:last].sum(axis=0),
            (last - first) * self.width,
        )


class TimeSlotViews:
    """What an analyzer with a fine and a coarse ring (self.fine, self.coarse) on the grid
    self.grid_capacities shows of them: their widths and spans, window curves and slot series
    (an analyzer whose rings hold other than hits overrides them), consecutive window curves."""

    fine: SlotRing
    coarse: SlotRing
    grid_capacities: np.ndarray
    horizon: int

    @property
    def fine_slot_seconds(self) -> float:
        return self.fine.width

    @property
    def fine_span_seconds(self) -> float:
        """How far back the fine ring reaches."""
        return self.fine.span_seconds()

    @property
    def coarse_slot_seconds(self) -> float:
        return self.coarse.width

    @property
    def coarse_span_seconds(self) -> float:
        return self.coarse.span_seconds()

    def consecutive_window_curves(self, seconds: float, points: int) -> list[HitRateCurve]:
        """Grid curves of the last `points` consecutive windows of `seconds` each, oldest first
        (summed in the ring: a live snapshot reads these trends every second)."""
        ring, per_window, points = trend_layout(self.fine, self.coarse, seconds, points)
        if points < 2:
            return []
        first = (-1 if ring.current is None else ring.current) - per_window * points + 1
        return [
            ring.span_curve(
                first + k * per_window,
                first + (k + 1) * per_window - 1,
                self.grid_capacities,
                self.horizon,
                per_window * ring.width,
            )
            for k in range(points)
        ]

    def ring_for(self, window: float) -> SlotRing:
        """The ring a window is read from: the fine one while it reaches back that far."""
        return self.fine if window <= self.fine.span_seconds() else self.coarse

    def window_curve(self, window: float) -> HitRateCurve:
        """The grid curve of the last `window` seconds."""
        return self.ring_for(window).window_curve(float(window), self.grid_capacities, self.horizon)

    def slot_series(self, seconds: float, coarse: bool = False) -> SlotSeries:
        """Per-slot counters and grid histograms for the last `seconds`, oldest first."""
        ring = self.coarse if coarse else self.fine
        return ring.series(seconds, self.grid_capacities, self.horizon)


def consecutive_window_curves(
    fine: SlotRing, coarse: SlotRing, series: Callable[..., SlotSeries], seconds: float, points: int
) -> list[HitRateCurve]:
    """Grid curves of the last `points` consecutive windows of `seconds` each, oldest first, from the
    ring that holds them (series(seconds, coarse=...) gives a ring's slot series).

    Fewer than two windows fit in the rings: an empty list (no trend to show).
    """
    ring, per_window, points = trend_layout(fine, coarse, seconds, points)
    if points < 2:
        return []
    s = series(per_window * points * ring.width, coarse=ring is coarse)
    return [s.curve(k * per_window, (k + 1) * per_window) for k in range(points)]


def trend_layout(fine: SlotRing, coarse: SlotRing, seconds: float, points: int) -> tuple[SlotRing, int, int]:
    """(the ring, slots per window, windows) of a trend of `points` windows of `seconds`: the fine
    ring while two windows fit in half of it, and only as many windows as the ring holds."""
    ring = coarse if seconds > fine.span_seconds() / 2 else fine
    per_window = max(1, round(seconds / ring.width))
    return ring, per_window, min(points, ring.n_slots // per_window)


def grid_curve(
    grid: np.ndarray,
    horizon: int,
    blocks: np.ndarray,
    tokens: np.ndarray,
    counts: np.ndarray,
    window: float | None,
) -> HitRateCurve:
    """A curve from one grid histogram (blocks and tokens per bucket) and its counters."""
    # the grid may repeat the horizon at its top; keep the first of equal capacities
    keep = np.concatenate([[True], np.diff(grid) > 0])
    return HitRateCurve(
        capacities=grid[keep].copy(),
        block_hits=np.cumsum(blocks)[keep],
        token_hits=np.cumsum(tokens)[keep],
        accesses=int(counts[KL.C_ACCESSES]),
        tokens=int(counts[KL.C_TOKENS]),
        horizon=horizon,
        exact=False,
        window_seconds=window,
        beyond_horizon_blocks=int(counts[KL.C_BEYOND]),
        beyond_horizon_tokens=int(counts[KL.C_BEYOND_TOKENS]),
    )
