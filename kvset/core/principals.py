"""Whose cache is it: each principal's (tenant, session, adapter) exact LRU curves, from one pass.

The shared analyzer gives every access its stack distance in the one stack all principals share
(Analyzer.feed_batch(return_distances=True)). A principal's accesses' distances are then its curve
*within the shared cache*: at capacity C it hits exactly where its distance is at most C, whoever
else filled the stack. Its *isolated* curve is a fresh analyzer fed its accesses alone: the cache it
would need without the others.

Cardinality is bounded in what is reported: the top K principals of a level by accesses are exact,
the rest are summed into one "other": its shared curve the sum of theirs, and no isolated curve (the
sum of each one's own cache would take an analyzer per principal; their accesses together in one
cache would be a second analyzer as large as the shared one, and a cache nobody has). What is
collected is bounded where asked (the live monitor's --by-window): the collector keeps the last N
accesses with their distances (kvset.core.principals_window), and every figure of the principals
is of those alone, the span they cover said with them (WindowSpan). A principal's shared curve
there is still exact (its accesses' distances were taken in the whole stream's stack); its isolated
curve and the pool replay start cold at the window's first access. The shared curves alone could be
kept for all time as histograms, but only of principals known in advance: which K lead changes
as the stream goes, and a histogram for every session ever seen is what is not bounded. So all of
them are of the window, one span for all, and their shares add up. `kvset analyze` keeps the whole
stream (it ends): its figures are of all of it. The window, in the analyzer's order, is what the
pool replay reads (kvset.core.pool_replay: who holds the cache, who displaces whom).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kvset.core.analyzer import Analyzer
from kvset.core.curve import HitRateCurve
from kvset.core.feed_args import reverse_within_requests
from kvset.core.pool_replay import PoolTrace
from kvset.core.principals_window import AccessWindow, WindowSpan
from kvset.types import (
    DEFAULT_TOP_PRINCIPALS,
    OTHER_PRINCIPALS,
    PRINCIPAL_LEVELS,
    UNKNOWN_PRINCIPAL,
    AccessBatch,
    PrincipalNames,
)


@dataclass(frozen=True, eq=False)
class PrincipalStream:
    """One principal at one level: its accesses, its curve in the shared cache, its curve alone.
    `members`: how many principals it stands for (more than 1 only for the summed "other")."""

    level: str
    name: str
    accesses: int
    curve: HitRateCurve
    isolated_curve: HitRateCurve | None  # None for "other"
    members: int = 1
    principal_id: int | None = None  # its id in the stream's PrincipalNames; None for "other"
    span: WindowSpan | None = None  # the accesses its figures cover (the collector's window)
    # the cap of the names' table when it stands for every name that came past it (by its id, not
    # its name: a stream may name a principal "(past the name cap)" too); None otherwise
    past_names_cap: int | None = None


SLICE = 1 << 20  # hits compared at once while a curve is read


def distance_curve(
    parts: Sequence[tuple[np.ndarray, np.ndarray]], keep: Sequence[np.ndarray], horizon: int
) -> HitRateCurve:
    """The exact curve of accesses with these stack distances (0: first time, -1: beyond the
    horizon) and tokens, given part by part (those of each part where `keep` is true). It steps
    only at the distances there are, so it is held at those alone: a principal with a few accesses
    far down a deep shared stack costs a few entries, not the depth, each 12 bytes where its
    counts fit 32 bits. Read in about 9 bytes a hit: each is one uint64 (its distance above 32
    bits, its tokens below) sorted in place."""
    high = np.uint64(32)
    hits = sum(np.count_nonzero(d[m] > 0) for (d, _), m in zip(parts, keep, strict=True))
    packed = np.empty(int(hits), dtype=np.uint64)
    accesses = tokens = beyond_blocks = beyond_tokens = at = 0
    for (d_all, tok_all), m in zip(parts, keep, strict=True):
        d, tok = d_all[m], tok_all[m]
        accesses += len(d)
        tokens += int(tok.sum(dtype=np.int64))
        beyond = d < 0
        beyond_blocks += int(beyond.sum())
        beyond_tokens += int(tok[beyond].sum(dtype=np.int64))
        hit = d > 0
        n = int(hit.sum())
        packed[at : at + n] = (d[hit].astype(np.uint64) << high) | tok[hit].astype(np.uint64)
        at += n
    packed.sort()
    begins = np.ones(at, dtype=bool)  # where a distance's hits begin
    for lo in range(0, max(at - 1, 0), SLICE):
        hi = min(lo + SLICE, at - 1)
        begins[lo + 1 : hi + 1] = (packed[lo + 1 : hi + 1] >> high) != (packed[lo:hi] >> high)
    first = np.flatnonzero(begins)
    del begins
    # a distance's hits sum to count * (distance << 32) + their tokens, in uint64 arithmetic that
    # wraps: taking the first part off leaves the tokens exactly
    summed = np.add.reduceat(packed, first) if at else np.zeros(0, dtype=np.uint64)
    steps = packed[first] >> high
    del packed
    counts = np.diff(first, append=at).astype(np.uint64)
    del first
    shifted = steps << high
    shifted *= counts
    summed -= shifted
    del shifted
    return HitRateCurve(
        capacities=steps.astype(_width(horizon)),
        block_hits=np.cumsum(counts, dtype=_width(at)),
        token_hits=np.cumsum(summed, dtype=_width(tokens)),
        accesses=accesses,
        tokens=tokens,
        horizon=horizon,
        exact=True,
        beyond_horizon_blocks=beyond_blocks,
        beyond_horizon_tokens=beyond_tokens,
    )


def _width(top: int) -> type[np.signedinteger]:
    """The integer type a curve's column is held in: 32 bits where its values stay under `top` (a
    principal's curve stands until the next read, and a big one has an entry per distance)."""
    return np.int32 if top < 2**31 else np.int64


class PrincipalCollector:
    """Beside the shared analyzer: each access with its shared stack distance and principals, in an
    AccessWindow of the last `window` accesses (None: the whole stream), until `streams` reads the
    principals off them."""

    def __init__(
        self, levels: Sequence[str], top: int = DEFAULT_TOP_PRINCIPALS, window: int | None = None
    ) -> None:
        unknown = [lv for lv in levels if lv not in PRINCIPAL_LEVELS]
        if unknown:
            raise ValueError(
                f"unknown principal level {unknown[0]!r}; expected {', '.join(PRINCIPAL_LEVELS)}"
            )
        if top < 1:
            raise ValueError(f"the top principals must be at least 1, got {top}")
        if window is not None and window < 1:
            raise ValueError(f"the principals' window must be at least 1 access, got {window}")
        self.levels = tuple(dict.fromkeys(levels))
        self.top = int(top)
        self.window_capacity = window
        self.window: AccessWindow | None = None  # made with the first batch (the analyzer's horizon)
        self._columns = [PRINCIPAL_LEVELS.index(lv) for lv in self.levels]
        self._names: PrincipalNames | None = None

    def feed(self, analyzer: Analyzer, batch: AccessBatch) -> None:
        """Feed the batch to the shared analyzer, keeping its accesses' distances."""
        distances = analyzer.feed_batch(batch, return_distances=True)
        assert distances is not None
        if self.window is None:
            self.window = AccessWindow(len(self.levels), self.window_capacity, analyzer.horizon)
        if batch.principal_names is not None:
            self._names = batch.principal_names
        n, starts, stamps = len(batch), _turns(batch), batch.timestamps
        # the pool replay's eviction ages and turn gaps read each request's time (its first
        # access's; nan where the stream gave none)
        if stamps is None or np.ndim(stamps) == 0:
            at = np.full(len(starts), np.nan if stamps is None else float(stamps))
        else:
            at = np.asarray(stamps, dtype=np.float64)[starts]
        # kept in the analyzer's order: the isolated analyzers and the pool replay read it as it is
        perm = reverse_within_requests(starts, n) if analyzer.order == "reverse" else slice(None)
        tokens = batch.tokens if batch.tokens is not None else np.full(n, analyzer.units.block_size)
        self.window.add(
            np.asarray(batch.keys, dtype=np.uint64)[perm],
            np.asarray(tokens)[perm],
            distances[perm],
            _principal_ids(batch)[:, self._columns][perm],
            starts,  # a request keeps its span under the permutation
            at,
        )

    def pool_trace(self) -> PoolTrace | None:
        """The window for the pool replay, in the analyzer's order; None before any access. Its
        blocks are numbered densely by the window's keys sorted once (8 bytes an access while it is
        made), each chunk's accesses looked up in the sorted keys."""
        w = self.window
        if w is None or not len(w):
            return None
        parts = w.parts()
        keys = np.concatenate([p["keys"] for p in parts])
        keys.sort()
        distinct = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
        del keys
        step = np.int32 if len(distinct) < 2**31 and len(w) < 2**31 else np.int64
        blocks = np.empty(len(w), dtype=step)
        at = 0
        for p in parts:  # each chunk's keys looked up in their own order: the search walks forward
            order = np.argsort(p["keys"])
            blocks[at + order] = np.searchsorted(distinct, p["keys"][order])
            at += len(order)
        starts, times = w.requests()
        ids = np.concatenate([p["principals"] for p in parts])
        return PoolTrace(blocks, len(distinct), ids, starts, times, self.levels)

    def streams(self, analyzer: Analyzer) -> dict[str, tuple[PrincipalStream, ...]]:
        """By level, the top principals by accesses (most first, ties by name) and "other" last.
        Read chunk by chunk off the window: no copy of it."""
        w = self.window
        if w is None or not len(w):
            return {level: () for level in self.levels}
        parts, span, names = w.parts(), w.span(), self._names
        out: dict[str, tuple[PrincipalStream, ...]] = {}
        for place, level in enumerate(self.levels):
            columns = [p["principals"][:, place] for p in parts]
            counts = _counts(columns)
            present = np.flatnonzero(counts)
            top = _top(counts, present, self.top, names)
            # each access's place among the top (len(top): other), 2 bytes an access while read
            lookup = np.full(len(counts), len(top), dtype=np.int16 if len(top) < 2**15 else np.int32)
            lookup[[p for p, _ in top]] = np.arange(len(top))
            slots = [lookup[c] for c in columns]
            rows = []
            for place_in_top, (principal, name) in enumerate(top):
                keep = [s == place_in_top for s in slots]
                row = _alone(level, name, principal, keep, parts, span, analyzer)
                if names is not None and principal == names.past_cap_id:
                    row = dataclasses.replace(row, past_names_cap=names.cap)
                rows.append(row)
            rest = [s == len(top) for s in slots]
            n_rest = sum(int(m.sum()) for m in rest)
            if n_rest:
                shared = distance_curve(_curves(parts), rest, analyzer.horizon)
                members = len(present) - len(top)
                other = PrincipalStream(level, OTHER_PRINCIPALS, n_rest, shared, None, members, span=span)
                rows.append(other)
            out[level] = tuple(rows)
        return out


def _top(
    counts: np.ndarray, present: np.ndarray, k: int, names: PrincipalNames | None
) -> list[tuple[int, str]]:
    """The k principals with the most accesses, ties by name, as (id, name): only those at or above
    the k-th count are named (a million sessions are not sorted by name to find twenty). Those
    named past the names' cap come after them, if they are not among them."""

    def name(p: int) -> str:
        return UNKNOWN_PRINCIPAL if names is None else names.name(p)

    c = counts[present]
    kth = np.partition(c, len(c) - k)[len(c) - k] if len(c) > k else 0
    above = sorted((-int(counts[p]), name(int(p)), int(p)) for p in present[c > kth])
    tied = heapq.nsmallest(k - len(above), ((name(int(p)), int(p)) for p in present[c == kth]))
    top = [(p, n) for _, n, p in above] + [(p, n) for n, p in tied]
    # the names past the table's cap are reported on their own, never hidden in (other)
    past = None if names is None else names.past_cap_id
    if past is not None and past < len(counts) and counts[past] and all(p != past for p, _ in top):
        top.append((past, name(past)))
    return top


def _counts(columns: list[np.ndarray]) -> np.ndarray:
    """Accesses per principal id, summed chunk by chunk."""
    total = np.zeros(0, dtype=np.int64)
    for c in columns:
        part = np.bincount(c)
        if len(part) > len(total):
            total = np.concatenate([total, np.zeros(len(part) - len(total), dtype=np.int64)])
        total[: len(part)] += part
    return total


def _curves(parts: list[dict[str, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(p["distances"], p["tokens"]) for p in parts]


def _alone(
    level: str,
    name: str,
    principal: int,
    keep: list[np.ndarray],
    parts: list[dict[str, np.ndarray]],
    span: WindowSpan,
    analyzer: Analyzer,
) -> PrincipalStream:
    """One principal: its accesses' curve in the shared cache, and an analyzer of them alone (fed in
    the order they were kept, the shared analyzer's, chunk by chunk)."""
    shared = distance_curve(_curves(parts), keep, analyzer.horizon)
    alone = Analyzer(analyzer.horizon, "forward", units=analyzer.units)
    for p, m in zip(parts, keep, strict=True):
        if m.any():
            alone.feed(p["keys"][m], tokens=p["tokens"][m], timestamps=0.0)
    return PrincipalStream(
        level, name, shared.accesses, shared, _steps(alone.curve()), principal_id=principal, span=span
    )


def _steps(curve: HitRateCurve) -> HitRateCurve:
    """An exact curve held only where its hits change (a step curve), in the narrowest columns: a
    read's curves stand until the next, and a big principal's alone is one entry per block of its
    depth otherwise."""
    change = np.flatnonzero(np.diff(curve.block_hits, prepend=0) | np.diff(curve.token_hits, prepend=0))
    return dataclasses.replace(
        curve,
        capacities=curve.capacities[change].astype(_width(curve.horizon)),
        block_hits=curve.block_hits[change].astype(_width(curve.accesses)),
        token_hits=curve.token_hits[change].astype(_width(curve.tokens)),
    )


def _turns(batch: AccessBatch) -> np.ndarray:
    """Where the batch's requests begin; a batch that marks none is one request."""
    if batch.request_starts is not None and len(batch.request_starts):
        return np.asarray(batch.request_starts, dtype=np.int64)
    return np.zeros(1, dtype=np.int64)


def _principal_ids(batch: AccessBatch) -> np.ndarray:
    if batch.principals is None:
        return np.zeros((len(batch), len(PRINCIPAL_LEVELS)), dtype=np.int32)
    return np.asarray(batch.principals, dtype=np.int32)


class LivePrincipals:
    """The live monitor's principals: the collector, read into streams at most every `every` seconds
    of the monitor's clock (each read re-feeds every top principal's isolated analyzer with its
    window and replays the pool over it, so a read per snapshot would cost the window's length each
    time), and once more when the stream has ended."""

    def __init__(self, collector: PrincipalCollector, every: float = 10.0) -> None:
        self.collector = collector
        self.every = float(every)
        self._read_at: float | None = None
        self._stale = True
        self._streams: dict[str, tuple[PrincipalStream, ...]] = {}
        self._trace: PoolTrace | None = None

    def feed(self, analyzer: Analyzer, batch: AccessBatch) -> None:
        self.collector.feed(analyzer, batch)
        self._stale = True

    def read(
        self, analyzer: Analyzer, now: float, final: bool = False
    ) -> tuple[dict[str, tuple[PrincipalStream, ...]], PoolTrace | None]:
        due = self._read_at is None or final or now - self._read_at >= self.every
        if self._stale and due:
            self._streams, self._trace = {}, None  # the last read's memory is let go first
            self._streams = self.collector.streams(analyzer)
            self._trace = self.collector.pool_trace()
            self._read_at, self._stale = now, False
        return self._streams, self._trace
