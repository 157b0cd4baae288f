"""Contract types: the values every floor hands the next one up.

Sources yield `SourceUpdate`s holding block accesses (`AccessBatch`), their own health
(`SourceHealth`), the engine's operating point (`EngineReading`) and timeline events. The file
formats and the demo workload produce `AccessBatch`es too; the analyzer consumes them. Nothing
here imports anything of kvset but the rejection counter's value type and the text escaper.

Every text field of these types can quote input (a log line, a /metrics label, a KV-event string,
an exception's message about a file), so it is passed through kvset.text.printable when the value
is built: no view can receive a raw control character, whichever view it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvset.rejects import Rejection
from kvset.text import printable


def _escape_fields(value: object, *names: str) -> None:
    """Escape the named text fields of a frozen dataclass in place (from its __post_init__)."""
    for name in names:
        object.__setattr__(value, name, printable(getattr(value, name)))


@dataclass(frozen=True, eq=False)
class AccessBatch:
    """Block accesses in order. keys: uint64, one access each.

    tokens: tokens each access covers (None: `block_tokens` each);
    request_starts: indices into keys where a request begins (None: one request per batch
    is not assumed; the batch is a plain access stream);
    timestamps: seconds (one float for the batch, or one per access; None: wall time on arrival);
    rank: the data-parallel rank whose own cache saw each access (one int for the batch, or one per
    access; None: the stream has no ranks). Engines with several ranks publish each rank's events
    separately; the monitor analyzes each rank beside the merged stream.
    """

    keys: np.ndarray
    tokens: np.ndarray | None = None
    request_starts: np.ndarray | None = None
    timestamps: np.ndarray | float | None = None
    block_tokens: int | None = None
    rank: np.ndarray | int | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def by_rank(self) -> list[tuple[int, AccessBatch]]:
        """Each rank's accesses, in their order, by rank (an empty list when the batch has no ranks)."""
        if self.rank is None:
            return []
        if np.ndim(self.rank) == 0:
            return [(int(self.rank), self)]
        ranks = np.asarray(self.rank)
        return [(int(r), self.subset(ranks == r)) for r in np.unique(ranks)]

    def subset(self, keep: np.ndarray) -> AccessBatch:
        """The accesses where `keep` is true, in order; a request whose first access is dropped starts
        at its next kept one, a request with no access left is gone."""
        keep = np.asarray(keep, dtype=bool)
        starts = None
        if self.request_starts is not None:
            begins = np.zeros(len(self.keys), dtype=bool)
            begins[np.asarray(self.request_starts, dtype=np.int64)] = True
            request_id = np.cumsum(begins) - 1  # -1: accesses before the first start, in no request
            kept_ids = request_id[keep]
            # the first kept access of each request begins it
            first = np.ones(len(kept_ids), dtype=bool)
            first[1:] = kept_ids[1:] != kept_ids[:-1]
            starts = np.flatnonzero(first & (kept_ids >= 0)).astype(np.int64)

        def part(values):
            if values is None or np.ndim(values) == 0:
                return values
            return np.asarray(values)[keep]

        return AccessBatch(
            keys=np.asarray(self.keys)[keep],
            tokens=part(self.tokens),
            request_starts=starts,
            timestamps=part(self.timestamps),
            block_tokens=self.block_tokens,
            rank=part(self.rank),
        )


@dataclass(frozen=True)
class EngineReading:
    """What the engine itself says: its operating point and its own cache counters."""

    at: float  # wall time of the reading
    capacity_blocks: int | None = None
    capacity_tokens: int | None = None
    block_size: int | None = None
    token_hit_rate: float | None = None  # the engine's measured prefix-cache hit rate (tokens)
    hit_rate_window_s: float | None = None  # over what period the engine measured it
    kv_usage: float | None = None  # 0..1
    running_requests: int | None = None
    waiting_requests: int | None = None
    resident_blocks: int | None = None  # from BlockStored/BlockRemoved
    evictions_total: int | None = None
    restores_after_removal: int | None = None  # misses a larger cache would have hit
    stale: bool = False
    label: str = ""  # e.g. "vllm /metrics", "rank 1"

    def __post_init__(self) -> None:
        _escape_fields(self, "label")

    def capacity_in_blocks(self, block_tokens: int | None) -> int | None:
        """The pool in blocks of `block_tokens` tokens (the analyzed stream's blocks, which need not
        be the engine's own: a Mooncake trace has 512 tokens a block, vLLM 16)."""
        tokens = self.capacity_tokens
        if not tokens and self.capacity_blocks and self.block_size:
            tokens = self.capacity_blocks * self.block_size
        if tokens and block_tokens:
            return int(tokens // block_tokens)
        return int(self.capacity_blocks) if self.capacity_blocks else None


@dataclass(frozen=True)
class TimelineEvent:
    at: float
    kind: str  # engine-reset | all-blocks-cleared | sequence-gap | log-rotated | log-truncated | phase | ...
    text: str

    def __post_init__(self) -> None:
        _escape_fields(self, "kind", "text")


@dataclass(frozen=True)
class SourceHealth:
    source: str  # human name, e.g. "events tcp://127.0.0.1:5557"
    kind: str  # demo | replay | events | log | metrics
    connected: bool
    state: str  # short status: "connected", "waiting for data", "down: connection refused", "finished"
    last_data_at: float | None = None  # wall time of the last data received
    received: int = 0  # messages, lines or polls received
    accesses: int = 0  # block accesses delivered so far
    rejected: tuple[Rejection, ...] = ()
    notes: tuple[str, ...] = ()  # what the user must know, e.g. "engine reports misses only"
    finished: bool = False
    details: tuple[tuple[str, str], ...] = ()  # extra key/value facts (per rank, gaps, ...)
    # Whether the accesses include the engine's cache hits: None when the question does not arise
    # (a trace, a log of prompts: every access is there); False while an engine's KV events show
    # only newly stored blocks (its misses), so the curve is not the engine's own.
    reports_hits: bool | None = None

    def __post_init__(self) -> None:
        _escape_fields(self, "source", "kind", "state")
        object.__setattr__(self, "notes", tuple(printable(n) for n in self.notes))
        object.__setattr__(self, "details", tuple((printable(k), printable(v)) for k, v in self.details))
        # Rejections escape themselves when built.

    @property
    def rejected_total(self) -> int:
        return sum(r.count for r in self.rejected)


@dataclass(frozen=True, eq=False)
class EngineModelDelta:
    """A model of the engine's own cache (kvset.engine_model.replay): for the query blocks of the
    requests finished since the last update, the pool size from which each was a hit.

    distance: int64 per query block: a hit in a pool of C blocks iff distance <= C (huge: no pool);
    distance_unpinned: the same if running requests held nothing (never above `distance`);
    cause: int8 per block, why the distance is infinite (kvset.engine_model.records.CAUSE_*; 0: finite);
    tokens: the tokens each block covers; requests, partial_tail_tokens: the requests counted and
    their estimated tokens past the last full block (never cached). counts: cumulative counters of
    the grouping and the dedupe, by name; state: the model's pinned, queued and running blocks now.
    """

    distance: np.ndarray
    distance_unpinned: np.ndarray
    cause: np.ndarray
    tokens: np.ndarray
    requests: int = 0
    partial_tail_tokens: float = 0.0
    time: float | None = None
    counts: tuple[tuple[str, int], ...] = ()
    state: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SourceUpdate:
    accesses: AccessBatch | None = None
    health: SourceHealth | None = None
    engine: EngineReading | None = None
    events: tuple[TimelineEvent, ...] = field(default_factory=tuple)
    engine_model: EngineModelDelta | None = None
