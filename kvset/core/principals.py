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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kvset.core.analyzer import Analyzer
from kvset.core.curve import HitRateCurve
from kvset.core.feed_args import reverse_within_requests
from kvset.core.pool_replay import PoolTrace
from kvset.core.principals_window import AccessWindow, WindowColumns, WindowSpan
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


def distance_curve(distances: np.ndarray, tokens: np.ndarray, horizon: int) -> HitRateCurve:
    """The exact curve of accesses with these stack distances (0: first time, -1: beyond the
    horizon) and tokens. It steps only at the distances there are, so it is held at those alone: a
    principal with a few accesses far down a deep shared stack costs a few entries, not the depth."""
    d = np.asarray(distances, dtype=np.int64)
    tok = np.asarray(tokens, dtype=np.int64)
    hit = d > 0
    steps, where = np.unique(d[hit], return_inverse=True)
    blocks = np.bincount(where, minlength=len(steps))
    tokens_at = np.bincount(where, weights=tok[hit], minlength=len(steps)).astype(np.int64)
    beyond = d < 0
    return HitRateCurve(
        capacities=steps.astype(np.int64),
        block_hits=np.cumsum(blocks),
        token_hits=np.cumsum(tokens_at),
        accesses=len(d),
        tokens=int(tok.sum()),
        horizon=horizon,
        exact=True,
        beyond_horizon_blocks=int(beyond.sum()),
        beyond_horizon_tokens=int(tok[beyond].sum()),
    )


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
        self.window: AccessWindow | None = None  # made with the first batch: its distances' type
        self._columns = [PRINCIPAL_LEVELS.index(lv) for lv in self.levels]
        self._names: PrincipalNames | None = None
        self._read: WindowColumns | None = None  # the last read, until the next batch

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
        self._read = None

    def _window(self) -> WindowColumns | None:
        if self.window is None or not len(self.window):
            return None
        if self._read is None:
            self._read = self.window.columns()
        return self._read

    def pool_trace(self) -> PoolTrace | None:
        """The window for the pool replay, in the analyzer's order; None before any access. Read
        after `streams`: the window's copy they shared is let go."""
        w, self._read = self._window(), None
        if w is None:
            return None
        ids = np.zeros((len(w.keys), len(PRINCIPAL_LEVELS)), dtype=np.int32)
        ids[:, self._columns] = w.principals
        return PoolTrace.of(w.keys, ids, w.request_times, w.request_starts)

    def streams(self, analyzer: Analyzer) -> dict[str, tuple[PrincipalStream, ...]]:
        """By level, the top principals by accesses (most first, ties by name) and "other" last."""
        w = self._window()
        if w is None:
            return {level: () for level in self.levels}
        names = self._names
        out: dict[str, tuple[PrincipalStream, ...]] = {}
        for place, level in enumerate(self.levels):
            column = w.principals[:, place]
            counts = np.bincount(column)
            present = np.flatnonzero(counts)
            label = [UNKNOWN_PRINCIPAL if names is None else names.name(int(p)) for p in present]
            ranked = sorted(range(len(present)), key=lambda i: (-int(counts[present[i]]), label[i]))
            top = ranked[: self.top]
            rows = [_alone(level, label[i], int(present[i]), column == present[i], w, analyzer) for i in top]
            rest = ~np.isin(column, present[top])
            if rest.any():
                shared = distance_curve(w.distances[rest], w.tokens[rest], analyzer.horizon)
                members = len(present) - len(top)
                rows.append(
                    PrincipalStream(
                        level, OTHER_PRINCIPALS, int(rest.sum()), shared, None, members, span=w.span
                    )
                )
            out[level] = tuple(rows)
        return out


def _alone(
    level: str, name: str, principal: int, keep: np.ndarray, w: WindowColumns, analyzer: Analyzer
) -> PrincipalStream:
    """One principal: its accesses' curve in the shared cache, and an analyzer of them alone (fed in
    the order they were kept: the shared analyzer's)."""
    shared = distance_curve(w.distances[keep], w.tokens[keep], analyzer.horizon)
    alone = Analyzer(analyzer.horizon, "forward", units=analyzer.units)
    alone.feed(w.keys[keep], tokens=w.tokens[keep], timestamps=0.0)
    return PrincipalStream(
        level, name, int(keep.sum()), shared, alone.curve(), principal_id=principal, span=w.span
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
            self._streams = self.collector.streams(analyzer)
            self._trace = self.collector.pool_trace()
            self._read_at, self._stale = now, False
        return self._streams, self._trace
