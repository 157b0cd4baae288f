"""The incremental analyzer: block accesses in, exact hit-rate curves out.

    a = Analyzer(horizon=1 << 22, order="forward", units=StreamUnits(16, "flag"))
    a.feed(keys, tokens=..., request_starts=..., timestamps=...)
    c = a.curve()              # all time, exact at every capacity <= horizon
    c = a.curve(window=300)    # the last 300 s (log grid of capacities, ~3 % steps)

All-time histograms are dense (one counter per stack distance). Windowed views come from
time slots holding log-grid histograms and counters: a fine ring (1 s slots by default)
for the last minutes and a coarse ring (60 s slots) for the last hours.

Callers make one with kvset.core.stack_distance.new_analyzer (this one, or the sampled one).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kvset.core import hash_table as HT
from kvset.core import kernel as K
from kvset.core import kernel_layout as KL
from kvset.core import live_slots, slot_compaction
from kvset.core.curve import HitRateCurve
from kvset.core.feed_args import (
    DEFAULT_HORIZON,
    MAX_TIMESTAMP,  # noqa: F401 - importers of the analyzer's constants find them here
    ORDERS,  # noqa: F401
    Order,
    cache_aligned_zeros,
    check_analyzer_args,
    request_starts_array,
    reverse_within_requests,
    timestamps_array,
    tokens_array,
)
from kvset.core.feed_args import no_hugepage_advice as _no_hugepage_advice
from kvset.core.kernel_types import Int
from kvset.core.log_grid import WINDOW_GRID
from kvset.core.ring_kernel import Rings, ring_arrays, spill_arrays
from kvset.core.slots import NO_SLOT, SlotRing, TimeSlotViews
from kvset.types import AccessBatch
from kvset.units import DEFAULT_UNITS, StreamUnits

_MIN_TRACKED = 1 << 10
FORGOTTEN_PER_HORIZON = 8  # the forgotten set's budget: 8 H blocks (512 MiB at the default horizon)
# A preallocated (live) analyzer's: 2 H blocks, 32 MiB at the live horizon, allocated at once; past it
# the split of misses into first accesses and beyond the horizon is a bound, and says so
PREALLOCATED_FORGOTTEN_PER_HORIZON = 2


def forgotten_budget(horizon: int) -> int:
    """Forgotten blocks remembered exactly before the set is full: 8 H, at least 2^20."""
    return max(FORGOTTEN_PER_HORIZON * horizon, 1 << 20)


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


class _Tracker:
    """The kernel's state arrays, sized for `max_tracked` blocks; grown by doubling."""

    def __init__(
        self, horizon: int, max_tracked: int, max_forgotten: int | None = None, preallocate: bool = False
    ) -> None:
        self.horizon = horizon
        self.preallocate = preallocate
        self.meta = np.zeros(KL.META_SIZE, dtype=np.int64)
        self.meta[KL.M_HORIZON] = horizon
        # blocks the forgotten set may hold before it is full (kernel.py, "The forgotten set")
        self.max_forgotten = forgotten_budget(horizon) if max_forgotten is None else max_forgotten
        self.gone = np.zeros(1, dtype=np.uint64)  # no forgotten set until the horizon is reached
        self.hist = np.zeros((2, 2), dtype=np.int64)  # [distance, (blocks, tokens)]
        self._allocate(max_tracked)

    def _allocate(self, max_tracked: int) -> None:
        with _no_hugepage_advice():
            self._allocate_arrays(max_tracked)

    def _allocate_arrays(self, max_tracked: int) -> None:
        self.max_tracked = min(self.horizon, max_tracked)
        table_cells = _next_pow2(2 * self.max_tracked)
        self.mask = table_cells - 1
        self.table = np.empty(2 * table_cells, dtype=np.uint64)
        self.table[1::2] = HT.EMPTY
        # slots: at least twice the tracked blocks (amortized compaction), whole superblocks
        superblocks = (2 * self.max_tracked) // (64 * live_slots.WORDS_PER_SB) + 1
        nwords = superblocks * live_slots.WORDS_PER_SB
        self.slot_keys = np.zeros(64 * nwords, dtype=np.uint64)
        self.live = cache_aligned_zeros(nwords)  # one bit per slot
        self.fen = np.zeros(superblocks + 1, dtype=np.int64)  # live bits per superblock
        hist_len = self.max_tracked + 2
        if len(self.hist) < hist_len:
            # Reserve rows ahead: np.zeros maps untouched pages lazily, so rows beyond the largest
            # distance seen cost no memory, and the next few doublings need no copy.
            grown = np.zeros((min(self.horizon + 2, 16 * hist_len), 2), dtype=np.int64)
            grown[: len(self.hist)] = self.hist
            self.hist = grown
        if self.max_tracked >= self.horizon and self.gone.shape[0] == 1:
            # Remember forgotten blocks, exactly, to tell "beyond the horizon" from "first time".
            remembered = self.max_forgotten if self.preallocate else min(self.horizon, self.max_forgotten)
            self._new_gone(_next_pow2(2 * max(remembered, 1 << 12)))

    def _new_gone(self, cells: int) -> np.ndarray:
        old = self.gone
        self.gone = np.full(cells, HT.EMPTY, dtype=np.uint64)
        self.meta[KL.M_GONE_CAP] = min(cells // 2, self.max_forgotten)
        return old

    def grow_forgotten(self) -> None:
        """The forgotten set is at its fill limit: twice its size, or full once at its budget."""
        if self.meta[KL.M_GONE_CAP] >= self.max_forgotten:
            self.meta[KL.M_GONE_FLAGS] |= KL.GONE_FULL  # remembers no more: the split is a bound
            return
        old = self._new_gone(2 * len(self.gone))
        K.regrow_gone(old, self.gone, self.meta)

    @property
    def forgotten_complete(self) -> bool:
        """Whether every forgotten block is remembered: the split of misses into first accesses and
        re-references beyond the horizon is exact (else first accesses are at most, and
        re-references beyond the horizon at least, what is counted)."""
        return not int(self.meta[KL.M_GONE_FLAGS]) & KL.GONE_FULL

    def grow(self) -> None:
        old_keys, old_live, old_meta = self.slot_keys, self.live, self.meta
        self._allocate(2 * self.max_tracked)
        self.meta = np.zeros(KL.META_SIZE, dtype=np.int64)
        slot_compaction.rebuild_into(
            old_keys,
            old_live,
            old_meta,
            self.table,
            self.mask,
            self.slot_keys,
            self.live,
            self.fen,
            self.meta,
        )

    @property
    def tracked(self) -> int:
        return int(self.meta[KL.M_TRACKED])

    def nbytes(self) -> int:
        """Bytes of state in use (histogram rows reserved beyond the tracked blocks are never touched)."""
        arrays = (self.table, self.slot_keys, self.live, self.fen, self.gone)
        return (
            sum(a.nbytes for a in arrays) + min(len(self.hist), self.max_tracked + 2) * self.hist.strides[0]
        )


def check_batch_block_size(units: StreamUnits, batch: AccessBatch) -> None:
    """A batch of another block size than the stream's is refused: its blocks are not the stream's."""
    if batch.block_size is not None and batch.block_size != units.block_size:
        raise MixedBlockSizes(batch.block_size, units.block_size)


class MixedBlockSizes(ValueError):
    def __init__(self, batch: int, stream: int) -> None:
        super().__init__(f"blocks of {batch:,} tokens in a stream of {stream:,}-token blocks")
        self.batch_block_size, self.stream_block_size = batch, stream


class Analyzer(TimeSlotViews):
    """Exact one-pass LRU stack-distance analyzer over a stream of block accesses, in `units`
    (an access without its own token count covers units.block_size tokens)."""

    def __init__(
        self,
        horizon: int = DEFAULT_HORIZON,
        order: Order = "forward",
        *,
        units: StreamUnits = DEFAULT_UNITS,
        slot_seconds: float = 1.0,
        fine_slots: int = 360,
        coarse_seconds: float = 60.0,
        coarse_slots: int = 120,
        initial_tracked: int = _MIN_TRACKED,
        runs: bool = True,
        max_forgotten: int | None = None,
        preallocate: bool = False,
    ) -> None:
        """max_forgotten: forgotten blocks remembered exactly (default forgotten_budget(horizon));
        preallocate: the tables for the whole horizon and the forgotten set at once (a live stream:
        no doubling, which rebuilds the tables on the caller's thread, ever stalls it), with a
        forgotten budget of PREALLOCATED_FORGOTTEN_PER_HORIZON horizons unless max_forgotten says."""
        check_analyzer_args(horizon, order, slot_seconds, coarse_seconds)
        self.horizon = int(horizon)
        # runs of re-read blocks taken at once (docs/method.md, section 3); False: the per-block
        # kernel, the same figures more slowly (the tests and `make bench` compare the two)
        self.runs = bool(runs)
        self.order: Order = order
        self.units = units
        if preallocate:
            initial_tracked = self.horizon
            if max_forgotten is None:
                max_forgotten = max(PREALLOCATED_FORGOTTEN_PER_HORIZON * self.horizon, 1 << 12)
        self._t = _Tracker(
            self.horizon, max(1, min(initial_tracked, self.horizon)), max_forgotten, preallocate
        )
        self.grid_capacities = WINDOW_GRID.capacities(self.horizon)
        nb = len(self.grid_capacities)
        self.fine = SlotRing(slot_seconds, fine_slots, nb)
        self.coarse = SlotRing(coarse_seconds, coarse_slots, nb)
        self._scratch_blocks = np.zeros(nb, dtype=np.int64)
        self._scratch_tokens = np.zeros(nb, dtype=np.int64)
        self._scratch_counts = np.zeros(KL.COUNTS_SIZE, dtype=np.int64)  # a slot's, until it ends
        self.counts = np.zeros(KL.COUNTS_SIZE, dtype=np.int64)  # all time
        self.requests = 0
        self.late_accesses = 0  # timestamps older than the current slot, counted in it
        self._curve_kept: tuple[int, HitRateCurve] | None = None  # (accesses, their exact curve)
        self.first_time_at: float | None = None
        self.last_time_at: float | None = None

    # -- feeding -----------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.units.block_size

    def feed_batch(self, batch: AccessBatch, return_distances: bool = False) -> np.ndarray | None:
        """Feed a batch; MixedBlockSizes (a ValueError) if its blocks are not the stream's size."""
        check_batch_block_size(self.units, batch)
        return self.feed(
            batch.keys,
            tokens=batch.tokens,
            request_starts=batch.request_starts,
            timestamps=batch.timestamps,
            return_distances=return_distances,
        )

    def feed(
        self,
        keys: npt.ArrayLike,
        tokens: npt.ArrayLike | None = None,
        request_starts: npt.ArrayLike | None = None,
        timestamps: npt.ArrayLike | None = None,
        return_distances: bool = False,
    ) -> np.ndarray | None:
        """Feed accesses in order. Returns stack distances if asked (0 first time, -1 beyond horizon).

        tokens: per access, or one number for all (default: the stream's block size);
        request_starts: indices where requests begin (a request never spans two feeds);
        timestamps: seconds, per access or one for the batch (default: wall time now).
        In `reverse` order each request's blocks are accessed last to first.
        """
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        n = len(keys)
        if n == 0:
            return np.zeros(0, dtype=np.int64) if return_distances else None
        tok = self._tokens_array(tokens, n)
        starts = self._request_starts(request_starts, n)
        ts, t_lo, t_hi = self._timestamps_array(timestamps, n)
        order = None
        if self.order == "reverse" and len(starts):
            order = reverse_within_requests(starts, n)
            keys = keys[order]
            if tok.shape[0] == n:
                tok = tok[order]
            if ts.shape[0] == n:
                ts = ts[order]
        # no per-batch buffers unless needed: fresh pages cost more than the kernel on some VMs
        out = np.empty(n if return_distances else 1, dtype=np.int64)
        self._feed_by_slot(keys, tok, starts, ts, t_lo, t_hi, out)
        if not return_distances:
            return None
        if order is not None:
            restored = np.empty_like(out)
            restored[order] = out
            return restored
        return out

    def _tokens_array(self, tokens: npt.ArrayLike | None, n: int) -> np.ndarray:
        return tokens_array(tokens, n, self.units.block_size)

    _request_starts = staticmethod(request_starts_array)
    _timestamps_array = staticmethod(timestamps_array)

    def _feed_by_slot(
        self,
        keys: np.ndarray,
        tok: np.ndarray,
        starts: np.ndarray,
        ts: np.ndarray,
        t_lo: float,
        t_hi: float,
        out: np.ndarray,
    ) -> None:
        """Feed the batch in one kernel call (more only to grow the state); the kernel adds each time
        slot's tallies to the rings as the slot ends."""
        n = len(keys)
        fine = self.fine
        per_access = len(ts) == n and n > 1
        first = fine.slot_of(float(ts[0]))
        if fine.current is not None and first < fine.current:
            # time never runs backwards in the rings: late accesses count in the current slot
            if not per_access:
                self.late_accesses += n
            first = fine.current
        t = self._t
        t.meta[KL.M_SLOT] = first
        t.meta[KL.M_SLOT_START] = 0
        rings = (fine, self.coarse)
        for ring, at in zip(rings, (KL.M_FINE_CURRENT, KL.M_COARSE_CURRENT), strict=True):
            t.meta[at] = NO_SLOT if ring.current is None else ring.current
        arrays: Rings = (
            ring_arrays(fine),
            spill_arrays(fine),
            self.coarse.width,
            ring_arrays(self.coarse),
            spill_arrays(self.coarse),
        )
        late_before = int(t.meta[KL.M_LATE])
        self.first_time_at = t_lo if self.first_time_at is None else min(self.first_time_at, t_lo)
        self.last_time_at = t_hi if self.last_time_at is None else max(self.last_time_at, t_hi)
        i: Int = 0
        while True:
            i = K.feed_kernel(
                keys,
                tok,
                ts,
                per_access,
                fine.width,
                self.runs,
                i,
                n,
                t.table,
                t.mask,
                t.max_tracked,
                t.slot_keys,
                t.live,
                t.fen,
                t.meta,
                t.gone,
                t.hist,
                self._scratch_blocks,
                self._scratch_tokens,
                self._scratch_counts,
                out,
                starts,
                arrays,
                self.counts,
            )
            reason = int(t.meta[KL.M_REASON])
            if reason == KL.STOP_GROW:
                t.grow()
            elif reason == KL.STOP_GROW_GONE:
                t.grow_forgotten()
            else:
                break
        for ring, at in zip(rings, (KL.M_FINE_CURRENT, KL.M_COARSE_CURRENT), strict=True):
            ring.current = None if t.meta[at] == NO_SLOT else int(t.meta[at])
        self.requests += int(np.searchsorted(starts, n) - np.searchsorted(starts, 0))
        self.late_accesses += int(t.meta[KL.M_LATE]) - late_before

    # -- reading -----------------------------------------------------------
    @property
    def sampling(self) -> None:
        """What a sampled analyzer sampled (kvset.core.curve.SampleInfo); None: every block, exact."""
        return None

    @property
    def accesses(self) -> int:
        return int(self.counts[KL.C_ACCESSES])

    @property
    def tokens(self) -> int:
        return int(self.counts[KL.C_TOKENS])

    @property
    def tracked_blocks(self) -> int:
        return self._t.tracked

    @property
    def forgotten_blocks(self) -> int:
        return int(self._t.meta[KL.M_EVICTED])

    def stack_keys(self) -> np.ndarray:
        """The tracked blocks' keys in LRU stack order, most recent first (kvset.core.partial_stack)."""
        t = self._t
        lo, hi = int(t.meta[KL.M_OLDEST]), int(t.meta[KL.M_NOW])
        bits = np.unpackbits(t.live.view(np.uint8), bitorder="little")[lo:hi].astype(bool)
        return np.ascontiguousarray(t.slot_keys[lo:hi][bits][::-1])

    @property
    def runs_taken(self) -> tuple[int, int]:
        """(runs of re-read blocks taken at once, the accesses taken in them), all time; each run
        starts from two accesses the per-block path took, not counted in it."""
        return int(self._t.meta[KL.M_RUNS]), int(self._t.meta[KL.M_RUN_ACCESSES])

    @property
    def first_time(self) -> int:
        return int(self.counts[KL.C_FIRST_TIME])

    @property
    def beyond_horizon(self) -> int:
        return int(self.counts[KL.C_BEYOND])

    @property
    def misses_split_exact(self) -> bool:
        """Whether first_time and beyond_horizon are exact: every forgotten block is remembered (else
        first_time is an upper bound and beyond_horizon a lower one; their sum is exact)."""
        return self._t.forgotten_complete

    @property
    def rereferences(self) -> int:
        return int(self.counts[KL.C_HITS])

    def memory_bytes(self) -> int:
        rings = sum(a.nbytes for r in (self.fine, self.coarse) for a in (r.blocks, r.tokens, r.counts))
        return self._t.nbytes() + rings

    def curve(self, window: float | None = None) -> HitRateCurve:
        """The all-time curve (exact at every capacity), or the last `window` seconds' (grid)."""
        if window is None:
            return self._exact_curve()
        return self.window_curve(float(window))

    def distance_histogram(self) -> np.ndarray:
        """A copy of the hits by stack distance, rows 0 to the largest distance seen (row 0 empty):
        [d, 0] blocks, [d, 1] tokens; what the exact curve sums (kvset.core.partial_stack keeps it)."""
        t = self._t
        hist = t.hist[: int(t.meta[KL.M_MAX_DISTANCE]) + 1].copy()
        hist[0] = 0
        return hist

    def _exact_curve(self) -> HitRateCurve:
        """Built once for the accesses fed so far (a report reads it more than once: a curve of
        millions of capacities is sums and pages faulted in, 0.15 s)."""
        kept = self._curve_kept
        if kept is not None and kept[0] == self.accesses:
            return kept[1]
        curve = self._build_exact_curve()
        self._curve_kept = (self.accesses, curve)  # every feed of accesses moves the count
        return curve

    def _build_exact_curve(self) -> HitRateCurve:
        t = self._t
        maxd = int(t.meta[KL.M_MAX_DISTANCE])
        caps = np.arange(1, maxd + 1, dtype=np.int64)
        return HitRateCurve(
            capacities=caps,
            block_hits=np.cumsum(t.hist[1 : maxd + 1, 0]),
            token_hits=np.cumsum(t.hist[1 : maxd + 1, 1]),
            accesses=self.accesses,
            tokens=self.tokens,
            horizon=self.horizon,
            exact=True,
            window_seconds=None,
            beyond_horizon_blocks=self.beyond_horizon,
            beyond_horizon_tokens=int(self.counts[KL.C_BEYOND_TOKENS]),
        )

    # time slots, for views over time (windows, trends, churn): in TimeSlotViews
