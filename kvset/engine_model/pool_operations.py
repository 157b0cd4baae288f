"""The block pool's side of kvset.engine_model.replay: a request's lookups, pins and the distances
they give, on vLLM's free queue (kvset.engine_model.free_queue), and the blocks it forgot beyond its
horizon. A mixin of RequestReplay, whose state it reads."""

from __future__ import annotations

import numpy as np

from kvset.engine_model.free_queue import ABSENT, PIN, PINNED, QUERY, FreeQueue
from kvset.engine_model.kv_groups import GroupCopies
from kvset.engine_model.records import (
    CAUSE_BEYOND_HORIZON,
    CAUSE_FIRST_TIME,
    CAUSE_RECOMPUTED,
    INFINITE,
    MODEL_HORIZON,
    OpenRequest,
    RequestCounts,
    add_query,
)
from kvset.engine_model.u64_map import U64Map

FORGOTTEN_MEMORY = MODEL_HORIZON


class PoolOperations:
    """Lookups (QUERY then PIN) and pins of a request's blocks, and what the queue forgets."""

    counts: RequestCounts
    queue: FreeQueue
    groups: GroupCopies
    filling: int
    _running: dict[int, OpenRequest]
    _forgotten_recent: U64Map
    _forgotten_older: U64Map

    def _distances(self, pos: np.ndarray, pinned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(distance, distance ignoring the pinned blocks) from free-queue positions."""
        dq = np.where(pos == PINNED, 1, np.where(pos == ABSENT, INFINITE, pos)).astype(np.int64)
        # a queued block waits behind the pinned ones and behind the block each running request is
        # filling (one in each KV cache group)
        filling = self.filling * len(self._running) * (1 + len(self.groups))
        return np.where(pos > 0, pos + pinned + filling, dq).astype(np.int64), dq

    def _query(
        self, request: OpenRequest, keys: np.ndarray, tokens: np.ndarray, recomputed: bool, hit: bool = False
    ) -> None:
        n = len(keys)
        if self.groups:
            self.groups.read(request, keys, self._run, self._distances)
        looked_up, held = keys, keys
        if self.groups.copies is not None:  # (a Mamba group: kvset.engine_model.block_copies)
            looked_up = held = self.groups.copies.current(keys)
            if not hit:
                present = self.queue.run(np.full(n, QUERY, dtype=np.int8), looked_up)[0] != ABSENT
                held = self.groups.copies.fresh(keys, present)
        ops = np.empty(2 * n, dtype=np.int8)
        ops[0::2], ops[1::2] = QUERY, PIN
        both = np.empty(2 * n, dtype=np.uint64)
        both[0::2], both[1::2] = looked_up, held
        pos, pinned, forgot = self.queue.run(ops, both)
        self._forget(forgot)
        pos, pinned = pos[0::2], pinned[0::2]
        dt, dq = self._distances(pos, pinned)
        cause = np.zeros(n, dtype=np.int8)
        absent = pos == ABSENT
        if absent.any():
            missed = looked_up[absent]
            beyond = self._forgotten_recent.get(missed)[1] | self._forgotten_older.get(missed)[1]
            cause[absent] = np.where(beyond, CAUSE_BEYOND_HORIZON, CAUSE_FIRST_TIME)
        if recomputed:
            dt[:], dq[:], cause[:] = INFINITE, INFINITE, CAUSE_RECOMPUTED
            self.counts.recomputed_blocks += n
        if self.groups:
            self.groups.pin(request, keys, hit, self._run)
            request.raw.append((dt, dq))  # the lookup across groups is computed once it is complete
        add_query(request, held, dt, dq, cause, tokens)

    def _pin(self, request: OpenRequest, keys: np.ndarray) -> None:
        _, _, forgot = self.queue.run(np.full(len(keys), PIN, dtype=np.int8), keys)
        self._forget(forgot)
        request.held.append(keys)
        if self.groups:
            self.groups.pin(request, keys, False, self._run)

    def _admit(self, request: OpenRequest) -> None:
        if len(request.hit_keys):
            self._query(request, request.hit_keys, request.hit_tokens, False, hit=True)

    def _store(self, request: OpenRequest, index: int) -> None:
        _, keys, tokens, decode, recomputed = request.stores[index]
        if decode:
            self.counts.decode_blocks += len(keys)
            self._pin(request, keys)
        else:
            self._query(request, keys, tokens, recomputed)

    def _run(self, ops: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Free-queue operations; blocks it forgets are remembered as forgotten."""
        pos, pinned, forgot = self.queue.run(ops, keys)
        self._forget(forgot)
        return pos, pinned

    def _forget(self, keys: np.ndarray) -> None:
        if not len(keys):
            return
        if len(self._forgotten_recent) + len(keys) > FORGOTTEN_MEMORY // 2:
            self._forgotten_older, self._forgotten_recent = self._forgotten_recent, U64Map()
        self._forgotten_recent.put(keys, 0)
