"""Exact LRU curves of a stream cut into consecutive partitions: partial stacks and their ordered merge.

PARDA (Niu, Dinan, Lu, Sadayappan, IPDPS 2012; docs/method.md, section 13): each partition is
analysed alone, from an empty stack, and keeps
- its histogram of stack distances: a re-access whose previous access lies in the same partition
  has the same distance in the whole stream (every block in between is in the partition);
- its final LRU stack (most recent first, at most the horizon H of it);
- its *firsts*: the blocks in the order of their first access in the partition, with that access's
  tokens (the partition's "local infinities"), at most H of them.
Merging an earlier A with a later B looks B's i-th first up in A's stack as if B were appended to A:
found at position q (1-based), its distance in A then B is
    d = i + q - c,    c = B's earlier firsts found in A above position q,
the i blocks B touched before it lying above it, plus A's blocks above it that B has not moved. A
distance within H is a hit; beyond H, or a first not in A's stack while A forgot blocks, is a miss
at every capacity up to H. B's stack keeps A's blocks B did not touch under its own, B's firsts not
found follow A's, both cut at H; histograms add. The merge is associative and ordered, so an
ordered tree of them gives the one-process histogram bit for bit: a first at index >= H, or a block
below position H of A, has a distance above H whatever comes before.

The merge and its tree are kvset.core.partial_stack_merge. The analyzer's time slots (the windowed
curves, the churn and the trends) merge beside the histogram in kvset.core.partial_slots: each first
resolved in the merge is resolved in its time slot too.

What is not merged exactly: which misses were first accesses and which re-references beyond the
horizon. One process tells them apart with an exact set of the blocks it forgot; a partition
knows only the blocks it forgot itself and those still in the earlier partitions' stacks, so a
block forgotten in one partition and re-read in a later one counts as a first access here. Without
a horizon reached (at most H distinct blocks), there is nothing forgotten and the split is exact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from kvset.core import kernel_layout as KL
from kvset.core.analyzer import Analyzer
from kvset.core.curve import HitRateCurve
from kvset.core.feed_args import reverse_within_requests, timestamps_array, tokens_array
from kvset.core.partial_slots import PartialSlots, SlotMarks, SpillRing, empty_slots, ring_state
from kvset.types import AccessBatch
from kvset.units import DEFAULT_UNITS, StreamUnits

Keys = npt.NDArray[np.uint64]
Ints = npt.NDArray[np.int64]

# counts[] layout (int64): the partition's totals
P_ACCESSES = 0
P_TOKENS = 1
P_FIRST_TIME = 2  # misses counted as first accesses (blocks, then tokens)
P_FIRST_TIME_TOKENS = 3
P_BEYOND = 4  # misses counted as re-references beyond the horizon
P_BEYOND_TOKENS = 5
P_HITS = 6  # re-references within the horizon: the histogram's sum
P_REQUESTS = 7
COUNTS_SIZE = 8


@dataclass(frozen=True, eq=False)
class PartialStack:
    """The state of one run of consecutive accesses, analysed from an empty stack (see the module).

    hist[d] = (blocks, tokens) of the accesses at stack distance d, 1 <= d <= H (row 0 unused);
    stack: the blocks most recent first; firsts, first_tokens: the blocks by first access, with
    that access's tokens; complete: every block of the run is in `stack` and `firsts` (at most H
    distinct blocks), so `distinct` is their number; when not, both hold H blocks.
    t_first, t_last: the run's earliest and latest timestamps (NaN: none); windows: its time slots."""

    horizon: int
    hist: Ints
    counts: Ints
    stack: Keys
    firsts: Keys
    first_tokens: Ints
    complete: bool
    t_first: float = float("nan")
    t_last: float = float("nan")
    windows: PartialSlots | None = None  # None: no slots kept (empty_stack gives empty ones)
    # a merge tree's root keeps no stack or firsts, only their lengths (kvset.core.partial_stack_merge)
    root_sizes: tuple[int, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # the driver's notes about the run (its input)

    @property
    def distinct(self) -> int:
        """Distinct blocks (exact when complete; H + 1 stands for 'more than H')."""
        if not self.complete:
            return self.horizon + 1
        return len(self.firsts) if self.root_sizes is None else self.root_sizes[1]

    # what the reports read off an analyzer (kvset.core.analyzer.Analyzer's names)
    @property
    def accesses(self) -> int:
        return int(self.counts[P_ACCESSES])

    @property
    def tokens(self) -> int:
        return int(self.counts[P_TOKENS])

    @property
    def first_time(self) -> int:
        return int(self.counts[P_FIRST_TIME])

    @property
    def beyond_horizon(self) -> int:
        return int(self.counts[P_BEYOND])

    @property
    def rereferences(self) -> int:
        return int(self.counts[P_HITS])

    @property
    def requests(self) -> int:
        return int(self.counts[P_REQUESTS])

    @property
    def sampling(self) -> None:
        return None

    @property
    def tracked_blocks(self) -> int:
        """The blocks one process tracks at the end: its LRU stack, cut at the horizon."""
        return len(self.stack) if self.root_sizes is None else self.root_sizes[0]

    @property
    def max_distance(self) -> int:
        """The largest distance seen: hist is cut after its row (kept so by the analyzer and the merge)."""
        return len(self.hist) - 1

    @property
    def misses(self) -> int:
        """Accesses that are misses at every capacity up to H (first accesses and beyond the horizon)."""
        return int(self.counts[P_FIRST_TIME] + self.counts[P_BEYOND])

    @property
    def forgotten_blocks(self) -> int:
        """Blocks one process forgets at the horizon: every miss past the first H adds one to the stack."""
        return max(0, self.misses - self.horizon)

    # Pickled (as Dask moves states between processes, and the root to the client) with only the
    # histogram's rows that hold accesses when they are few: the merged state of the large agentic trace
    # has 60,786 of its 2.79M distance rows used, 1.5 MB sent instead of 44.6 MB (`make bench-dask`).
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        used = np.flatnonzero(self.hist[:, 0])  # a row's tokens are counted with its blocks
        if 3 * len(used) < 2 * len(self.hist):  # a used row takes 24 bytes so, 16 in the dense array
            state["hist"] = (len(self.hist), used, self.hist[used])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state["hist"], tuple):
            rows, used, values = state["hist"]
            hist = np.zeros((rows, 2), dtype=np.int64)
            hist[used] = values
            state["hist"] = hist
        self.__dict__.update(state)

    def nbytes(self) -> int:
        arrays = (self.hist, self.counts, self.stack, self.firsts, self.first_tokens)
        return sum(a.nbytes for a in arrays) + (self.windows.nbytes() if self.windows else 0)

    def curve(self) -> HitRateCurve:
        """The exact all-time curve, as Analyzer.curve() gives it for the same accesses."""
        maxd = self.max_distance
        c = self.counts
        return HitRateCurve(
            capacities=np.arange(1, maxd + 1, dtype=np.int64),
            block_hits=np.cumsum(self.hist[1 : maxd + 1, 0]),
            token_hits=np.cumsum(self.hist[1 : maxd + 1, 1]),
            accesses=int(c[P_ACCESSES]),
            tokens=int(c[P_TOKENS]),
            horizon=self.horizon,
            exact=True,
            window_seconds=None,
            beyond_horizon_blocks=int(c[P_BEYOND]),
            beyond_horizon_tokens=int(c[P_BEYOND_TOKENS]),
        )


def empty_stack(horizon: int) -> PartialStack:
    return PartialStack(
        horizon=int(horizon),
        hist=np.zeros((1, 2), dtype=np.int64),
        counts=np.zeros(COUNTS_SIZE, dtype=np.int64),
        stack=np.zeros(0, dtype=np.uint64),
        firsts=np.zeros(0, dtype=np.uint64),
        first_tokens=np.zeros(0, dtype=np.int64),
        complete=True,
        windows=empty_slots(horizon),
    )


class PartitionAnalyzer:
    """Feeds one partition's batches to an exact Analyzer and keeps its firsts; `state()` at the end.

    The analyzer's per-access distances say which accesses found no earlier one (0): before its
    first forgotten block, those are exactly the first accesses of distinct blocks, so its first H
    are the partition's firsts. Its rings keep what they drop (SpillRing), and SlotMarks the slot of
    each first and the accesses on time (kvset.core.partial_slots)."""

    def __init__(self, horizon: int, order: str = "forward", units: StreamUnits = DEFAULT_UNITS) -> None:
        self.analyzer = a = Analyzer(horizon=horizon, order=order, units=units)  # type: ignore[arg-type]
        nb = len(a.grid_capacities)
        a.fine = SpillRing(a.fine.width, a.fine.n_slots, nb)
        a.coarse = SpillRing(a.coarse.width, a.coarse.n_slots, nb)
        self.horizon = int(horizon)
        self._marks = SlotMarks(a.fine.width)
        self._first_keys: list[Keys] = []
        self._first_tokens: list[Ints] = []
        self._first_slots: list[Ints] = []
        self._firsts = 0

    def feed_batch(self, batch: AccessBatch) -> None:
        n = len(batch.keys)
        if batch.timestamps is None and n:  # the wall time the analyzer would take, taken once for both
            batch = replace(batch, timestamps=time.time())
        out = self.analyzer.feed_batch(batch, return_distances=True)
        if out is None or n == 0:
            return
        stamps, _, _ = timestamps_array(batch.timestamps, n)
        starts = batch.request_starts
        order = None
        if self.analyzer.order == "reverse" and starts is not None and len(starts):
            order = reverse_within_requests(np.asarray(starts, dtype=np.int64), n)
            stamps = stamps[order] if len(stamps) == n else stamps
        if order is not None:
            out = out[order]
        at = (
            _NONE if self._firsts >= self.horizon else np.flatnonzero(out == 0)[: self.horizon - self._firsts]
        )
        slots = self._marks.feed(stamps, n, at)  # fed every batch: the on-time counts need them all
        if not len(at):
            return
        keys = np.ascontiguousarray(batch.keys, dtype=np.uint64)
        tokens = tokens_array(batch.tokens, n, self.analyzer.block_size)
        if tokens.shape[0] != n:
            tokens = np.full(n, int(tokens[0]), dtype=np.int64)
        if order is not None:
            keys, tokens = keys[order], tokens[order]
        self._first_keys.append(keys[at])
        self._first_tokens.append(tokens[at].astype(np.int64))
        self._first_slots.append(slots)
        self._firsts += len(at)

    def _windows(self) -> PartialSlots:
        a = self.analyzer
        assert isinstance(a.fine, SpillRing) and isinstance(a.coarse, SpillRing)
        on_slots, on_time = self._marks.on_time()
        first_slots = np.concatenate([np.zeros(0, dtype=np.int64), *self._first_slots])
        return PartialSlots(
            ring_state(a.fine), ring_state(a.coarse), first_slots, on_slots, on_time, a.late_accesses
        )

    def state(self) -> PartialStack:
        a = self.analyzer
        hist = a.distance_histogram()  # not the curve's sums taken apart again: 0.15 s a partition of 40M
        beyond_tokens = int(a.counts[KL.C_BEYOND_TOKENS])
        counts = np.zeros(COUNTS_SIZE, dtype=np.int64)
        counts[P_ACCESSES] = a.accesses
        counts[P_TOKENS] = a.tokens
        counts[P_FIRST_TIME] = a.first_time
        counts[P_BEYOND] = a.beyond_horizon
        counts[P_BEYOND_TOKENS] = beyond_tokens
        counts[P_HITS] = a.rereferences
        counts[P_FIRST_TIME_TOKENS] = a.tokens - int(hist[:, 1].sum()) - beyond_tokens
        counts[P_REQUESTS] = a.requests
        firsts = np.concatenate([np.zeros(0, dtype=np.uint64), *self._first_keys])
        return PartialStack(
            horizon=self.horizon,
            hist=hist,
            counts=counts,
            stack=a.stack_keys(),
            firsts=firsts,
            first_tokens=np.concatenate([np.zeros(0, dtype=np.int64), *self._first_tokens]),
            complete=a.forgotten_blocks == 0 and len(firsts) < self.horizon + 1,
            t_first=float("nan") if a.first_time_at is None else a.first_time_at,
            t_last=float("nan") if a.last_time_at is None else a.last_time_at,
            windows=self._windows(),
        )


_NONE = np.zeros(0, dtype=np.int64)


def partial_stack(
    keys: npt.ArrayLike,
    tokens: npt.ArrayLike | int | None = None,
    horizon: int = 1 << 22,
    order: str = "forward",
    request_starts: npt.ArrayLike | None = None,
    timestamps: npt.ArrayLike | float = 0.0,
) -> PartialStack:
    """The partial stack of one run of accesses given as arrays (one batch, at time 0 unless
    timestamps are given; one token count for all: blocks of that size)."""
    p = PartitionAnalyzer(horizon, order, array_units(tokens))
    k = np.ascontiguousarray(keys, dtype=np.uint64)
    if len(k):
        p.feed_batch(array_batch(k, tokens, request_starts, timestamps))
    return p.state()


def array_units(tokens: npt.ArrayLike | int | None) -> StreamUnits:
    """The units of accesses given as arrays: one token count for all is their block size."""
    if tokens is None or np.ndim(tokens) != 0:
        return DEFAULT_UNITS
    return StreamUnits(int(tokens), "flag")  # type: ignore[arg-type]


def array_batch(
    keys: npt.ArrayLike,
    tokens: npt.ArrayLike | int | None,
    request_starts: npt.ArrayLike | None,
    timestamps: npt.ArrayLike | float = 0.0,
) -> AccessBatch:
    """One batch of accesses given as arrays, at time 0 or `timestamps` (tokens: per access, one
    number, or None: a whole block each, in array_units(tokens))."""
    scalar = tokens is None or np.ndim(tokens) == 0
    return AccessBatch(
        keys=np.ascontiguousarray(keys, dtype=np.uint64),
        tokens=None if scalar else np.asarray(tokens, dtype=np.int64),
        request_starts=None if request_starts is None else np.asarray(request_starts, dtype=np.int64),
        timestamps=_stamps(timestamps),
    )


def _stamps(timestamps: npt.ArrayLike | float) -> np.ndarray | float:
    stamps = np.asarray(timestamps, dtype=np.float64)
    return float(stamps) if stamps.ndim == 0 else stamps
