"""Whose blocks the pool holds and who pushed whom out: one LRU replay of the stream at the pool's size.

The stack distances tell each principal's hits at every capacity, but not who holds the cache nor
whose access evicted a block: those depend on one capacity, so the stream is replayed once through
an LRU of that many blocks (a compiled doubly-linked list over the stream's blocks, numbered
densely). A block is held by the principal whose access touched it last, from that access until
the next access to it or its eviction; a principal's share of the cache is the block-steps it
held over all of them (time counted in accesses, so a burst weighs what it holds per access). An
eviction is the access that pushed the least recent block out; when that block is next accessed
(a miss: it is gone) the pair (evicting access, missing access) is one block displaced.

This is a model of the pool (an exact LRU of its size, the stream as kvset read it), not the
engine's own resident set: the figure says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from kvset.types import PRINCIPAL_LEVELS


@njit(cache=True, nogil=True, inline="always")
def _row(
    principals: np.ndarray, columns: np.ndarray, rows: np.ndarray, step: int, level: int
) -> int:  # pragma: no cover - compiled
    # the row of step's access at this level: its principal's, or the rest's (a level the trace lacks:
    # every access unknown)
    column = columns[level]
    return int(rows[level, principals[step, column] if column >= 0 else 0])


@njit(cache=True, nogil=True)
def _replay(
    blocks: np.ndarray,
    capacity: int,
    principals: np.ndarray,
    columns: np.ndarray,
    rows: np.ndarray,
    request_starts: np.ndarray,
    request_times: np.ndarray,
    held: np.ndarray,
    accesses: np.ndarray,
    displaced: np.ndarray,
    ages: np.ndarray,
    prev: np.ndarray,
    nxt: np.ndarray,
    state: np.ndarray,
) -> int:  # pragma: no cover - compiled
    # per block, all -1 on entry: the list's links, and its state: the step of its last access while
    # it is resident (>= 0), -(step + 2) of the access that pushed it out until it is missed (<= -2),
    # else -1. Each access's row at each level is looked up as it is counted: nothing per access is
    # kept but what the trace holds.
    n = len(blocks)
    levels = len(columns)
    n_requests = len(request_starts)
    head = -1  # most recent
    tail = -1  # least recent: the next to go
    size = 0
    evictions = 0
    request = -1  # step i's: the last one beginning at or before it
    for i in range(n):
        while request + 1 < n_requests and request_starts[request + 1] <= i:
            request += 1
        b = blocks[i]
        for lv in range(levels):
            accesses[lv, _row(principals, columns, rows, i, lv)] += 1
        s = state[b]
        if s >= 0:  # a hit: its last access held it until now
            for lv in range(levels):
                held[lv, _row(principals, columns, rows, s, lv)] += i - s
            if b != head:  # unlink, then push at the head
                p, q = prev[b], nxt[b]
                nxt[p] = q
                if q >= 0:
                    prev[q] = p
                else:
                    tail = p
                prev[b] = -1
                nxt[b] = head
                prev[head] = b
                head = b
        else:
            if s <= -2:  # pushed out, and missed now
                e = -s - 2
                for lv in range(levels):
                    displaced[
                        lv, _row(principals, columns, rows, e, lv), _row(principals, columns, rows, i, lv)
                    ] += 1
            prev[b] = -1
            nxt[b] = head
            if head >= 0:
                prev[head] = b
            head = b
            if tail < 0:
                tail = b
            size += 1
            if size > capacity:
                v = tail
                tail = prev[v]
                nxt[tail] = -1
                prev[v] = -1
                size -= 1
                used = state[v]
                for lv in range(levels):
                    held[lv, _row(principals, columns, rows, used, lv)] += i - used
                if n_requests:  # the times of the two accesses' requests (the first one's before it)
                    then = np.searchsorted(request_starts, used, side="right") - 1
                    ages[evictions] = request_times[max(request, 0)] - request_times[max(then, 0)]
                else:
                    ages[evictions] = np.nan
                evictions += 1
                state[v] = -(i + 2)
        state[b] = i
    for b in range(len(state)):  # still resident at the end: held until then
        s = state[b]
        if s >= 0:
            for lv in range(levels):
                held[lv, _row(principals, columns, rows, s, lv)] += n - s
    return evictions


@dataclass(frozen=True, eq=False)
class PoolReplay:
    """An LRU of `capacity` blocks replayed over the stream, its figures summed per row as they go: at
    each of `levels`, the rows are the principals asked for (PoolTrace.replay's `reported`, in their
    order) and then one for the rest of that level. `held[level, row]`: the block-steps the row's
    accesses kept their block resident; `accesses[level, row]`: its accesses; `displaced[level, i,
    j]`: blocks row i's accesses pushed out that row j's then missed; `eviction_ages`: seconds each
    evicted block had stayed since its last use (the times of the requests of the two accesses).
    A level has as many rows as the widest one: those past its own are zero."""

    capacity: int
    levels: tuple[str, ...]
    held: np.ndarray  # int64 (levels, rows)
    accesses: np.ndarray  # int64 (levels, rows)
    displaced: np.ndarray  # int64 (levels, rows, rows)
    eviction_ages: np.ndarray  # float64, one per eviction


@dataclass(eq=False)
class PoolTrace:
    """The stream as the pool replay needs it, in the analyzer's order: each access's block (a dense
    number) and its principal ids at the levels it holds; each request's first access and its time."""

    blocks: np.ndarray  # int32 (int64 past 2**31 blocks)
    n_blocks: int
    principals: np.ndarray  # int32 (accesses, len(levels))
    request_starts: np.ndarray  # int64, ascending
    request_times: np.ndarray  # float64 seconds (nan: the stream gave none)
    levels: tuple[str, ...] = PRINCIPAL_LEVELS  # the principals' columns

    @classmethod
    def of(
        cls,
        keys: np.ndarray,
        principals: np.ndarray,
        times: np.ndarray,
        starts: np.ndarray,
        levels: tuple[str, ...] = PRINCIPAL_LEVELS,
    ) -> PoolTrace:
        uniq, dense = np.unique(keys, return_inverse=True)
        del keys
        small = np.int32 if len(uniq) < 2**31 and len(dense) < 2**31 else np.int64
        return cls(
            dense.astype(small).reshape(-1),
            len(uniq),
            np.asarray(principals, dtype=np.int32),
            np.asarray(starts, dtype=np.int64),
            np.asarray(times, dtype=np.float64),
            levels,
        )

    def __len__(self) -> int:
        return len(self.blocks)

    def column(self, level: str) -> np.ndarray:
        """Each access's principal id at this level (0, unknown, at a level it does not hold)."""
        if level not in self.levels:
            return np.zeros(len(self.blocks), dtype=np.int32)
        return self.principals[:, self.levels.index(level)]

    def times_of(self, steps: np.ndarray) -> np.ndarray:
        """The time of each access (its request's)."""
        request = np.searchsorted(self.request_starts, steps, side="right") - 1
        return self.request_times[np.maximum(request, 0)]

    def replay(self, capacity: int, reported: Mapping[str, Sequence[int]]) -> PoolReplay:
        """The LRU of `capacity` blocks over the stream, replayed at each call, its figures summed per
        row of each level of `reported` (the principal ids asked for, then the rest of the level)
        as it goes. What it costs beside the trace: 12 bytes a block while it runs, and 8 an
        eviction (the ages, for their median)."""
        if capacity < 1:
            raise ValueError(f"a pool of {capacity} blocks holds nothing")
        levels = tuple(reported)
        width = max((len(ids) for ids in reported.values()), default=0) + 1
        top = int(self.principals.max(initial=0))
        rows = np.empty((len(levels), top + 1), dtype=np.int32)
        for place, ids in enumerate(reported.values()):
            rows[place] = len(ids)  # the rest
            for row, principal in enumerate(ids):
                if principal <= top:
                    rows[place, principal] = row
        columns = np.array(
            [self.levels.index(lv) if lv in self.levels else -1 for lv in levels], dtype=np.int64
        )
        held = np.zeros((len(levels), width), dtype=np.int64)
        accesses = np.zeros((len(levels), width), dtype=np.int64)
        displaced = np.zeros((len(levels), width, width), dtype=np.int64)
        # one an access at most; the pages of those there are not touched
        ages = np.empty(len(self.blocks))
        step = self.blocks.dtype  # steps fit the blocks' type: there are no more blocks than accesses
        links = [np.full(self.n_blocks, -1, dtype=step) for _ in range(3)]
        evictions = _replay(
            self.blocks,
            int(capacity),
            self.principals,
            columns,
            rows,
            self.request_starts,
            self.request_times,
            held,
            accesses,
            displaced,
            ages,
            *links,
        )
        return PoolReplay(int(capacity), levels, held, accesses, displaced, ages[:evictions])

    def turn_gaps(self, level: str = "session") -> tuple[np.ndarray, np.ndarray]:
        """(principal ids, median gap in seconds between one request and the next) of every named
        principal of this level with two requests or more."""
        if not len(self.request_starts):
            return np.zeros(0, dtype=np.int32), np.zeros(0)
        who = self.column(level)[self.request_starts]
        at = self.request_times
        named = who > 0
        who, at = who[named], at[named]
        order = np.lexsort((at, who))
        who, at = who[order], at[order]
        same = who[1:] == who[:-1]
        gap_of, gaps = who[1:][same], np.diff(at)[same]
        if not len(gaps):
            return np.zeros(0, dtype=np.int32), np.zeros(0)
        order = np.lexsort((gaps, gap_of))
        gap_of, gaps = gap_of[order], gaps[order]
        ids, first, counts = np.unique(gap_of, return_index=True, return_counts=True)
        lo = first + (counts - 1) // 2
        hi = first + counts // 2
        return ids, (gaps[lo] + gaps[hi]) / 2
