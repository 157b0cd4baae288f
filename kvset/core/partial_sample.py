"""The sampled analysis (kvset.core.sampling) of a stream cut into consecutive partitions, merged in order.

The spatial filter is local (a block's hash and its position in its request decide), so each
partition filters its own accesses, counts every access by position band exactly, and runs the
sampled kernel's weighted stack on what it kept. A partition keeps, as kvset.core.partial_stack
does for the exact analysis: its tallies (histograms of weighted hits, by band, on the sampled
analyzer's grids), its tracked blocks' slots (key, weight, weighted accesses before, access index,
band), oldest first, and its firsts: the sampled blocks by first access, each with what the
estimate d = 1 + t k / a needs from the partition (its access index and band, the weighted accesses
and the weighted live blocks before it). Merging an earlier A with a later B resolves B's firsts
found among A's slots with the same integers one process would have had:
    t = (n_A + g_x) - g_p - 1,   a = (W_A + W_x) - W_p - w_p,   k = L_x + (A's live weight after p)
(A's live weight counting only the blocks B has not accessed before x), so the same distance, the
same rounding and the same tallies. The sample forgets no block (no horizon on the slots), so no
first is cut and the split of first accesses and re-references beyond the horizon is exact too.

Bit for bit: the tallies are sums of the bands' weights (times tokens); where every weight is a
binary fraction, which holds at rates 1/m of a power of ten or two times a small integer (1 %, 5 %,
0.1 %, 20 %, 50 %), those sums are exact in any order and the estimate is one process's to the bit;
at other rates (3 %) they agree to the last few bits of a float64.

Fixed size (--sample-size) lowers the rate as the whole stream grows: it does not distribute. Nor
does the fall back to plain sampling when block positions vary (kvset.core.sampling_rates): one
partition cannot tell the others when to drop the head boost, so a partition keeps it, and the
merged estimate is one process's with Sampling(watch_positions=False): for prefix-chained keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from kvset.core import fenwick
from kvset.core import hash_table as HT
from kvset.core import sampling_filter as SF
from kvset.core import sampling_kernel as SK
from kvset.core.analyzer import check_batch_block_size
from kvset.core.curve import HitRateCurve, SampleInfo
from kvset.core.feed_args import request_starts_array, reverse_within_requests, tokens_array
from kvset.core.kernel_types import Int
from kvset.core.log_grid import FINE_GRID, WINDOW_GRID, bucket_of
from kvset.core.partial_stack import array_batch, array_units
from kvset.core.sampling_curve import EstimatedCounts, estimated_count, post_stratified_curve
from kvset.core.sampling_filter import band_thresholds, priority_hash
from kvset.core.sampling_rates import (
    BANDS,
    band_rates,
    head_for_rate,
    head_shifts,
    limit_rate,
    rate_limit,
    seed_salt,
)
from kvset.types import AccessBatch
from kvset.units import DEFAULT_UNITS, StreamUnits

Ints = npt.NDArray[np.int64]
Keys = npt.NDArray[np.uint64]
Floats = npt.NDArray[np.float64]

FINE_EXACT_BITS, FINE_OCTAVE_BITS = FINE_GRID
GRID_EXACT_BITS, GRID_OCTAVE_BITS = WINDOW_GRID

# columns of a slot or a first (int64): a first's are the slot its access makes, and what lay before it
S_KEY = 0  # the key, as int64 bits
S_WEIGHT = 1  # fixed point (SK.WEIGHT_ONE)
S_BEFORE = 2  # weighted tracked accesses before this access (fixed point)
S_INDEX = 3  # access index from the state's start
S_BAND = 4
S_LIVE = 5  # firsts: weighted live blocks before the access (fixed point)
S_TOKENS = 6  # firsts: the access's tokens
COLUMNS = 7


@dataclass(frozen=True, eq=False)
class PartialSample(EstimatedCounts):
    """The sampled state of one run of consecutive accesses, analysed from an empty sample.

    slots[i] and firsts[i] rows by the S_ columns; totals: accesses n, weighted tracked accesses W and
    live weight L (fixed point). hist, ghist, sampled: the sampled kernel's all-time tallies, without
    the first accesses' (added when the curve is read: a first may yet be found in an earlier state).
    scalar_tokens: the one token count every batch gave as a number (None: per-access tokens)."""

    horizon: int
    rate: float
    seed: int
    band_counts: Ints
    sampled: Floats
    hist: Floats
    ghist: Floats
    slots: Ints
    firsts: Ints
    totals: Ints  # (accesses, W, L, tracked accesses, requests, max distance)
    scalar_tokens: int | None
    t_first: float = float("nan")
    t_last: float = float("nan")
    extra: dict[str, Any] = field(default_factory=dict)

    def nbytes(self) -> int:
        arrays = (self.band_counts, self.sampled, self.hist, self.ghist, self.slots, self.firsts, self.totals)
        return sum(a.nbytes for a in arrays)

    def _tallies(self) -> Floats:
        """The sampled tallies with the firsts counted as first accesses (they were found in no earlier state)."""
        out = self.sampled.copy()
        _count_firsts(self.firsts, _weights(self.rate), np.uint64(seed_salt(self.seed)), out)
        return out

    @property
    def requests(self) -> int:
        return int(self.totals[4])

    @property
    def sampling(self) -> SampleInfo:
        return SampleInfo(
            rate=limit_rate(rate_limit(self.rate)),
            size=None,
            seed=self.seed,
            tracked_blocks=len(self.slots),
            tracked_accesses=int(self.totals[3]),
            accesses=self.accesses,
        )

    def _estimated(self, kind: int) -> int:
        return estimated_count(self.band_counts, self._tallies(), kind)

    def curve(self) -> HitRateCurve:
        """The sampled analyzer's all-time estimate for the same accesses, rate and seed."""
        limit = rate_limit(self.rate)
        return post_stratified_curve(
            self.hist,
            self.ghist,
            None if self.scalar_tokens in (None, -1) else self.scalar_tokens,
            self._tallies(),
            self.band_counts,
            band_rates(limit, _shifts(self.rate)),
            FINE_GRID.capacities(self.horizon),
            WINDOW_GRID.capacities(self.horizon),
            self.horizon,
            int(self.totals[5]),
            self.sampling,
        )


def _shifts(rate: float) -> Ints:
    return head_shifts(head_for_rate(rate))


def _weights(rate: float) -> Floats:
    return 1.0 / band_rates(rate_limit(rate), _shifts(rate))


def empty_sample(horizon: int, rate: float, seed: int = 0, scalar_tokens: int | None = None) -> PartialSample:
    n_fine, nb = len(FINE_GRID.capacities(horizon)), len(WINDOW_GRID.capacities(horizon))
    return PartialSample(
        horizon=int(horizon),
        rate=float(rate),
        seed=int(seed),
        band_counts=np.zeros((BANDS, 2), dtype=np.int64),
        sampled=np.zeros((SK.GROUPS, BANDS, SK.KINDS, 2)),
        hist=np.zeros((2, BANDS, n_fine)),
        ghist=np.zeros((2, SK.GROUPS, BANDS, nb)),
        slots=np.zeros((0, COLUMNS), dtype=np.int64),
        firsts=np.zeros((0, COLUMNS), dtype=np.int64),
        totals=np.zeros(6, dtype=np.int64),
        scalar_tokens=scalar_tokens,
    )


@njit(nogil=True, cache=True)
def _count_firsts(
    firsts: Ints, weights: Floats, salt: np.uint64, sampled: Floats
) -> None:  # pragma: no cover
    for i in range(firsts.shape[0]):
        key = np.uint64(firsts[i, S_KEY])
        b = firsts[i, S_BAND]
        grp = np.int64(priority_hash(key, salt) & np.uint64(SK.GROUPS - 1))
        sampled[grp, b, SK.T_FIRST_TIME, 0] += weights[b]
        sampled[grp, b, SK.T_FIRST_TIME, 1] += weights[b] * firsts[i, S_TOKENS]


@njit(inline="always")
def _tally_hit(
    d: float,
    b: Int,
    grp: Int,
    w: float,
    wt: float,
    horizon: Int,
    hist: Floats,
    ghist: Floats,
    sampled: Floats,
) -> Int:  # pragma: no cover - compiled
    """A re-access at estimated distance d: a hit in the histograms, or beyond the horizon. Returns d or 0."""
    di = np.int64(d + 0.5)
    if di > horizon:
        sampled[grp, b, SK.T_BEYOND, 0] += w
        sampled[grp, b, SK.T_BEYOND, 1] += wt
        return 0
    hist[0, b, bucket_of(di, FINE_EXACT_BITS, FINE_OCTAVE_BITS)] += w
    hist[1, b, bucket_of(di, FINE_EXACT_BITS, FINE_OCTAVE_BITS)] += wt
    q = bucket_of(di, GRID_EXACT_BITS, GRID_OCTAVE_BITS)
    ghist[0, grp, b, q] += w
    ghist[1, grp, b, q] += wt
    return di


@njit(inline="always")
def _distance(gap: Int, between: Int, after: Int) -> float:  # pragma: no cover - compiled
    """The sampled kernel's estimate, the same operations on the same integers."""
    if between > 0:
        share = after / between
        return 1.0 + gap * (share if share < 1.0 else 1.0)
    return 1.0 + gap


@njit(inline="always")
def _new_table(m: int) -> tuple[Keys, int]:  # pragma: no cover - compiled
    cells = 1
    while cells < 2 * m:
        cells <<= 1
    table = np.empty(2 * cells, dtype=np.uint64)
    for c in range(cells):
        table[2 * c + 1] = HT.EMPTY
    return table, cells - 1


@njit(nogil=True, cache=True)
def _local(
    found: Ints,
    weights: Floats,
    fixed: Ints,
    salt: np.uint64,
    horizon: int,
    hist: Floats,
    ghist: Floats,
    sampled: Floats,
    totals: Ints,
) -> tuple[Ints, Ints]:  # pragma: no cover - compiled
    """The sampled kernel's weighted stack over one partition's sampled accesses (found rows, in order):
    hits tallied, firsts recorded (rows of `found` rewritten as firsts); returns (slots, firsts)."""
    m = found.shape[0]
    table, mask = _new_table(m)
    slots = np.empty((m, COLUMNS), dtype=np.int64)  # one slot an access: no compaction needed
    fen = np.zeros(m + 1, dtype=np.int64)
    is_first = np.zeros(m, dtype=np.bool_)
    live = wsum = 0
    max_d = totals[5]
    for j in range(m):
        key = np.uint64(found[j, S_KEY])
        b = found[j, S_BAND]
        g = found[j, S_INDEX]
        tok = found[j, S_TOKENS]
        w = weights[b]
        grp = np.int64(priority_hash(key, salt) & np.uint64(SK.GROUPS - 1))
        cell = HT.table_find(table, mask, key)
        if cell >= 0:
            p = np.int64(table[2 * cell + 1])
            wp = slots[p, S_WEIGHT]
            d = _distance(
                g - slots[p, S_INDEX] - 1, wsum - slots[p, S_BEFORE] - wp, live - fenwick.prefix(fen, p)
            )
            fenwick.add(fen, p, -wp)
            slots[p, S_WEIGHT] = 0
            live -= wp
            di = _tally_hit(d, b, grp, w, w * tok, horizon, hist, ghist, sampled)
            if di > max_d:
                max_d = di
        else:
            cell = -cell - 1
            table[2 * cell] = key
            is_first[j] = True
            found[j, S_BEFORE] = wsum
            found[j, S_LIVE] = live
        sampled[grp, b, SK.T_ACCESSES, 0] += w
        sampled[grp, b, SK.T_ACCESSES, 1] += w * tok
        table[2 * cell + 1] = np.uint64(j)
        for c in range(COLUMNS):
            slots[j, c] = found[j, c]
        slots[j, S_WEIGHT] = fixed[b]
        slots[j, S_BEFORE] = wsum
        fenwick.add(fen, j, fixed[b])
        live += fixed[b]
        wsum += fixed[b]
    totals[1] += wsum
    totals[2] += live
    totals[3] += m
    totals[5] = max_d
    kept = slots[slots[:, S_WEIGHT] > 0]
    firsts = found[is_first]
    firsts[:, S_WEIGHT] = 0
    return kept, firsts


class SamplePartitionAnalyzer:
    """Filters one partition's batches as SampledAnalyzer does (position bands, seeded hash), counts every
    access by band, keeps the sampled ones; `state()` runs the weighted stack on them."""

    def __init__(
        self,
        horizon: int,
        order: str,
        rate: float,
        seed: int = 0,
        carry: int = 0,
        units: StreamUnits = DEFAULT_UNITS,
    ) -> None:
        self.horizon, self.order, self.rate, self.seed = int(horizon), order, float(rate), int(seed)
        self.units = units
        self._salt = np.uint64(seed_salt(seed))
        self._thresholds = band_thresholds(np.uint64(rate_limit(rate)), _shifts(rate))
        self._state = empty_sample(horizon, rate, seed)
        self._found: list[Ints] = []
        self._buffers = (
            np.empty(0, dtype=np.int64),
            np.empty(0, dtype=np.int64),
            np.empty(0, dtype=np.uint64),
        )
        self._accesses = 0
        self._carry = int(carry)  # position of the next access if it continues the last request
        self._scalar: int | None = None  # the one token count of every batch so far; -1: not one
        self.first_time_at: float | None = None
        self.last_time_at: float | None = None

    def feed_batch(self, batch: AccessBatch) -> None:
        check_batch_block_size(self.units, batch)
        keys = np.ascontiguousarray(batch.keys, dtype=np.uint64)
        n = len(keys)
        if n == 0:
            return
        tok = tokens_array(batch.tokens, n, self.units.block_size)
        same = int(tok[0]) if tok.shape[0] == 1 else -1
        self._scalar = same if self._scalar in (None, same) else -1
        starts = request_starts_array(batch.request_starts, n)
        reverse = self.order == "reverse" and len(starts) > 0
        if reverse:
            perm = reverse_within_requests(starts, n)
            keys = keys[perm]
            tok = tok[perm] if tok.shape[0] == n else tok
        _count_bands(starts, n, reverse, self._carry, tok, self._state.band_counts)
        # the sampled analyzer's own filter (kvset.core.sampling_filter), into buffers kept between batches
        if len(self._buffers[0]) < n:
            self._buffers = (
                np.empty(n, dtype=np.int64),
                np.empty(n, dtype=np.int64),
                np.empty(n, dtype=np.uint64),
            )
        at, band, key = self._buffers
        no_stamps = np.zeros(1)
        m, _, _ = SF.gather_batch(
            keys,
            no_stamps,
            False,
            0.0,
            starts,
            reverse,
            self._carry,
            self._salt,
            self._thresholds,
            at,
            band,
            key,
        )
        found = np.zeros((m, COLUMNS), dtype=np.int64)
        found[:, S_KEY] = key[:m].view(np.int64)
        found[:, S_INDEX] = at[:m] + self._accesses
        found[:, S_BAND] = band[:m]
        found[:, S_TOKENS] = tok[at[:m]] if tok.shape[0] == n else tok[0]
        self._found.append(found)
        self._state.totals[4] += len(starts)
        self._accesses += n
        self._carry = n - int(starts[-1]) if len(starts) else self._carry + n
        self._times(batch.timestamps)

    def _times(self, stamps: Any) -> None:
        if stamps is None:
            return
        lo, hi = (
            (float(stamps), float(stamps))
            if np.ndim(stamps) == 0
            else (float(np.min(stamps)), float(np.max(stamps)))
        )
        self.first_time_at = lo if self.first_time_at is None else min(self.first_time_at, lo)
        self.last_time_at = hi if self.last_time_at is None else max(self.last_time_at, hi)

    def state(self) -> PartialSample:
        st = self._state
        found = np.concatenate([np.zeros((0, COLUMNS), dtype=np.int64), *self._found])
        weights = _weights(self.rate)
        fixed = np.round(weights * SK.WEIGHT_ONE).astype(np.int64)
        slots, firsts = _local(
            found, weights, fixed, self._salt, self.horizon, st.hist, st.ghist, st.sampled, st.totals
        )
        st.totals[0] = self._accesses
        return PartialSample(
            horizon=self.horizon,
            rate=self.rate,
            seed=self.seed,
            band_counts=st.band_counts,
            sampled=st.sampled,
            hist=st.hist,
            ghist=st.ghist,
            slots=slots,
            firsts=firsts,
            totals=st.totals,
            scalar_tokens=self._scalar,
            t_first=float("nan") if self.first_time_at is None else self.first_time_at,
            t_last=float("nan") if self.last_time_at is None else self.last_time_at,
        )


@njit(nogil=True, cache=True)
def _count_bands(
    starts: Ints, n: int, reverse: bool, carry: int, tokens: Ints, band_counts: Ints
) -> None:  # pragma: no cover - compiled
    """Every access of the batch counted, with its tokens, in its position band, request by request, as
    the sampled kernel counts them (positions from the request's first block, also when reversed;
    accesses before the first start continue the last request, `carry` accesses in)."""
    per_access = tokens.shape[0] == n
    nstarts = starts.shape[0]
    x = 0
    r = -1
    while x < n:
        while r + 1 < nstarts and starts[r + 1] <= x:
            r += 1
        seg_end = starts[r + 1] if r + 1 < nstarts else n
        back, base = SF.request_base(r, starts, nstarts, n, reverse, carry)
        SF.count_position_bands(band_counts, tokens, per_access, x, seg_end, base, back)
        x = seg_end


def partial_sample(
    keys: npt.ArrayLike,
    tokens: npt.ArrayLike | int | None,
    horizon: int,
    rate: float,
    seed: int = 0,
    order: str = "forward",
    request_starts: npt.ArrayLike | None = None,
    carry: int = 0,
) -> PartialSample:
    """The sampled partial state of one run of accesses given as arrays (one batch, at time 0); carry:
    the position of its first access when it continues a request begun before it."""
    p = SamplePartitionAnalyzer(horizon, order, rate, seed, carry, array_units(tokens))
    p.feed_batch(array_batch(keys, tokens, request_starts))
    return p.state()
