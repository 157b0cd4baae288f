"""The incremental analyzer: block accesses in, exact hit-rate curves out.

    a = Analyzer(horizon=1 << 22, order="forward")
    a.feed(keys, tokens=..., request_starts=..., timestamps=...)
    c = a.curve()              # all time, exact at every capacity <= horizon
    c = a.curve(window=300)    # the last 300 s (log grid of capacities, ~3 % steps)

All-time histograms are dense (one counter per stack distance). Windowed views come from
time slots holding log-grid histograms and counters: a fine ring (1 s slots by default)
for the last minutes and a coarse ring (60 s slots) for the last hours.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np

from kvset.core import kernel as K
from kvset.core.curve import HitRateCurve
from kvset.types import AccessBatch

DEFAULT_HORIZON = 1 << 22  # 4,194,304 blocks; memory grows with the blocks actually tracked
MAX_TIMESTAMP = 1e11  # seconds from zero (about 3,000 years); beyond it a timestamp is garbage
ORDERS = ("forward", "reverse")
Order = Literal["forward", "reverse"]

_MIN_TRACKED = 1 << 10


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


try:  # numpy's switch for madvise(MADV_HUGEPAGE) on large arrays (private, so guarded)
    from numpy._core.multiarray import _get_madvise_hugepage, _set_madvise_hugepage
except ImportError:  # pragma: no cover - older or newer numpy
    _get_madvise_hugepage = _set_madvise_hugepage = None


@contextmanager
def _no_hugepage_advice():
    """Allocate the state without numpy's huge-page advice.

    Where transparent huge pages are on "madvise" but none can be had (as on the VMs we
    measured), each first touch of advised memory tries to compact memory synchronously:
    touching 80 MB took 0.11 s with the advice and 0.03 s without, and growing the analyzer
    to 1M blocks spent most of its time there (benchmarks/: 0.90-1.0 s against 0.70 s).
    """
    if _set_madvise_hugepage is None:
        yield
        return
    previous = _get_madvise_hugepage()
    _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(previous)


class _Tracker:
    """The kernel's state arrays, sized for `max_tracked` blocks; grown by doubling."""

    def __init__(self, horizon: int, max_tracked: int) -> None:
        self.horizon = horizon
        self.meta = np.zeros(K.META_SIZE, dtype=np.int64)
        self.meta[K.M_HORIZON] = horizon
        self.bloom = np.zeros((2, 1), dtype=np.uint64)
        self.bloom_cap = 0
        self.hist = np.zeros((2, 2), dtype=np.int64)  # [distance, (blocks, tokens)]
        self._allocate(max_tracked)
        self.meta[K.M_BLOOM_CAP] = self.bloom_cap

    def _allocate(self, max_tracked: int) -> None:
        with _no_hugepage_advice():
            self._allocate_arrays(max_tracked)

    def _allocate_arrays(self, max_tracked: int) -> None:
        self.max_tracked = min(self.horizon, max_tracked)
        table_cells = _next_pow2(2 * self.max_tracked)
        self.mask = table_cells - 1
        self.table = np.empty(2 * table_cells, dtype=np.uint64)
        self.table[1::2] = K.EMPTY
        # slots: at least twice the tracked blocks (amortized compaction), whole superblocks
        superblocks = (2 * self.max_tracked) // (64 * K.WORDS_PER_SB) + 1
        nwords = superblocks * K.WORDS_PER_SB
        self.slot_keys = np.zeros(64 * nwords, dtype=np.uint64)
        self.live = np.zeros(nwords, dtype=np.uint64)  # one bit per slot
        self.fen = np.zeros(superblocks + 1, dtype=np.int64)  # live bits per superblock
        hist_len = self.max_tracked + 2
        if len(self.hist) < hist_len:
            # Reserve rows ahead: np.zeros maps untouched pages lazily, so rows beyond the largest
            # distance seen cost no memory, and the next few doublings need no copy.
            grown = np.zeros((min(self.horizon + 2, 16 * hist_len), 2), dtype=np.int64)
            grown[: len(self.hist)] = self.hist
            self.hist = grown
        if self.max_tracked >= self.horizon and self.bloom.shape[1] == 1:
            # Remember forgotten blocks to tell "beyond the horizon" from "first time": two
            # generations of a Bloom filter (16 bits a key, 4 probes: ~0.2 % false positives),
            # each holding the last max(2H, 65536) forgotten blocks.
            remembered = max(2 * self.horizon, 1 << 16)
            self.bloom_cap = remembered
            self.bloom = np.zeros((2, _next_pow2(16 * remembered) // 64), dtype=np.uint64)

    def grow(self) -> None:
        old_keys, old_live, old_meta = self.slot_keys, self.live, self.meta
        self._allocate(2 * self.max_tracked)
        self.meta = np.zeros(K.META_SIZE, dtype=np.int64)
        K.rebuild_into(old_keys, old_live, old_meta, self.table, self.mask, self.slot_keys, self.live, self.fen, self.meta)
        self.meta[K.M_BLOOM_CAP] = self.bloom_cap

    @property
    def tracked(self) -> int:
        return int(self.meta[K.M_TRACKED])

    def nbytes(self) -> int:
        """Bytes of state in use (histogram rows reserved beyond the tracked blocks are never touched)."""
        arrays = (self.table, self.slot_keys, self.live, self.fen, self.bloom)
        return sum(a.nbytes for a in arrays) + min(len(self.hist), self.max_tracked + 2) * self.hist.strides[0]


class SlotRing:
    """Histograms and counters per time slot, for the last `n_slots` slots of `width` seconds."""

    def __init__(self, width: float, n_slots: int, n_buckets: int) -> None:
        self.width = float(width)
        self.n_slots = int(n_slots)
        self.blocks = np.zeros((n_slots, n_buckets), dtype=np.int64)
        self.tokens = np.zeros((n_slots, n_buckets), dtype=np.int64)
        self.counts = np.zeros((n_slots, K.COUNTS_SIZE), dtype=np.int64)
        self.requests = np.zeros(n_slots, dtype=np.int64)
        self.slot_ids = np.full(n_slots, np.iinfo(np.int64).min, dtype=np.int64)
        self.current: int | None = None  # absolute index of the newest slot

    def slot_of(self, t: float) -> int:
        return math.floor(t / self.width)

    def advance(self, slot: int) -> int:
        """Make `slot` the current slot (clearing rows it reuses); return its row."""
        if self.current is None or slot > self.current:
            first = slot - self.n_slots + 1 if self.current is None else max(self.current + 1, slot - self.n_slots + 1)
            for s in range(first, slot + 1):
                row = s % self.n_slots
                self.blocks[row] = 0
                self.tokens[row] = 0
                self.counts[row] = 0
                self.requests[row] = 0
                self.slot_ids[row] = s
            self.current = slot
        return self.current % self.n_slots

    def add(self, row: int, blocks: np.ndarray, tokens: np.ndarray, counts: np.ndarray, requests: int) -> None:
        self.blocks[row] += blocks
        self.tokens[row] += tokens
        self.counts[row] += counts
        self.requests[row] += requests

    def rows_between(self, first_slot: int, last_slot: int) -> np.ndarray:
        """Rows holding slots in [first_slot, last_slot]."""
        return np.flatnonzero((self.slot_ids >= first_slot) & (self.slot_ids <= last_slot))

    def span_seconds(self) -> float:
        return self.width * self.n_slots


@dataclass(frozen=True)
class SlotSeries:
    """Per-slot counters over the recent past, oldest first (missing slots are zeros)."""

    width: float
    end_slot: int
    counts: np.ndarray  # (n, COUNTS_SIZE)
    requests: np.ndarray
    blocks: np.ndarray  # (n, n_buckets) grid histograms
    tokens: np.ndarray


class Analyzer:
    """Exact one-pass LRU stack-distance analyzer over a stream of block accesses."""

    def __init__(
        self,
        horizon: int = DEFAULT_HORIZON,
        order: Order = "forward",
        *,
        block_tokens: int | None = None,
        slot_seconds: float = 1.0,
        fine_slots: int = 360,
        coarse_seconds: float = 60.0,
        coarse_slots: int = 120,
        initial_tracked: int = _MIN_TRACKED,
    ) -> None:
        if horizon < 1:
            raise ValueError("horizon must be at least 1 block")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        if slot_seconds <= 0 or coarse_seconds < slot_seconds:
            raise ValueError("slot widths must be positive and the coarse slot at least the fine one")
        self.horizon = int(horizon)
        self.order: Order = order
        self.block_tokens = block_tokens
        self._t = _Tracker(self.horizon, max(1, min(initial_tracked, self.horizon)))
        self.grid_capacities = K.grid_capacities(self.horizon)
        nb = len(self.grid_capacities)
        self.fine = SlotRing(slot_seconds, fine_slots, nb)
        self.coarse = SlotRing(coarse_seconds, coarse_slots, nb)
        self._scratch_blocks = np.zeros(nb, dtype=np.int64)
        self._scratch_tokens = np.zeros(nb, dtype=np.int64)
        self._scratch_counts = np.zeros(K.COUNTS_SIZE, dtype=np.int64)
        self.counts = np.zeros(K.COUNTS_SIZE, dtype=np.int64)  # all time
        self.requests = 0
        self.late_accesses = 0  # timestamps older than the current slot, counted in it
        self.first_time_at: float | None = None
        self.last_time_at: float | None = None

    # -- feeding -----------------------------------------------------------
    def feed_batch(self, batch: AccessBatch, return_distances: bool = False) -> np.ndarray | None:
        if batch.block_tokens and not self.block_tokens:
            self.block_tokens = batch.block_tokens
        return self.feed(
            batch.keys,
            tokens=batch.tokens if batch.tokens is not None else batch.block_tokens,
            request_starts=batch.request_starts,
            timestamps=batch.timestamps,
            return_distances=return_distances,
        )

    def feed(
        self,
        keys,
        tokens=None,
        request_starts=None,
        timestamps=None,
        return_distances: bool = False,
    ) -> np.ndarray | None:
        """Feed accesses in order. Returns stack distances if asked (0 first time, -1 beyond horizon).

        tokens: per access, or one number for all (default: block_tokens, else 1);
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
        ts = self._timestamps_array(timestamps, n)
        order = None
        if self.order == "reverse" and len(starts):
            order = _reverse_within_requests(starts, n)
            keys = keys[order]
            if tok.shape[0] == n:
                tok = tok[order]
            if ts.shape[0] == n:
                ts = ts[order]
        # no per-batch buffers unless needed: fresh pages cost more than the kernel on some VMs
        out = np.empty(n if return_distances else 1, dtype=np.int64)
        self._feed_by_slot(keys, tok, starts, ts, out)
        if not return_distances:
            return None
        if order is not None:
            restored = np.empty_like(out)
            restored[order] = out
            return restored
        return out

    def _tokens_array(self, tokens, n: int) -> np.ndarray:
        return tokens_array((self.block_tokens or 1) if tokens is None else tokens, n)

    @staticmethod
    def _request_starts(request_starts, n: int) -> np.ndarray:
        if request_starts is None:
            return np.zeros(0, dtype=np.int64)
        starts = np.asarray(request_starts, dtype=np.int64)
        if len(starts) and (starts[0] < 0 or starts[-1] >= n or np.any(np.diff(starts) <= 0)):
            raise ValueError("request_starts must be strictly increasing indices into the batch")
        return starts

    @staticmethod
    def _timestamps_array(timestamps, n: int) -> np.ndarray:
        if timestamps is None:
            return np.array([time.time()], dtype=np.float64)
        ts = np.array([float(timestamps)]) if np.isscalar(timestamps) else np.asarray(timestamps, dtype=np.float64)
        if ts.shape != (n,) and ts.shape != (1,):
            raise ValueError(f"timestamps has {ts.shape} entries for {n} accesses")
        if not np.all(np.abs(ts) <= MAX_TIMESTAMP):  # also false for nan
            raise ValueError(f"timestamps must be finite seconds within ±{MAX_TIMESTAMP:g}")
        return ts

    def _feed_by_slot(self, keys, tok, starts, ts, out) -> None:
        """Feed in runs of one fine time slot each; the kernel stops where the next slot begins."""
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
        t.meta[K.M_SLOT] = first
        late_before = int(t.meta[K.M_LATE])
        t_lo, t_hi = (float(ts.min()), float(ts.max())) if per_access else (float(ts[0]), float(ts[0]))
        self.first_time_at = t_lo if self.first_time_at is None else min(self.first_time_at, t_lo)
        self.last_time_at = t_hi if self.last_time_at is None else max(self.last_time_at, t_hi)
        i = run_start = 0
        self._clear_scratch()
        while True:
            i = K.feed_kernel(
                keys, tok, ts, per_access, fine.width, i, n, t.table, t.mask, t.max_tracked, t.slot_keys,
                t.live, t.fen, t.meta, t.bloom, t.hist,
                self._scratch_blocks, self._scratch_tokens, self._scratch_counts, out,
            )  # fmt: skip
            reason = int(t.meta[K.M_REASON])
            if reason == K.STOP_GROW:
                t.grow()
                continue
            slot = int(t.meta[K.M_SLOT])
            requests = int(np.searchsorted(starts, i) - np.searchsorted(starts, run_start)) if len(starts) else 0
            self._close_run(slot, requests)
            if reason == K.STOP_DONE:
                break
            run_start = i  # the kernel has set the next slot
            self._clear_scratch()
        self.late_accesses += int(t.meta[K.M_LATE]) - late_before

    def _clear_scratch(self) -> None:
        self._scratch_blocks[:] = 0
        self._scratch_tokens[:] = 0
        self._scratch_counts[:] = 0

    def _close_run(self, fine_slot: int, requests: int) -> None:
        fine_row = self.fine.advance(fine_slot)
        self.fine.add(fine_row, self._scratch_blocks, self._scratch_tokens, self._scratch_counts, requests)
        coarse_slot = math.floor(fine_slot * self.fine.width / self.coarse.width)
        coarse_row = self.coarse.advance(coarse_slot)
        self.coarse.add(coarse_row, self._scratch_blocks, self._scratch_tokens, self._scratch_counts, requests)
        self.counts += self._scratch_counts
        self.requests += requests

    # -- reading -----------------------------------------------------------
    @property
    def accesses(self) -> int:
        return int(self.counts[K.C_ACCESSES])

    @property
    def tokens(self) -> int:
        return int(self.counts[K.C_TOKENS])

    @property
    def tracked_blocks(self) -> int:
        return self._t.tracked

    @property
    def forgotten_blocks(self) -> int:
        return int(self._t.meta[K.M_EVICTED])

    @property
    def first_time(self) -> int:
        return int(self.counts[K.C_FIRST_TIME])

    @property
    def beyond_horizon(self) -> int:
        return int(self.counts[K.C_BEYOND])

    @property
    def rereferences(self) -> int:
        return int(self.counts[K.C_HITS])

    def memory_bytes(self) -> int:
        rings = sum(a.nbytes for r in (self.fine, self.coarse) for a in (r.blocks, r.tokens, r.counts))
        return self._t.nbytes() + rings

    def curve(self, window: float | None = None) -> HitRateCurve:
        """The all-time curve (exact at every capacity), or the last `window` seconds' (grid)."""
        if window is None:
            return self._exact_curve()
        return self._window_curve(float(window))

    def _exact_curve(self) -> HitRateCurve:
        t = self._t
        maxd = int(t.meta[K.M_MAX_DISTANCE])
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
            beyond_horizon_tokens=int(self.counts[K.C_BEYOND_TOKENS]),
        )

    def _ring_for(self, window: float) -> SlotRing:
        return self.fine if window <= self.fine.span_seconds() else self.coarse

    def _window_curve(self, window: float) -> HitRateCurve:
        ring = self._ring_for(window)
        n = max(1, math.ceil(window / ring.width))
        rows = ring.rows_between(ring.current - n + 1, ring.current) if ring.current is not None else []
        return self._grid_curve(ring.blocks[rows].sum(axis=0), ring.tokens[rows].sum(axis=0),
                                ring.counts[rows].sum(axis=0), window)  # fmt: skip

    def _grid_curve(self, blocks, tokens, counts, window: float | None) -> HitRateCurve:
        caps = self.grid_capacities
        # the grid may repeat the horizon at its top; keep the first of equal capacities
        keep = np.concatenate([[True], np.diff(caps) > 0])
        cb = np.cumsum(blocks)[keep]
        ct = np.cumsum(tokens)[keep]
        return HitRateCurve(
            capacities=caps[keep].copy(),
            block_hits=cb,
            token_hits=ct,
            accesses=int(counts[K.C_ACCESSES]),
            tokens=int(counts[K.C_TOKENS]),
            horizon=self.horizon,
            exact=False,
            window_seconds=window,
            beyond_horizon_blocks=int(counts[K.C_BEYOND]),
            beyond_horizon_tokens=int(counts[K.C_BEYOND_TOKENS]),
        )

    def slot_series(self, seconds: float, coarse: bool = False) -> SlotSeries:
        """Per-slot counters and grid histograms for the last `seconds`, oldest first."""
        ring = self.coarse if coarse else self.fine
        n = min(ring.n_slots, max(1, math.ceil(seconds / ring.width)))
        end = -1 if ring.current is None else ring.current
        want = np.arange(end - n + 1, end + 1)
        counts = np.zeros((n, K.COUNTS_SIZE), dtype=np.int64)
        requests = np.zeros(n, dtype=np.int64)
        blocks = np.zeros((n, ring.blocks.shape[1]), dtype=np.int64)
        tokens = np.zeros_like(blocks)
        if ring.current is not None:
            rows = want % ring.n_slots
            valid = ring.slot_ids[rows] == want
            counts[valid] = ring.counts[rows[valid]]
            requests[valid] = ring.requests[rows[valid]]
            blocks[valid] = ring.blocks[rows[valid]]
            tokens[valid] = ring.tokens[rows[valid]]
        return SlotSeries(ring.width, end, counts, requests, blocks, tokens)

    def curve_from_slots(self, series: SlotSeries, first: int, last: int) -> HitRateCurve:
        """Grid curve over rows [first, last) of a SlotSeries."""
        return self._grid_curve(series.blocks[first:last].sum(axis=0), series.tokens[first:last].sum(axis=0),
                                series.counts[first:last].sum(axis=0), (last - first) * series.width)  # fmt: skip


def tokens_array(tokens, n: int) -> np.ndarray:
    """Per-access tokens for n accesses, or a length-1 array when every access covers the same number."""
    if np.isscalar(tokens):
        if int(tokens) < 0:
            raise ValueError("tokens per access must not be negative")
        return np.array([int(tokens)], dtype=np.int64)
    tok = np.ascontiguousarray(tokens, dtype=np.int64)
    if tok.shape != (n,):
        raise ValueError(f"tokens has {tok.shape} entries for {n} accesses")
    if n and tok.min() < 0:
        raise ValueError("tokens per access must not be negative")
    return tok


def _reverse_within_requests(starts: np.ndarray, n: int) -> np.ndarray:
    """Permutation that reverses each request's accesses (accesses before the first start form a segment)."""
    bounds = starts if starts[0] == 0 else np.concatenate([[0], starts])
    ends = np.concatenate([bounds[1:], [n]])
    lengths = ends - bounds
    seg = np.repeat(np.arange(len(bounds)), lengths)
    pos = np.arange(n) - bounds[seg]
    return ends[seg] - 1 - pos
