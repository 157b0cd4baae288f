"""The engine model's figures over the whole stream: the block-pool replay's distances, summed.

Each EngineModelDelta a source hands over (kvset.engine_model.replay) gives, for every query block of
the requests that finished, the pool size from which it was a hit. Summed into exact histograms of
tokens by distance, they give the model's token hit rate at any pool size, and why the misses there
were misses. Fed in the pipeline thread, read by the snapshot builder.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from kvset.engine_model.records import CAUSE_BEYOND_HORIZON, CAUSE_FIRST_TIME, CAUSE_RECOMPUTED, MODEL_HORIZON
from kvset.types import PRINCIPAL_LEVELS, EngineModelDelta, PrincipalNames

MODEL_NAME = "vLLM block-pool replay"
MAX_DISTANCE = 1 << 24  # distances above this count as no hit at any pool size kvset reports


@dataclass(frozen=True)
class ModelAt:
    """The model at one pool size: token hits, the query tokens, and where the rest went."""

    capacity_blocks: int
    hit_tokens: int
    query_tokens: float  # prompt tokens of the requests counted, partial last blocks included
    # shares of the query tokens, summing to 1 with the hit rate
    first_time: float
    capacity: float  # a larger pool would have hit (the LRU part)
    pinned: float  # would have hit if running requests held no blocks
    partial_tail: float  # past a prompt's last full block: never cached
    recomputed: float  # the last block of a fully cached prompt, computed again (vLLM's rule)
    beyond_horizon: float

    @property
    def hit_rate(self) -> float | None:
        return self.hit_tokens / self.query_tokens if self.query_tokens else None

    def breakdown(self) -> dict[str, float]:
        return {
            "hit": self.hit_rate or 0.0,
            "first_time": self.first_time,
            "capacity": self.capacity,
            "pinned": self.pinned,
            "partial_tail": self.partial_tail,
            "recomputed_last_block": self.recomputed,
            "beyond_horizon": self.beyond_horizon,
        }


class EngineModel:
    """Summed EngineModelDeltas of every source (see the module docstring)."""

    def __init__(self, by_principal: bool = False) -> None:
        """by_principal (--by): keep each query block's principals, for principal_hit_rate."""
        self.by_principal = by_principal
        self._total = np.zeros(1024, dtype=np.int64)  # tokens by distance
        self._unpinned = np.zeros(1024, dtype=np.int64)
        self.infinite_tokens: Counter[int] = Counter()  # by cause
        self.finite_tokens = 0
        self.requests = 0
        self.partial_tail_tokens = 0.0
        self._counts: dict[int, tuple[tuple[str, int], ...]] = {}  # cumulative, by source
        self._state: dict[int, tuple[tuple[str, int], ...]] = {}
        self.updates = 0
        self.name = MODEL_NAME  # the policy replayed, as the last delta names it
        # --by off KV events: the finite query blocks with their principals (kept whole, like the
        # principals' collector: kvset.core.principals), and each principal's query tokens
        self._named: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (distance, tokens, ids)
        self._named_query: dict[tuple[int, int], float] = {}  # (level index, id) -> query tokens
        self.principal_names: PrincipalNames | None = None
        self.reach_blocks = MODEL_HORIZON  # a pool larger than the replays' horizon is modelled short

    def add(self, source: int, delta: EngineModelDelta) -> None:
        self.updates += 1
        if delta.model:
            self.name = delta.model
        self._counts[source] = delta.counts
        self._state[source] = delta.state
        self.requests += delta.requests
        self.partial_tail_tokens += delta.partial_tail_tokens
        tokens = np.asarray(delta.tokens, dtype=np.int64)
        finite = (delta.cause == 0) & (delta.distance <= MAX_DISTANCE)
        if self.by_principal and delta.principals is not None and delta.request_principals is not None:
            self._add_named(delta, tokens, finite)
        if not len(delta.tokens):
            return
        for cause in np.unique(delta.cause[~finite]).tolist():
            self.infinite_tokens[int(cause)] += int(tokens[~finite & (delta.cause == cause)].sum())
        d, du, t = delta.distance[finite], delta.distance_unpinned[finite], tokens[finite]
        self.finite_tokens += int(t.sum())
        self._total = _accumulate(self._total, d, t)
        self._unpinned = _accumulate(self._unpinned, du, t)

    def _add_named(self, delta: EngineModelDelta, tokens: np.ndarray, finite: np.ndarray) -> None:
        self.principal_names = delta.principal_names
        ids = np.asarray(delta.principals, dtype=np.int32)
        self._named.append((np.asarray(delta.distance)[finite], tokens[finite], ids[finite]))
        tail = delta.partial_tail_tokens / max(1, delta.requests)  # per request
        requests = np.asarray(delta.request_principals, dtype=np.int32)
        for level in range(ids.shape[1]):
            named = self._named_query
            for principal, query in zip(*_sums(ids[:, level], tokens), strict=True):
                named[(level, principal)] = named.get((level, principal), 0.0) + query
            for principal, n in zip(*np.unique(requests[:, level], return_counts=True), strict=True):
                key = (level, int(principal))
                named[key] = named.get(key, 0.0) + tail * int(n)

    def principal_query_tokens(self, level: str, principal: int) -> float:
        """One principal's query tokens in the model (partial last blocks included)."""
        return self._named_query.get((PRINCIPAL_LEVELS.index(level), principal), 0.0)

    def principal_hit_rate(self, level: str, principal: int, capacity: int) -> float | None:
        """The model's token hit rate at a pool of `capacity` blocks for one principal's requests
        (None: the stream named no principal, or it has no query tokens)."""
        index = PRINCIPAL_LEVELS.index(level)
        query = self.principal_query_tokens(level, principal)
        if not self._named or query <= 0:
            return None
        hits = sum(int(t[(ids[:, index] == principal) & (d <= capacity)].sum()) for d, t, ids in self._named)
        return hits / query

    @property
    def query_tokens(self) -> float:
        return self.finite_tokens + sum(self.infinite_tokens.values()) + self.partial_tail_tokens

    @property
    def counts(self) -> dict[str, int]:
        """The grouping's and the dedupe's counters, summed over the sources."""
        return _summed(self._counts.values())

    @property
    def state(self) -> dict[str, int]:
        """The model's pinned, queued and running blocks now, summed over the sources."""
        state = _summed(self._state.values())
        lags = [dict(s).get("finish_lag", 0) for s in self._state.values()]
        if lags:
            state["finish_lag"] = max(lags)
        return state

    def hit_tokens(self, capacity: int) -> int:
        return int(self._total[: max(0, capacity) + 1].sum())

    def at(self, capacity: int) -> ModelAt:
        q = self.query_tokens
        hits = self.hit_tokens(capacity)
        missed_total = self.finite_tokens - hits
        missed_unpinned = self.finite_tokens - int(self._unpinned[: max(0, capacity) + 1].sum())

        def share(x: float) -> float:
            return x / q if q else 0.0

        return ModelAt(
            capacity_blocks=capacity,
            hit_tokens=hits,
            query_tokens=q,
            first_time=share(self.infinite_tokens[CAUSE_FIRST_TIME]),
            capacity=share(missed_unpinned),
            pinned=share(missed_total - missed_unpinned),
            partial_tail=share(self.partial_tail_tokens),
            recomputed=share(self.infinite_tokens[CAUSE_RECOMPUTED]),
            beyond_horizon=share(self.infinite_tokens[CAUSE_BEYOND_HORIZON]),
        )


def _summed(parts: Iterable[tuple[tuple[str, int], ...]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for part in parts:
        total.update(dict(part))
    return dict(total)


def _sums(ids: np.ndarray, tokens: np.ndarray) -> tuple[list[int], list[float]]:
    present, where = np.unique(ids, return_inverse=True)
    return present.tolist(), np.bincount(where, weights=tokens, minlength=len(present)).tolist()


def _accumulate(hist: np.ndarray, distances: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    if not len(distances):
        return hist
    top = int(distances.max())
    if top >= len(hist):
        grown = np.zeros(max(top + 1, 2 * len(hist)), dtype=np.int64)
        grown[: len(hist)] = hist
        hist = grown
    hist += np.bincount(distances, weights=tokens, minlength=len(hist)).astype(np.int64)
    return hist
