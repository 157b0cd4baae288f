"""Sampled analysis: the hit-rate curve of a stream estimated from a spatial sample of its blocks.

    a = new_analyzer(units, sampling=Sampling(rate=0.01, seed=1))   # or Sampling(size=100_000): at most
                                                                    # that many blocks (kvset.core.stack_distance)
    a.feed(keys, tokens=..., request_starts=..., timestamps=...)
    c = a.curve()          # a HitRateCurve with c.estimate True, c.sample and a standard error per capacity

SHARDS (Waldspurger et al., FAST'15) keeps a block iff hash(key) < R x 2^64 and scales its stack
distances by 1/R. On prefix-cache traffic a few blocks every request shares (system prompts) take a
large share of all accesses, and whether the sample holds them swings the curve by points. Three
changes fix that, measured in benchmarks/sampling.py:

- Boosted request heads: the block at position p of its request is kept at a rate that grows
  toward the request's head (kvset.core.sampling_rates: HEAD_BOOSTS and why), so the shared first
  blocks of requests are in the sample many times more often. That needs a block's position to be
  fixed, as in a prefix cache; where positions are seen to vary (keys that are not prefix-chained),
  the sample drops the boost for bands by access count (kvset.core.sampling_counts) and says so
  (SampleInfo.head_boost).
- Post-stratification: the accesses of each band are counted exactly; each band's sampled histogram
  is scaled to the band's true access count, instead of by 1/R.
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

from dataclasses import replace

import numpy as np
import numpy.typing as npt

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
    request_starts_array,
    reverse_within_requests,
    timestamps_array,
    tokens_array,
)
from kvset.core.kernel_types import Int
from kvset.core.log_grid import FINE_GRID, WINDOW_GRID
from kvset.core.ring_kernel import ring_arrays
from kvset.core.sampling_counts import NO_BANDS, CountBands, PlainTallies
from kvset.core.sampling_curve import EstimatedCounts, estimated_count, post_stratified_curve
from kvset.core.sampling_rates import (
    BANDS,
    BEFORE_PLAIN,
    FIXED_SIZE_HEAD,
    MAX_HASH,
    MIN_PLAIN_EVIDENCE,
    MOVED_SHARE,
    band_rates,
    count_shifts,
    head_for_rate,
    head_shifts,
    limit_rate,
    rate_limit,
    seed_salt,
)
from kvset.core.sampling_state import MIN_TRACKED, SampleState, fixed_weights
from kvset.core.slots import NO_SLOT, SlotRing, SlotSeries, TimeSlotViews, consecutive_window_curves
from kvset.types import AccessBatch
from kvset.units import DEFAULT_UNITS, StreamUnits

METHOD = "spatial sample of the blocks (SHARDS) with boosted request heads, post-stratified by position"
PLAIN_METHOD = (
    "spatial sample of the blocks (SHARDS), post-stratified by how often a block was read, often-read blocks "
    "sampled more: block positions vary, so request heads are not boosted"
)
EVICT_SHARE = 16  # fixed size: a full sample drops 1/16 of its blocks at once (amortized O(1) a block)


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
        initial_tracked: int = MIN_TRACKED,
        sample_rate: float | None = None,
        sample_size: int | None = None,
        seed: int = 0,
        watch_positions: bool = True,
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
        self._head = head_for_rate(sample_rate) if sample_rate is not None else FIXED_SIZE_HEAD
        self._shifts = head_shifts(self._head)
        self._weights = 1.0 / band_rates(self._limit, self._shifts)
        # watch_positions: drop the head boost when block positions are seen to vary (False: never,
        # which one partition of kvset.core.partial_sample cannot tell)
        self._watch = bool(watch_positions)
        self.head_boost = True
        self._counts: CountBands | None = None  # once the boost is dropped: bands by access count
        capacity = max(1, min(initial_tracked, self.sample_size or initial_tracked))
        self._s = SampleState(capacity)
        self._s.meta[SK.S_HORIZON] = self.horizon
        self._s.meta[SK.S_FINE_CURRENT] = self._s.meta[SK.S_COARSE_CURRENT] = NO_SLOT
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
        self._plain = PlainTallies(SK.GROUPS, SK.KINDS, n_fine, nb)  # what a dropped boost keeps
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
        if self._counts is not None:  # no head boost: bands by access count
            return self._counts.gather(keys, ts, check, 0, self._salt, self._thresholds(), self._found_all())
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

    def _found_all(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._found, self._found_band, self._found_key

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
                self._counts.access_band if self._counts is not None else NO_BANDS,
                self._salt,
                self._weights,
                fixed_weights(self._weights),
                self._watch and self.head_boost,
                np.uint64(self._limit),
                MIN_PLAIN_EVIDENCE,
                MOVED_SHARE,
                s.table,
                s.mask,
                *s.slots(),
                s.fen,
                s.meta,
                self.band_counts,
                self.sampled,
                self.hist,
                self.ghist,
                self._plain.arrays(),
                1.0 / limit_rate(self._limit),
                self._token_planes,
                self._scratch_blocks,
                self._scratch_tokens,
                self._scratch_counts,
                ring_arrays(fine),
                self.coarse.width,
                ring_arrays(self.coarse),
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
            elif reason == SK.STOP_MOVED:
                self._drop_head_boost()
                # the rest of the batch, gathered again by the count bands' rates
                assert self._counts is not None
                n_found = self._counts.gather(
                    keys, ts, False, int(i), self._salt, self._thresholds(), self._found_all()
                )[0]
            else:
                break
        for ring, at in ((fine, SK.S_FINE_CURRENT), (self.coarse, SK.S_COARSE_CURRENT)):
            ring.current = None if s.meta[at] == NO_SLOT else int(s.meta[at])
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
            self._plain.fill_tokens(self._same_tokens)
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
        self._resample()

    def _drop_head_boost(self) -> None:
        """Block positions vary (kvset.core.sampling_rates): from here on the bands go by access count,
        the blocks only the boost kept are dropped, and what was tallied so far is one band: the plain
        tallies of the blocks kept at every band (sampling_counts.PlainTallies)."""
        self.head_boost = False
        self._shifts = count_shifts(self._head)
        s = self._s
        s.slot[: int(s.meta[SK.S_NOW]), SS.W_BAND] = BEFORE_PLAIN  # kept now only if kept at every band
        self._resample()
        self._plain.fold_position_bands(self.band_counts, self.sampled, self.hist, self.ghist)
        self._counts = CountBands()

    def _resample(self) -> None:
        """Drop the tracked blocks the limit and shifts no longer keep; weigh the others anew."""
        s = self._s
        now = int(s.meta[SK.S_NOW])
        dropped = SS.drop_above(
            np.uint64(self._limit), self._salt, self._shifts, s.table, s.mask, *s.slots(), now
        )
        s.meta[SK.S_TRACKED] -= dropped
        self._weights = 1.0 / band_rates(self._limit, self._shifts)
        s.reweight(fixed_weights(self._weights))

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
            head_boost=self.head_boost,
            moved_share=self.moved_share,
        )

    @property
    def moved_share(self) -> float | None:
        """Of the re-accesses of blocks kept at every position while the heads were boosted, the share
        at a position of another rate than the access before (None: none seen)."""
        evidence = int(self._s.meta[SK.S_EVIDENCE])
        return int(self._s.meta[SK.S_MOVED]) / evidence if evidence else None

    @property
    def tracked_blocks(self) -> int:
        return int(self._s.meta[SK.S_TRACKED])

    def _estimated(self, kind: int) -> int:
        return estimated_count(self.band_counts, self.sampled, kind, not self.head_boost)

    def memory_bytes(self) -> int:
        rings = sum(a.nbytes for r in (self.fine, self.coarse) for a in (r.blocks, r.tokens, r.counts))
        tallies = sum(
            a.nbytes for a in (self.band_counts, self.sampled, self.hist, self.ghist, *self._plain.arrays())
        )
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
        return replace(s, counts=s.counts / SK.SCALE, scale=SK.SCALE)

    def consecutive_window_curves(self, seconds: float, points: int) -> list[HitRateCurve]:
        # through slot_series, which scales the sampled counts (the exact analyzer sums in place)
        curves = consecutive_window_curves(self.fine, self.coarse, self.slot_series, seconds, points)
        return [replace(c, sample=self.sampling) for c in curves]
