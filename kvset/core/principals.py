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
collected is not yet bounded: the whole stream's batches, times and distances are kept until the
end (as Belady MIN's replay keeps its keys). The same stream, in the analyzer's order, is what the
pool replay reads (kvset.core.pool_replay: who holds the cache, who displaces whom).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kvset.core.analyzer import Analyzer
from kvset.core.curve import HitRateCurve
from kvset.core.feed_args import reverse_within_requests
from kvset.core.pool_replay import PoolTrace
from kvset.types import (
    DEFAULT_TOP_PRINCIPALS,
    OTHER_PRINCIPALS,
    PRINCIPAL_LEVELS,
    UNKNOWN_PRINCIPAL,
    AccessBatch,
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
    """Beside the shared analyzer: each batch and its accesses' shared stack distances, until
    `streams` reads the principals off them."""

    def __init__(self, levels: Sequence[str], top: int = DEFAULT_TOP_PRINCIPALS) -> None:
        unknown = [lv for lv in levels if lv not in PRINCIPAL_LEVELS]
        if unknown:
            raise ValueError(
                f"unknown principal level {unknown[0]!r}; expected {', '.join(PRINCIPAL_LEVELS)}"
            )
        if top < 1:
            raise ValueError(f"the top principals must be at least 1, got {top}")
        self.levels = tuple(dict.fromkeys(levels))
        self.top = int(top)
        self._batches: list[AccessBatch] = []
        self._distances: list[np.ndarray] = []
        self._times: list[np.ndarray] = []

    def feed(self, analyzer: Analyzer, batch: AccessBatch) -> None:
        """Feed the batch to the shared analyzer, keeping its accesses' distances."""
        distances = analyzer.feed_batch(batch, return_distances=True)
        assert distances is not None
        # the isolated curves are of all time: the batches are kept without their times; the pool
        # replay's eviction ages and turn gaps read each request's time (its first access's), 8
        # bytes a request (nan where the stream gave none)
        self._batches.append(dataclasses.replace(batch, timestamps=0.0))
        self._distances.append(distances)
        starts, stamps = _turns(batch), batch.timestamps
        if stamps is None or np.ndim(stamps) == 0:
            at = np.full(len(starts), np.nan if stamps is None else float(stamps))
        else:
            at = np.asarray(stamps, dtype=np.float64)[starts]
        self._times.append(at)

    def pool_trace(self, order: str) -> PoolTrace | None:
        """The whole stream for the pool replay, in the analyzer's order (`reverse`: each request's
        blocks last to first); None before any access. Filled batch by batch into arrays made once:
        it is built beside the kept batches, at the analysis' peak of memory."""
        if not self._batches:
            return None
        n = sum(len(b) for b in self._batches)
        keys = np.empty(n, dtype=np.uint64)
        ids = np.empty((n, len(PRINCIPAL_LEVELS)), dtype=np.int32)
        starts, offset = [], 0
        for b in self._batches:
            size, begins = len(b), _turns(b)
            at = slice(offset, offset + size)
            perm = reverse_within_requests(begins, size) if order == "reverse" else slice(None)
            keys[at] = np.asarray(b.keys, dtype=np.uint64)[perm]
            ids[at] = _principal_ids(b)[perm]
            starts.append(begins + offset)  # a request keeps its span under the permutation
            offset += size
        return PoolTrace.of(keys, ids, np.concatenate(self._times), np.concatenate(starts))

    def streams(self, analyzer: Analyzer) -> dict[str, tuple[PrincipalStream, ...]]:
        """By level, the top principals by accesses (most first, ties by name) and "other" last."""
        if not self._batches:
            return {level: () for level in self.levels}
        block = analyzer.units.block_size
        distances = np.concatenate(self._distances)
        tokens = np.concatenate(
            [b.tokens if b.tokens is not None else np.full(len(b), block) for b in self._batches]
        )
        names = next((b.principal_names for b in self._batches if b.principal_names is not None), None)
        ids = np.concatenate([_principal_ids(b) for b in self._batches])
        out: dict[str, tuple[PrincipalStream, ...]] = {}
        for level in self.levels:
            column = ids[:, PRINCIPAL_LEVELS.index(level)]
            counts = np.bincount(column)
            present = np.flatnonzero(counts)
            label = [UNKNOWN_PRINCIPAL if names is None else names.name(int(p)) for p in present]
            ranked = sorted(range(len(present)), key=lambda i: (-int(counts[present[i]]), label[i]))
            top = ranked[: self.top]
            rows = [
                self._alone(
                    level, label[i], int(present[i]), column == present[i], distances, tokens, analyzer
                )
                for i in top
            ]
            rest = ~np.isin(column, present[top])
            if rest.any():
                shared = distance_curve(distances[rest], tokens[rest], analyzer.horizon)
                members = len(present) - len(top)
                rows.append(PrincipalStream(level, OTHER_PRINCIPALS, int(rest.sum()), shared, None, members))
            out[level] = tuple(rows)
        return out

    def _alone(
        self,
        level: str,
        name: str,
        principal: int,
        keep: np.ndarray,
        distances: np.ndarray,
        tokens: np.ndarray,
        analyzer: Analyzer,
    ) -> PrincipalStream:
        """One principal: its accesses' curve in the shared cache, and an analyzer of them alone."""
        shared = distance_curve(distances[keep], tokens[keep], analyzer.horizon)
        alone = Analyzer(analyzer.horizon, analyzer.order, units=analyzer.units)
        offset = 0
        for b in self._batches:
            part = keep[offset : offset + len(b)]
            offset += len(b)
            if part.any():
                alone.feed_batch(b.subset(part))
        return PrincipalStream(level, name, int(keep.sum()), shared, alone.curve(), principal_id=principal)


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
    whole history, so a read per snapshot would cost the stream's length each time), and once more
    when the stream has ended."""

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
            self._trace = self.collector.pool_trace(analyzer.order)
            self._read_at, self._stale = now, False
        return self._streams, self._trace
