"""Sampled analysis: the hit-rate curve of a stream estimated from a spatial sample of its blocks.

    a = new_analyzer(units, sampling=Sampling(rate=0.01, seed=1))   # or Sampling(size=100_000): at most
                                                                    # that many blocks (kvset.core.stack_distance)
    a.feed(keys, tokens=..., request_starts=..., timestamps=...)
    c = a.curve()          # a HitRateCurve with c.estimate True, c.sample and a standard error per capacity

SHARDS (Waldspurger et al., FAST'15) keeps a block iff hash(key) < R x 2^64 and scales its stack
distances by 1/R. On prefix-cache traffic a few blocks every request shares (system prompts) take a
large share of all accesses, and whether the sample holds them swings the curve by points. Three
changes fix that, measured in benchmarks/sampling.py:

- Boosted request heads: the block at position p of its request is kept at rate min(1, R x 2^s),
  s the boost of its position band (band 0 for p = 0, then one band per doubling of p: 1, 2-3,
  4-7, ...), so the shared first blocks of requests are in the sample many times more often. At
  R = 1 % the boosts are HEAD_BOOSTS: positions 0-3 at 64 %, 4-15 at 16 %, 16-31 at 8 %, 32-63 at
  4 %, 64-127 at 2 %, from 128 on at R; at another rate they shift by K - 8, K = log2(HEAD_SHARE / R)
  rounded, so the boosted rates stay about where they are (past band 7 they halve a band down to
  R). The table replaced a boost doubling every band toward position 0, which kept positions 0
  and 1 whole: those were a fifth of the sample on the benchmark trace for 1.25 % of its
  accesses. The table looks at a sixth fewer accesses there for about the same error (0.40
  against 0.38 points over the benchmark's 5 seeds, 0.46 against 0.44 over 10, 0.33 against 0.36
  on three other traces and seeds not used to choose it). In a prefix cache a block's position is
  fixed by its prefix, so a block keeps its rate.
- Post-stratification: the accesses of each position band are counted exactly; each band's sampled
  histogram is scaled to the band's true access count, instead of by 1/R.
- Distances from the gap (kvset.core.sampling_kernel): d = 1 + t x k / a, the exact number of
  accesses between the two accesses times the sample's share of distinct blocks among them.

At rate 1 every block is kept and the distances are exact. The all-time curve is read off a log
grid (exact to 256 blocks, then 0.3 % steps); windowed curves use the exact analyzer's grid and the
band scaling known at the time each access was counted.

Fixed size (SHARDS_max): the rate starts at 1. When a new block would make the sample larger than
S, the limit falls to the priority of the block at rank S - S/16 (priority: the hash, divided by
the head boost) and every block above it is dropped, so at most S blocks are tracked at any time.

The curve and its error bound are read off the tallies in kvset.core.sampling_curve.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from kvset.core import hash_table as HT
from kvset.core import kernel_layout as KL
from kvset.core import sampling_filter as SF
from kvset.core import sampling_kernel as SK
from kvset.core import sampling_slots as SS
from kvset.core.analyzer import check_batch_block_size
from kvset.core.curve import HitRateCurve, SampleInfo
from kvset.core.feed_args import (
    DEFAULT_HORIZON,
    MAX_TIMESTAMP,
    Order,
    check_analyzer_args,
    no_hugepage_advice,
    request_starts_array,
    reverse_within_requests,
    timestamps_array,
    tokens_array,
)
from kvset.core.kernel_types import Int
from kvset.core.log_grid import FINE_GRID, WINDOW_GRID
from kvset.core.sampling_curve import band_factors, post_stratified_curve
from kvset.core.slots import SlotRing, SlotSeries, TimeSlotViews
from kvset.types import AccessBatch
from kvset.units import DEFAULT_UNITS, StreamUnits

METHOD = "spatial sample of the blocks (SHARDS) with boosted request heads, post-stratified by position"
HEAD_SHARE = 2.56  # K = log2(HEAD_SHARE / R) rounded: 8 at R = 1 %, the rate HEAD_BOOSTS are for
HEAD_BOOSTS = (6, 6, 6, 4, 4, 3, 2, 1)  # log2 of the rate over R of position bands 0-7 at K = 8
BANDS = 13  # position bands 0..11 (positions below 2048), then the rest
FIXED_SIZE_HEAD = 8  # fixed size: the boost of rate 1 % (2^8 x 0.01 = HEAD_SHARE)
EVICT_SHARE = 16  # fixed size: a full sample drops 1/16 of its blocks at once (amortized O(1) a block)
MAX_HASH = (1 << 64) - 1
# A sampled block weighs 1 / rate in the kernel's int64 fixed point (WEIGHT_ONE = 2^16): below this
# rate the weight would not fit (2^63 / 2^16 = 1.4e14), and no trace is large enough to sample so thinly.
MIN_RATE = 1e-12
_MIN_TRACKED = 1 << 14  # blocks the arrays start with: growing from 1k to 16k was 8 ms of a 65 ms run


def seed_salt(seed: int) -> np.uint64:
    """The 64-bit value mixed into every key for `seed` (splitmix64 of it, so seed 0 mixes too)."""
    x = (int(seed) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & MAX_HASH
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MAX_HASH
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MAX_HASH
    return np.uint64(x ^ (x >> 31))


def rate_limit(rate: float) -> int:
    """The largest priority kept at `rate`: keep iff priority <= limit, i.e. hash < rate x 2^64."""
    if not MIN_RATE <= rate <= 1.0:
        raise ValueError(f"sample rate must lie in [{MIN_RATE:g}, 1], got {rate!r}")
    return min(MAX_HASH, math.ceil(rate * 2.0**64) - 1)


def limit_rate(limit: int) -> float:
    return (limit + 1) / 2.0**64


def head_shifts(head: int) -> np.ndarray:
    """Band b's rate is 2^shift_b times the tail's: HEAD_BOOSTS moved by head - 8 (head = K), and
    past them halving a band, as they do, down to the tail's (at K = 8 they end there)."""
    return np.array(
        [max(0, HEAD_BOOSTS[b] + head - 8 if b < len(HEAD_BOOSTS) else head - b) for b in range(BANDS)],
        dtype=np.int64,
    )


def head_for_rate(rate: float) -> int:
    """K at a fixed rate (see head_shifts)."""
    return max(0, min(BANDS - 1, round(math.log2(HEAD_SHARE / rate)))) if rate < 1 else 0


def band_rates(limit: int, shifts: np.ndarray) -> np.ndarray:
    """Sampling rate of each position band at `limit`."""
    rates: np.ndarray = np.minimum(1.0, limit_rate(limit) * np.exp2(shifts))
    return rates


def sample_filter(keys: npt.ArrayLike, rate: float, seed: int = 0) -> np.ndarray:
    """SHARDS' filter: True for the keys kept at `rate` with `seed` (hash(key) < rate x 2^64).

    The same rule the sampled analyzer applies to blocks past the request heads."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    return SF.keep_mask(keys, seed_salt(seed), np.uint64(rate_limit(rate)), 0)


class _SampleState:
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

    def reweight(self, fixed_weights: np.ndarray) -> None:
        """Give every tracked block its band's weight at the current rates."""
        now = int(self.meta[SK.S_NOW])
        live = self.slot[:now, SS.W_WEIGHT] > 0
        self.slot[:now, SS.W_WEIGHT] = np.where(live, fixed_weights[self.slot[:now, SS.W_BAND]], 0)
        self.meta[SK.S_LIVE] = SS.rebuild_fenwick(self.slot, self.fen, now)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.table, self.fen, *self.slots()))


class EstimatedCounts:
    """A sampled analysis's counts: accesses and tokens exact, the others estimated from its
    post-stratified tallies (`_estimated`); the sampled analyzer's, and its partitions' merged
    (kvset.core.partial_sample)."""

    band_counts: np.ndarray  # every access, counted exactly: (accesses, tokens) per position band

    @property
    def accesses(self) -> int:
        return int(self.band_counts[:, 0].sum())

    @property
    def tokens(self) -> int:
        return int(self.band_counts[:, 1].sum())

    def _estimated(self, kind: int) -> int:
        raise NotImplementedError

    @property
    def first_time(self) -> int:
        """Estimated distinct blocks."""
        return self._estimated(SK.T_FIRST_TIME)

    @property
    def beyond_horizon(self) -> int:
        return self._estimated(SK.T_BEYOND)

    @property
    def misses_split_exact(self) -> bool:
        """The sample forgets no block: its split of the misses is as good as its estimate."""
        return True

    @property
    def forgotten_blocks(self) -> int:
        """The sample forgets no block; re-references estimated beyond the horizon stand for them."""
        return self.beyond_horizon

    @property
    def rereferences(self) -> int:
        return max(0, self.accesses - self.first_time - self.beyond_horizon)


def estimated_count(band_counts: np.ndarray, sampled: np.ndarray, kind: int) -> int:
    """Post-stratified estimate of all accesses of a kind (first time, beyond the horizon)."""
    factor = band_factors(band_counts[:, 0], sampled[:, :, SK.T_ACCESSES, 0].sum(axis=0))
    return round(float((factor * sampled[:, :, kind, 0].sum(axis=0)).sum()))


class SampledAnalyzer(EstimatedCounts, TimeSlotViews):
    """The Analyzer's interface (kvset.core.stack_distance.StackDistanceAnalyzer) over a spatial sample
    of the blocks (new_analyzer(units, sampling=...) makes one).

    Accesses and tokens are counted exactly; hits, first-time and beyond-horizon counts and every
    curve are estimates, and say so (HitRateCurve.sample)."""

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
        sample_rate: float | None = None,
        sample_size: int | None = None,
        seed: int = 0,
    ) -> None:
        check_analyzer_args(horizon, order, slot_seconds, coarse_seconds)
        if (sample_rate is None) == (sample_size is None):
            raise ValueError("give a sample rate or a sample size, not both")
        if sample_size is not None and int(sample_size) < 1:
            raise ValueError("sample size must be at least 1 block")
        self.horizon = int(horizon)
        self.order: Order = order
        self.units = units
        self.seed = int(seed)
        self.sample_size = int(sample_size) if sample_size is not None else None
        self._salt = seed_salt(self.seed)
        self._limit = rate_limit(sample_rate) if sample_rate is not None else MAX_HASH
        self._shifts = head_shifts(head_for_rate(sample_rate) if sample_rate is not None else FIXED_SIZE_HEAD)
        self._weights = 1.0 / band_rates(self._limit, self._shifts)
        capacity = max(1, min(initial_tracked, self.sample_size or initial_tracked))
        self._s = _SampleState(capacity)
        self._s.meta[SK.S_HORIZON] = self.horizon
        self._s.meta[SK.S_FINE_CURRENT] = self._s.meta[SK.S_COARSE_CURRENT] = SK.NO_SLOT
        self._s.meta[SK.S_SIZE_LIMIT] = self.sample_size or 0
        n_fine = len(FINE_GRID.capacities(self.horizon))
        # raw all-time tallies, post-stratified when a curve is read
        self.band_counts = np.zeros((BANDS, 2), dtype=np.int64)  # every access: (accesses, tokens) per band
        self.sampled = np.zeros((SK.GROUPS, BANDS, SK.KINDS, 2), dtype=np.float64)
        self.grid_capacities = WINDOW_GRID.capacities(self.horizon)
        nb = len(self.grid_capacities)
        # weighted hits per band on the fine grid, and per random group on the coarse grid, in planes
        # (blocks, tokens). While every access so far had the same tokens (_same_tokens), the tokens
        # planes, and the rings' tokens, are the blocks times them and are left unwritten (filled by
        # _ring_tokens when read): half the memory the hits touch (0.45 ns an access on the benchmark
        # trace, measured, and 0.2 ns more for the rings)
        self.hist = np.zeros((2, BANDS, n_fine), dtype=np.float64)
        self.ghist = np.zeros((2, SK.GROUPS, BANDS, nb), dtype=np.float64)
        self._same_tokens: int | None = None
        self._token_planes = False
        self.fine = SlotRing(slot_seconds, fine_slots, nb)
        self.coarse = SlotRing(coarse_seconds, coarse_slots, nb)
        self._scratch_blocks = np.zeros(nb, dtype=np.int64)
        self._scratch_tokens = np.zeros(nb, dtype=np.int64)
        self._scratch_counts = np.zeros(KL.COUNTS_SIZE, dtype=np.int64)
        # a batch's sampled accesses (index, position band, key), gathered before the kernel handles them
        self._found = np.empty(0, dtype=np.int64)
        self._found_band = np.empty(0, dtype=np.int64)
        self._found_key = np.empty(0, dtype=np.uint64)
        self._carry = 0  # position of the next access if it continues the last request
        self.requests = 0
        self.late_accesses = 0
        self.first_time_at: float | None = None
        self.last_time_at: float | None = None

    # -- feeding -----------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.units.block_size

    def feed_batch(self, batch: AccessBatch, return_distances: bool = False) -> None:
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
    ) -> None:
        """Feed accesses in order, as Analyzer.feed (which see); no distances: they are estimates."""
        if return_distances:
            raise ValueError("a sampled analyzer has no per-access distances")
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        n = len(keys)
        if n == 0:
            return
        # the exact analyzer's input checks, so both refuse the same input with the same words
        tok = tokens_array(tokens, n, self.units.block_size)
        starts = request_starts_array(request_starts, n)
        # per-access float timestamps are checked while the batch is gathered (one pass over it);
        # anything else goes through timestamps_array and its error first
        check = (
            isinstance(timestamps, np.ndarray) and timestamps.dtype == np.float64 and timestamps.shape == (n,)
        )
        if check:
            ts = np.ascontiguousarray(timestamps)
        else:
            ts, t_lo, t_hi = timestamps_array(timestamps, n)
            ordered = len(ts) == 1 or bool(np.all(np.diff(ts) >= 0))
        reverse = self.order == "reverse" and len(starts) > 0
        if reverse:
            order = reverse_within_requests(starts, n)
            keys = keys[order]
            if tok.shape[0] == n:
                tok = tok[order]
            if ts.shape[0] == n:
                ts = ts[order]
        gathered = self._gather(keys, ts, check, starts, reverse)
        if check:
            ok, ordered = gathered[-2:]
            if not ok:
                timestamps_array(timestamps, n)  # raises the error that says what is wrong: the same bounds
                raise AssertionError("the batch pass refused timestamps that timestamps_array takes")
            t_lo, t_hi = (float(ts[0]), float(ts[-1])) if ordered else (float(ts.min()), float(ts.max()))
        self._feed_by_slot(keys, tok, starts, ts, t_lo, t_hi, ordered and not reverse, reverse, gathered[0])
        self._carry = n - int(starts[-1]) if len(starts) else self._carry + n

    def _gather(
        self, keys: np.ndarray, ts: np.ndarray, check: bool, starts: np.ndarray, reverse: bool
    ) -> tuple[Int, bool, bool]:
        """The batch's sampled accesses into the found buffers (grown to the batch), and the check of
        its timestamps (sampling_filter.gather_batch): (how many, within bounds, never decreasing)."""
        n = len(keys)
        if self._found.shape[0] < n:
            self._found = np.empty(n, dtype=np.int64)
            self._found_band = np.empty(n, dtype=np.int64)
            self._found_key = np.empty(n, dtype=np.uint64)
        m, ok, ordered = SF.gather_batch(
            keys,
            ts,
            check,
            MAX_TIMESTAMP,
            starts,
            reverse,
            self._carry,
            self._salt,
            self._thresholds(),
            self._found,
            self._found_band,
            self._found_key,
        )
        return int(m), bool(ok), bool(ordered)

    def _thresholds(self) -> np.ndarray:
        return SF.band_thresholds(np.uint64(self._limit), self._shifts)

    def _feed_by_slot(
        self,
        keys: np.ndarray,
        tok: np.ndarray,
        starts: np.ndarray,
        ts: np.ndarray,
        t_lo: float,
        t_hi: float,
        ordered: bool,
        reverse: bool,
        n_found: Int,
    ) -> None:
        """Feed the batch (its sampled accesses gathered: n_found of them); the kernel adds each time
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
        s = self._s
        s.meta[SK.S_SLOT] = first
        s.meta[SK.S_POS] = self._carry
        s.meta[SK.S_RUN_START] = 0
        late_before = int(s.meta[SK.S_LATE])
        self._check_same_tokens(tok)
        self.first_time_at = t_lo if self.first_time_at is None else min(self.first_time_at, t_lo)
        self.last_time_at = t_hi if self.last_time_at is None else max(self.last_time_at, t_hi)
        i: Int = 0
        while True:
            i = SK.sampled_feed_kernel(
                keys,
                tok,
                ts,
                per_access,
                ordered,
                fine.width,
                starts,
                reverse,
                i,
                n,
                self._found,
                self._found_band,
                self._found_key,
                n_found,
                self._salt,
                self._weights,
                _fixed(self._weights),
                s.table,
                s.mask,
                *s.slots(),
                s.fen,
                s.meta,
                self.band_counts,
                self.sampled,
                self.hist,
                self.ghist,
                self._token_planes,
                self._scratch_blocks,
                self._scratch_tokens,
                self._scratch_counts,
                _ring_arrays(fine),
                self.coarse.width,
                _ring_arrays(self.coarse),
            )
            reason = int(s.meta[SK.S_REASON])
            if reason == SK.STOP_GROW:
                s.grow()
            elif reason == SK.STOP_EVICT:
                self._lower_limit()
                # the accesses still to handle that the lower rates no longer sample leave the list
                lo = int(np.searchsorted(self._found[:n_found], i, side="left"))
                n_found = int(
                    SF.refilter(
                        self._found,
                        self._found_band,
                        self._found_key,
                        lo,
                        n_found,
                        self._salt,
                        self._thresholds(),
                    )
                )
            else:
                break
        for ring, at in ((fine, SK.S_FINE_CURRENT), (self.coarse, SK.S_COARSE_CURRENT)):
            ring.current = None if s.meta[at] == SK.NO_SLOT else int(s.meta[at])
        self.requests = int(s.meta[SK.S_REQUESTS])
        self.late_accesses += int(s.meta[SK.S_LATE]) - late_before

    def _check_same_tokens(self, tok: np.ndarray) -> None:
        """The first batch whose tokens differ from the ones before (or vary) fills the tokens planes."""
        if self._token_planes:
            return
        same = int(tok[0]) if tok.shape[0] == 1 else None
        if same is not None and self._same_tokens in (None, same):
            self._same_tokens = same
            return
        if self._same_tokens is not None:
            self.hist[1] = self.hist[0] * self._same_tokens
            self.ghist[1] = self.ghist[0] * self._same_tokens
        self._ring_tokens()
        self._token_planes = True

    def _ring_tokens(self) -> None:
        """Without token planes, make the rings' tokens their blocks times the tokens of every access."""
        if not self._token_planes:
            for ring in (self.fine, self.coarse):
                np.multiply(ring.blocks, self._same_tokens or 0, out=ring.tokens)

    def _lower_limit(self) -> None:
        """Fixed size: keep the S - S/16 blocks of lowest priority, drop the others, lower the rates."""
        s = self._s
        now = int(s.meta[SK.S_NOW])
        prio = SS.live_priorities(self._salt, self._shifts, *s.slots(), now)
        keep = len(prio) - max(1, len(prio) // EVICT_SHARE)
        cut = int(np.partition(prio, keep)[keep])  # the lowest priority that goes
        self._limit = min(self._limit, max(0, cut - 1))
        dropped = SS.drop_above(
            np.uint64(self._limit), self._salt, self._shifts, s.table, s.mask, *s.slots(), now
        )
        s.meta[SK.S_TRACKED] -= dropped
        self._weights = 1.0 / band_rates(self._limit, self._shifts)
        s.reweight(_fixed(self._weights))

    # -- reading: counts -----------------------------------------------------
    @property
    def sample_rate(self) -> float:
        """The rate blocks past the request heads are kept at now (fixed size: where it has fallen to)."""
        return limit_rate(self._limit)

    @property
    def sampling(self) -> SampleInfo:
        return SampleInfo(
            rate=self.sample_rate,
            size=self.sample_size,
            seed=self.seed,
            tracked_blocks=self.tracked_blocks,
            tracked_accesses=int(self._s.meta[SK.S_SAMPLED]),
            accesses=self.accesses,
        )

    @property
    def tracked_blocks(self) -> int:
        return int(self._s.meta[SK.S_TRACKED])

    def _estimated(self, kind: int) -> int:
        return estimated_count(self.band_counts, self.sampled, kind)

    def memory_bytes(self) -> int:
        rings = sum(a.nbytes for r in (self.fine, self.coarse) for a in (r.blocks, r.tokens, r.counts))
        tallies = sum(a.nbytes for a in (self.band_counts, self.sampled, self.hist, self.ghist))
        return self._s.nbytes() + rings + tallies

    # -- reading: curves -----------------------------------------------------
    def curve(self, window: float | None = None) -> HitRateCurve:
        """The all-time curve (fine grid, with standard errors), or the last `window` seconds' (grid)."""
        if window is None:
            token_scale = None if self._token_planes else (self._same_tokens or 0)
            return post_stratified_curve(
                self.hist,
                self.ghist,
                token_scale,
                self.sampled,
                self.band_counts,
                band_rates(self._limit, self._shifts),
                FINE_GRID.capacities(self.horizon),
                self.grid_capacities,
                self.horizon,
                int(self._s.meta[SK.S_MAX_DISTANCE]),
                self.sampling,
            )
        self._ring_tokens()
        return self._unscaled(self.window_curve(float(window)))

    def _unscaled(self, c: HitRateCurve) -> HitRateCurve:
        """A ring curve (fixed point) in accesses, labelled as the estimate it is."""
        return replace(
            c,
            block_hits=np.round(c.block_hits / SK.SCALE).astype(np.int64),
            token_hits=np.round(c.token_hits / SK.SCALE).astype(np.int64),
            accesses=round(c.accesses / SK.SCALE),
            tokens=round(c.tokens / SK.SCALE),
            beyond_horizon_blocks=round(c.beyond_horizon_blocks / SK.SCALE),
            beyond_horizon_tokens=round(c.beyond_horizon_tokens / SK.SCALE),
            sample=self.sampling,
        )

    def slot_series(self, seconds: float, coarse: bool = False) -> SlotSeries:
        """Per-slot estimates (accesses exact) for the last `seconds`, oldest first."""
        ring = self.coarse if coarse else self.fine
        self._ring_tokens()
        s = ring.series(seconds, self.grid_capacities, self.horizon)
        return replace(s, counts=s.counts / SK.SCALE, blocks=s.blocks / SK.SCALE, tokens=s.tokens / SK.SCALE)

    def consecutive_window_curves(self, seconds: float, points: int) -> list[HitRateCurve]:
        return [replace(c, sample=self.sampling) for c in super().consecutive_window_curves(seconds, points)]


def _fixed(weights: np.ndarray) -> np.ndarray:
    """Weights in the kernel's fixed point (weight 1 = WEIGHT_ONE)."""
    return np.round(weights * SK.WEIGHT_ONE).astype(np.int64)


def _ring_arrays(ring: SlotRing) -> tuple[np.ndarray, ...]:
    """A SlotRing's arrays, which the kernel adds each slot's tallies to (sampling_kernel._ring_add)."""
    return ring.blocks, ring.tokens, ring.counts, ring.requests, ring.slot_ids
