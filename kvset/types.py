"""Contract types: the values every floor hands the next one up.

Sources yield `SourceUpdate`s holding block accesses (`AccessBatch`), their own health
(`SourceHealth`), the engine's operating point (`EngineReading`) and timeline events. The file
formats and the demo workload produce `AccessBatch`es too; the analyzer consumes them. A source
says the units of its stream (kvset.units.StreamUnits) in an update, once it knows them. Nothing
here imports anything of kvset but the units, the rejection counter's value type and the text escaper.

Every text field of these types can quote input (a log line, a /metrics label, a KV-event string,
an exception's message about a file), so it is passed through kvset.text.printable when the value
is built: no view can receive a raw control character, whichever view it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvset.rejects import Rejection
from kvset.text import printable
from kvset.units import EnginePool, StreamUnits

# The contract types are read by the command line's option declarations too (`--help`): numpy is
# loaded by the two methods that compute, not by the types.
if TYPE_CHECKING:
    import numpy as np


def _escape_fields(value: object, *names: str) -> None:
    """Escape the named text fields of a frozen dataclass in place (from its __post_init__)."""
    for name in names:
        object.__setattr__(value, name, printable(getattr(value, name)))


# The levels a stream may attribute its accesses to, and the trace JSONL field each is read from.
PRINCIPAL_LEVELS: tuple[str, ...] = ("tenant", "session", "adapter")
PRINCIPAL_FIELDS: dict[str, str] = {"tenant": "tenant", "session": "session", "adapter": "lora"}
UNKNOWN_PRINCIPAL = "(unknown)"  # id 0 at every level: an access whose stream did not say
OTHER_PRINCIPALS = "(other)"  # the principals past the top K, summed
DEFAULT_TOP_PRINCIPALS = 20  # principals reported one by one (--top-principals)


# Names a stream holds (about 200 bytes each: 200 MB at the cap). A stream that names more (a new
# session id per request, for months) would grow without end: names first seen once the table is
# full share one principal, PAST_NAME_CAP, reported one by one like the top principals.
PRINCIPAL_NAMES_CAP = 1 << 20
PAST_NAME_CAP = "(past the name cap)"


class PrincipalNames:
    """Names of principals, each given a small id once (0: unknown), shared by the batches of one
    stream, so a batch carries ints per access and the names are held once. At most `cap` names
    are held; later ones all get the id of PAST_NAME_CAP, and `past_cap` counts those lookups."""

    def __init__(self, cap: int = PRINCIPAL_NAMES_CAP) -> None:
        if cap < 1:
            raise ValueError(f"the names' cap must be at least 1, got {cap}")
        self.names: list[str] = [UNKNOWN_PRINCIPAL]
        self._ids: dict[str, int] = {}
        self.cap = cap
        self.past_cap = 0  # lookups of names not held because the table was full
        self.past_cap_id: int | None = None  # PAST_NAME_CAP's id, once a name came past the cap

    def id(self, name: str | None) -> int:
        if name is None:
            return 0
        found = self._ids.get(name)
        if found is None:
            if len(self._ids) >= self.cap:
                self.past_cap += 1
                if self.past_cap_id is None:
                    self.past_cap_id = len(self.names)
                    self.names.append(PAST_NAME_CAP)
                return self.past_cap_id
            found = self._ids[name] = len(self.names)
            self.names.append(name)
        return found

    def name(self, principal: int) -> str:
        return self.names[principal]

    @property
    def held(self) -> int:
        """The names held (unknown and PAST_NAME_CAP not counted); not __len__, so that an empty
        table is still a table where it is tested for truth."""
        return len(self._ids)


# SGLang's --radix-eviction-policy values its engine model replays (the first is SGLang's default):
# kvset.engine_model.radix_cache
RADIX_EVICTION_POLICIES = ("lru", "lfu")


@dataclass(frozen=True, eq=False)
class AccessBatch:
    """Block accesses in order. keys: uint64, one access each.

    tokens: tokens each access covers (None: a whole block of the stream each);
    request_starts: indices into keys where a request begins (None: one request per batch
    is not assumed; the batch is a plain access stream);
    timestamps: seconds (one float for the batch, or one per access; None: wall time on arrival);
    rank: the data-parallel rank whose own cache saw each access (one int for the batch, or one per
    access; None: the stream has no ranks). Engines with several ranks publish each rank's events
    separately; the monitor analyzes each rank beside the merged stream.
    block_size: tokens per block of these accesses, where the source knows it batch by batch (None:
    the stream's, as its source declared them); a batch whose block size is not the stream's is
    refused by the monitor, never mixed in.
    """

    keys: np.ndarray
    tokens: np.ndarray | None = None
    request_starts: np.ndarray | None = None
    timestamps: np.ndarray | float | None = None
    block_size: int | None = None
    rank: np.ndarray | int | None = None
    # int32 (accesses, len(PRINCIPAL_LEVELS)): each access's principal id at each level, ids of
    # `principal_names` (None: the stream names no principal; every access is unknown)
    principals: np.ndarray | None = None
    principal_names: PrincipalNames | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def by_rank(self) -> list[tuple[int, AccessBatch]]:
        """Each rank's accesses, in their order, by rank (an empty list when the batch has no ranks)."""
        if self.rank is None:
            return []
        import numpy as np

        if np.ndim(self.rank) == 0:
            return [(int(self.rank), self)]
        ranks = np.asarray(self.rank)
        return [(int(r), self.subset(ranks == r)) for r in np.unique(ranks)]

    def subset(self, keep: np.ndarray) -> AccessBatch:
        """The accesses where `keep` is true, in order; a request whose first access is dropped starts
        at its next kept one, a request with no access left is gone."""
        import numpy as np

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
            block_size=self.block_size,
            rank=part(self.rank),
            principals=part(self.principals),
            principal_names=self.principal_names,
        )


@dataclass(frozen=True)
class EngineReading:
    """What the engine itself says: its operating point and its own cache counters.

    pools: the engine's KV block pools as it counts them, one per engine or data-parallel rank
    (None: this reading does not say), kept in the engine's own blocks until a figure needs them
    in the stream's (`pool_blocks`, `rank_pool_blocks`); block_size: the engine's tokens per block
    where the reading knows it without a pool (the KV events)."""

    at: float  # wall time of the reading
    pools: tuple[EnginePool, ...] | None = None
    block_size: int | None = None
    token_hit_rate: float | None = None  # the engine's measured prefix-cache hit rate (tokens)
    hit_rate_window_s: float | None = None  # over what period the engine measured it
    kv_usage: float | None = None  # 0..1
    running_requests: int | None = None
    waiting_requests: int | None = None
    resident_blocks: int | None = None  # from BlockStored/BlockRemoved
    evictions_total: int | None = None
    restores_after_removal: int | None = None  # misses a larger cache would have hit
    # the engine's counters since kvset's first reading of them (or its restart): query tokens, hit
    # tokens, finished requests; what the KV events showed is measured against these
    queries_since_start: float | None = None
    hits_since_start: float | None = None
    requests_since_start: float | None = None
    # cached tokens since then by the tier that served them (SGLang's cache_source: device, host,
    # storage_*), beside queries_since_start; None when the engine does not say
    tier_hits_since_start: tuple[tuple[str, float], ...] | None = None
    # pages the KV events show resident per medium (GPU, CPU_PINNED, DISK, EXTERNAL: HiCache's tiers)
    # (None: one medium only)
    resident_by_medium: tuple[tuple[str, int], ...] | None = None
    stale: bool = False
    label: str = ""  # e.g. "vllm /metrics", "rank 1"

    def __post_init__(self) -> None:
        _escape_fields(self, "label")
        # names from the input (cache_source labels, KV-event media), shown as they came: escaped
        for name in ("tier_hits_since_start", "resident_by_medium"):
            named = getattr(self, name)
            if named is not None:
                object.__setattr__(self, name, tuple((printable(k), v) for k, v in named))
        if self.block_size is None and self.pools:
            sizes = {p.block_size for p in self.pools}
            if len(sizes) == 1:
                object.__setattr__(self, "block_size", sizes.pop())

    @property
    def capacity_blocks(self) -> int | None:
        """The engine's pools in its own blocks, summed (None: no pool known)."""
        return sum(p.num_gpu_blocks for p in self.pools) if self.pools else None

    @property
    def capacity_tokens(self) -> int | None:
        return sum(p.tokens for p in self.pools) if self.pools else None

    def pool_blocks(self, units: StreamUnits) -> int | None:
        """The whole pool as a cache of the stream's blocks (each pool converted on its own)."""
        return sum(p.in_stream_blocks(units) for p in self.pools) if self.pools else None

    def rank_pool_blocks(self, units: StreamUnits, ranks: list[int]) -> dict[int, int] | None:
        """Each data-parallel rank's own pool in the stream's blocks: the pool the engine labels with
        the rank's number, else the pools in order when there are as many as ranks. None when the
        pools cannot be told apart by rank (one pool for several ranks, or none)."""
        pools = self.pools or ()
        by_rank = {_rank_of(p.engine): p for p in pools}
        if ranks and None not in by_rank and len(by_rank) == len(pools) and all(r in by_rank for r in ranks):
            return {r: by_rank[r].in_stream_blocks(units) for r in ranks}
        if ranks and len(pools) == len(ranks):
            return {r: p.in_stream_blocks(units) for r, p in zip(sorted(ranks), pools, strict=True)}
        return None


def _rank_of(engine: str) -> int | None:
    """The data-parallel rank an engine label names: vLLM's `engine` label ("0", "1"), a log's
    process ("EngineCore_DP1"), SGLang's pool ("DP1"); None for a label that names none."""
    if engine.isdigit():
        return int(engine)
    m = re.search(r"DP\s*(\d+)", engine)
    return int(m.group(1)) if m else None


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
    # Hits not reported but read off the chains the stored blocks hang on: the curve is of all accesses,
    # reconstructed (requests that stored nothing are not in it).
    hits_reconstructed: bool = False
    # Where it reads (the endpoints, the path, the URL; "demo" for the demo): set by the monitor from
    # its source, a stable label where `source` carries the flags' wording.
    address: str = ""
    # Counts as numbers where `details` says them in words: batches_lost, sequence_gaps (KV events),
    # backlog_batches, backlog_accesses (waiting, not analysed yet).
    counts: tuple[tuple[str, int], ...] = ()
    # A down source that will try again: seconds from when this health was made to the next try
    # (0: due now). None: not retrying. Kept out of `state`, which a report that is ending
    # (`--once`) shows without a promise it will not keep.
    retry_in: float | None = None

    def status(self) -> str:
        """The state, with when a down source tries again: what a live screen or progress line shows."""
        if self.retry_in is None:
            return self.state
        if self.retry_in < 0.05:  # due: "retry in 0.0 s" would read as a wait
            return f"{self.state}, retrying now"
        when = f"{self.retry_in:.0f}" if self.retry_in >= 1 else f"{self.retry_in:.1f}"
        return f"{self.state}, retry in {when} s"

    def __post_init__(self) -> None:
        _escape_fields(self, "source", "kind", "state", "address")
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
    model: str = ""  # which engine's policy the distances replay ("": vLLM's block pool)
    # int32 (requests, len(PRINCIPAL_LEVELS)): each request's principal ids, its query blocks next to
    # each other in request order (None: the stream names no principal); ids of `principal_names`
    request_principals: np.ndarray | None = None
    principals: np.ndarray | None = None  # ... and each query block's (its request's)
    principal_names: PrincipalNames | None = None


@dataclass(frozen=True)
class KvCacheGroup:
    """One KV cache group of a hybrid model, as the engine's events say it (kind as vLLM names it:
    full_attention, sliding_window, mamba, ...); `counted`: the group whose accesses are the stream's."""

    group_idx: int
    kind: str | None
    sliding_window: int | None  # tokens
    block_size: int | None
    counted: bool = False


@dataclass(frozen=True)
class SourceUpdate:
    """units: the units of the source's stream, once the source knows them (on or before the update
    with its first accesses; a source that knows them from the start says so in `Source.units`)."""

    accesses: AccessBatch | None = None
    health: SourceHealth | None = None
    engine: EngineReading | None = None
    events: tuple[TimelineEvent, ...] = field(default_factory=tuple)
    engine_model: EngineModelDelta | None = None
    units: StreamUnits | None = None
    # a hybrid model's groups, and each one's own accesses (the counted group's are `accesses` again)
    kv_cache_groups: tuple[KvCacheGroup, ...] = ()
    group_accesses: tuple[tuple[int, AccessBatch], ...] = ()
