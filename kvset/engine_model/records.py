"""The records kvset.engine_model.replay keeps: hit reports waiting for their admission, open requests,
the counters of the grouping and the dedupe, and the engine model's output for the snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kvset.types import PRINCIPAL_LEVELS, EngineModelDelta, PrincipalNames

# The engine model's reach, in blocks: the free queue, the parent links, the forgotten blocks and the
# resident set keep this many at most. A pool cannot usefully be modelled beyond its own size, and
# 2^19 blocks (8 M tokens of 16-token blocks) is several times a single engine's pool; the model's
# state is then about 150 MiB at most.
MODEL_HORIZON = 1 << 19

INFINITE = np.int64(1) << np.int64(62)  # the distance of a block no pool holds

# One store of a request: (batch, keys, tokens, decode, recomputed).
Store = tuple[int, np.ndarray, np.ndarray, bool, bool]
# One finished request's query blocks: (distance, unpinned distance, cause, tokens, time of the finish).
ModelPart = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]
# why a query block has no finite distance (EngineModelDelta.cause)
CAUSE_NONE = 0
CAUSE_FIRST_TIME = 1  # never seen before (or the prefix up to it holds one)
CAUSE_BEYOND_HORIZON = 2  # seen, but forgotten beyond the model's horizon
CAUSE_RECOMPUTED = 3  # the engine recomputed a cached block: the last token of a fully cached prompt


class QueryParts(Protocol):
    """What a replayed request keeps of its lookups (vLLM's OpenRequest, SGLang's radix request)."""

    held: list[np.ndarray]
    dt: list[np.ndarray]
    dq: list[np.ndarray]
    cause: list[np.ndarray]
    qtokens: list[np.ndarray]
    prefix_dt: int
    prefix_dq: int
    prefix_cause: int


def add_query(
    request: QueryParts,
    keys: np.ndarray,
    dt: np.ndarray,
    dq: np.ndarray,
    cause: np.ndarray,
    tokens: np.ndarray,
) -> None:
    """Append one query of `keys` (their distances with and without pinned blocks, the cause of an
    infinite one, their query tokens). An engine's lookup is a longest prefix, in vLLM as in SGLang's
    radix tree: a block is a hit only with every block before it, so each figure is a running maximum
    from the request's first block on."""
    dt = np.maximum.accumulate(np.concatenate([[request.prefix_dt], dt]))[1:]
    dq = np.maximum.accumulate(np.concatenate([[request.prefix_dq], dq]))[1:]
    c = np.maximum.accumulate(np.concatenate([[request.prefix_cause], cause]))[1:]
    request.prefix_dt, request.prefix_dq, request.prefix_cause = int(dt[-1]), int(dq[-1]), int(c[-1])
    request.dt.append(dt)
    request.dq.append(dq)
    request.cause.append(c)
    request.qtokens.append(tokens)
    request.held.append(keys)


class FinishedOutputs:
    """What an engine model's replay hands out (vLLM's RequestReplay, SGLang's RadixReplay): the
    finished requests' accesses and their query blocks for the model, taken and emptied by the tracker,
    and the replay's state for the status line."""

    queue: Any  # its FreeQueue (kvset.engine_model.free_queue): pinned and queued blocks
    _running: dict[int, Any]  # its requests admitted and not yet finished
    finish_lag: int

    def _init_outputs(self) -> None:
        self._out_accesses: list[tuple[np.ndarray, np.ndarray, float]] = []
        self._out_blocks = 0
        self._out_model: list[ModelPart] = []
        self._out_model_keys: list[int] = []  # each part's request's last block (-1: none), for --by

    def _add_finished(self, keys: np.ndarray, tokens: np.ndarray, ts: float) -> None:
        self._out_accesses.append((keys, tokens, ts))
        self._out_blocks += len(keys)

    @property
    def finished_blocks(self) -> int:
        """Blocks of finished requests not yet taken."""
        return self._out_blocks

    def take_accesses(self) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """Finished requests since the last take: (keys in chain order, tokens, time of the finish)."""
        out, self._out_accesses, self._out_blocks = self._out_accesses, [], 0
        return out

    def _add_model(self, part: ModelPart, keys: np.ndarray) -> None:
        self._out_model.append(part)
        self._out_model_keys.append(int(keys[-1]) if len(keys) else -1)

    def take_model(self) -> list[ModelPart]:
        """Finished requests' query blocks since the last take: (distance, unpinned distance, cause,
        tokens, time of the finish) each."""
        return self.take_model_keyed()[0]

    def take_model_keyed(self) -> tuple[list[ModelPart], list[int]]:
        """take_model's parts, and the last block of each part's request (-1: it had none): what
        names the request's principals (kvset.engine.kv_event_principals)."""
        out, keys, self._out_model, self._out_model_keys = self._out_model, self._out_model_keys, [], []
        return out, keys

    def state(self) -> dict[str, int]:
        return {
            "pinned": self.queue.pinned,
            "queued": self.queue.queued,
            "running": len(self._running),
            "finish_lag": self.finish_lag,
        }


@dataclass
class Report:
    keys: np.ndarray
    tokens: np.ndarray
    batch: int
    count: int  # reports of this chain in that batch (requests with the same cached prefix)


@dataclass
class OpenRequest:
    id: int
    hit_keys: np.ndarray
    hit_tokens: np.ndarray
    parent: int | None  # the first store's parent when no report came (its unreported hit prefix)
    admitted: int  # batch index
    reported: int  # batch of its hit report (its lookup), or of its first store
    stores: list[Store] = field(default_factory=list)
    last_store: int = -1
    last_store_ts: float | None = None
    decode_from: int | None = None  # block index where its output starts
    released: bool = False
    finish_seen: int | None = None  # batch where a later request showed that it had finished
    output_keys: set[int] = field(default_factory=set)
    restores: int | None = None  # who stored its first computed block before it (a preempted self?)
    last_prompt: int | None = None  # its last prompt block
    # the replay's view
    held: list[np.ndarray] = field(default_factory=list)  # key arrays it pins, in chain order
    dt: list[np.ndarray] = field(default_factory=list)  # per query block: prefix-max distance
    dq: list[np.ndarray] = field(default_factory=list)  # ... ignoring pinned blocks
    cause: list[np.ndarray] = field(default_factory=list)
    qtokens: list[np.ndarray] = field(default_factory=list)
    prefix_dt: int = 0
    prefix_dq: int = 0
    prefix_cause: int = CAUSE_NONE
    queried: int = 0  # blocks the replay has seen
    # a hybrid model (kvset.engine_model.kv_groups): raw (distance, unpinned) per query call, the other
    # groups' the same by group, and the other groups' blocks it still holds, in chain order
    raw: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    twin_raw: dict[int, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    twin_held: dict[int, list[int]] = field(default_factory=dict)

    @property
    def blocks(self) -> int:
        return len(self.hit_keys) + sum(len(s[1]) for s in self.stores)

    def tail(self) -> int | None:
        if self.stores:
            return int(self.stores[-1][1][-1])
        if len(self.hit_keys):
            return int(self.hit_keys[-1])
        return None


@dataclass
class RequestCounts:
    """What the grouping and the dedupe saw (all counters)."""

    requests: int = 0  # finished requests handed out (readmissions included)
    reports: int = 0  # hit reports (lookups with hits)
    admitted: int = 0  # reports confirmed by an admission
    not_admitted: int = 0  # re-reported before admission: lookups of a request left waiting
    not_admitted_blocks: int = 0
    superseded: int = 0  # followed by a report of a nested chain: the waiting request looked up again
    admitted_without_store: int = 0  # neither confirmed nor superseded: admitted, stored nothing
    recovered: int = 0  # a store whose report had been taken for a re-report: confirmed after all
    without_report: int = 0  # requests whose first store came without a report (no cached prefix)
    unknown_prefix: int = 0  # ... whose first store chains onto blocks no report named: its hits are
    # unknown (the chain it hangs on is not known: stored before kvset listened); left out of the model
    reconstructed: int = 0  # ... whose cached prefix was read off the resident chain (no report came)
    reconstructed_blocks: int = 0
    readmissions: int = 0  # after a preemption: kept out of the query counts, as vLLM does
    readmission_tokens: int = 0
    decode_blocks: int = 0  # output blocks: stored, never queried
    recomputed_blocks: int = 0  # cached blocks the engine computed again (the last-token rule)
    finished_by_evidence: int = 0  # finishes seen in a later request's lookup or store
    finished_by_lag: int = 0


def merge_model(
    parts: list[ModelPart],
    partial_tail_per_request: float,
    counts: dict[str, int],
    state: dict[str, int],
    model: str = "",
    principals: list[np.ndarray] | None = None,
    names: PrincipalNames | None = None,
) -> EngineModelDelta:
    """One EngineModelDelta from the finished requests of every rank's replay; with `principals`
    (each part's request's ids by level), each query block's."""

    rows = None
    if principals is not None and names is not None:
        rows = np.zeros((len(parts), len(PRINCIPAL_LEVELS)), np.int32)
        if principals:
            rows[:] = np.stack(principals)

    def cat(i: int, dtype: type[np.generic]) -> np.ndarray:
        return (
            np.concatenate([p[i] for p in parts]).astype(dtype, copy=False) if parts else np.empty(0, dtype)
        )

    return EngineModelDelta(
        distance=cat(0, np.int64),
        distance_unpinned=cat(1, np.int64),
        cause=cat(2, np.int8),
        tokens=cat(3, np.int64),
        requests=len(parts),
        partial_tail_tokens=partial_tail_per_request * len(parts),
        time=max((p[4] for p in parts), default=None),
        counts=tuple(counts.items()),
        state=tuple(state.items()),
        model=model,
        request_principals=rows,
        principals=None if rows is None else np.repeat(rows, [len(p[3]) for p in parts], axis=0),
        principal_names=names if rows is not None else None,
    )
