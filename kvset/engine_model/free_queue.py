"""vLLM's block pool as a stack: pinned blocks on top, then its free queue, newest release first.

vLLM keeps a block while a running request holds it (its reference count is above zero: it is
*pinned*) and, once released, in a free queue ordered by release time; a new block is taken from
the head (the oldest release), which evicts the cached block there. A request frees its blocks last
to first, so a chain's tail is evicted before its head. For a block b released at t_r, the blocks a
pool of C blocks must hold at time t before it are those pinned at t and those released after t_r
and not pinned again; that count never falls while b waits (a pinned block that is released joins
the newer releases, a released block that is pinned again joins the pinned). So b is still cached
at t in a pool of C blocks exactly when

    D = pinned(t) + (position of b in the free queue, counted from the newest release) <= C

and one pass gives the hit or miss of every capacity at once, for the same schedule of admissions
and releases. The queue is unbounded here (nothing is evicted): positions beyond `horizon` are
forgotten, oldest release first, and handed back so that the caller can tell them from new blocks.

`FreeQueue.run(ops, keys)` applies operations in order: QUERY (read the block's position and the
pinned count, change nothing), PIN (a request holds the block: taken out of the queue if it was
there), RELEASE (a holder lets go: at zero holders the block joins the queue as its newest
release). Positions come from a Fenwick tree over release slots; keys from an open-addressing table.
Slot numbers and the tree's counts are int32: a slot array holds at most twice the live releases
and those of one run (an engine model's horizon is 2^19 blocks), and int32 makes a flood's table
and slots 8 MiB smaller (17 bytes a cell, 12 a slot, instead of 21 and 16).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core import fenwick
from kvset.core.hash_table import key_find, key_next_shift
from kvset.core.kernel_types import Int
from kvset.engine_model.records import MODEL_HORIZON

QUERY = 0
PIN = 1
RELEASE = 2

PINNED = 0  # position of a block that is pinned
ABSENT = -1  # position of a block neither pinned nor queued: never seen, or forgotten

_MIN_TABLE = 1024
_MIN_SLOTS = 1024
# scalars: [next free slot, queue length, oldest slot that may be live, pinned blocks, table entries]
_NEXT, _LIVE, _HEAD, _PINNED, _ENTRIES = range(5)


@njit(cache=True, nogil=True)
def _delete(
    tkeys: np.ndarray, used: np.ndarray, ref: np.ndarray, slot: np.ndarray, hole: Int
) -> None:  # pragma: no cover - compiled
    """Backward-shift deletion (kvset.core.hash_table.key_next_shift): no tombstones."""
    used[hole] = 0
    move = key_next_shift(tkeys, used, hole)
    while move >= 0:
        tkeys[hole], ref[hole], slot[hole] = tkeys[move], ref[move], slot[move]
        used[hole], used[move] = 1, 0
        hole = move
        move = key_next_shift(tkeys, used, hole)


@njit(cache=True, nogil=True)
def _run(
    ops: np.ndarray,
    keys: np.ndarray,
    tkeys: np.ndarray,
    used: np.ndarray,
    ref: np.ndarray,
    slot: np.ndarray,
    fen: np.ndarray,
    slot_key: np.ndarray,
    sc: np.ndarray,
    horizon: Int,
    pos_out: np.ndarray,
    pinned_out: np.ndarray,
    forgot_out: np.ndarray,
) -> int:  # pragma: no cover - compiled
    n_forgot = 0
    queried = False  # the last op was a QUERY: it changed nothing, so its lookup still holds
    last_key = np.uint64(0)
    last_j = 0
    for n in range(len(ops)):
        op = ops[n]
        key = keys[n]
        # a lookup is QUERY then PIN of each block: the PIN takes the QUERY's cell (or insertion
        # point) instead of probing the table again, one random read of a large table fewer a block
        j = last_j if queried and key == last_key else key_find(tkeys, used, key)
        queried, last_key, last_j = op == 0, key, j
        if op == 0:  # QUERY
            pinned_out[n] = sc[3]
            if j < 0:
                pos_out[n] = -1
            elif ref[j] > 0:
                pos_out[n] = 0
            else:
                pos_out[n] = sc[1] - fenwick.prefix(fen, slot[j]) + 1
        elif op == 1:  # PIN
            if j < 0:
                j = -1 - j
                tkeys[j] = key
                used[j] = 1
                ref[j] = 0
                slot[j] = -1
                sc[4] += 1
            if ref[j] == 0:
                sc[3] += 1
                if slot[j] >= 0:
                    fenwick.remove_below(fen, slot[j], 1, sc[0])
                    sc[1] -= 1
                    slot[j] = -1
            ref[j] += 1
        else:  # RELEASE
            if j < 0 or ref[j] == 0:
                continue  # a release without a pin: nothing holds it
            ref[j] -= 1
            if ref[j] == 0:
                sc[3] -= 1
                s = sc[0]
                sc[0] += 1
                slot[j] = s
                slot_key[s] = key
                fenwick.append(fen, s, 1)  # the newest slot: its node from its children, no walk
                sc[1] += 1
                while sc[1] > horizon:  # forget the oldest release
                    h = sc[2]
                    while True:
                        k = key_find(tkeys, used, slot_key[h])
                        if k >= 0 and slot[k] == h:
                            break
                        h += 1
                    fenwick.remove_below(fen, h, 1, sc[0])
                    sc[1] -= 1
                    sc[2] = h + 1
                    forgot_out[n_forgot] = slot_key[h]
                    n_forgot += 1
                    _delete(tkeys, used, ref, slot, k)
                    sc[4] -= 1
    return n_forgot


@njit(cache=True, nogil=True)
def _compact(
    tkeys: np.ndarray,
    used: np.ndarray,
    slot: np.ndarray,
    fen: np.ndarray,
    slot_key: np.ndarray,
    sc: np.ndarray,
    new_fen: np.ndarray,
    new_slot_key: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Renumber the live slots 0..live-1 in order (into new arrays) and rebuild the Fenwick tree."""
    out = 0
    for s in range(sc[2], sc[0]):
        k = key_find(tkeys, used, slot_key[s])
        if k >= 0 and slot[k] == s:
            slot[k] = out
            new_slot_key[out] = slot_key[s]
            out += 1
    n = len(new_fen) - 1
    for i in range(1, n + 1):  # the Fenwick tree of ones at slots 0..out-1, built in O(n)
        if i <= out:
            new_fen[i] += 1
        parent = i + (i & -i)
        if parent <= n:
            new_fen[parent] += new_fen[i]
    sc[0] = out
    sc[2] = 0


@njit(cache=True, nogil=True)
def _reinsert(
    tkeys: np.ndarray,
    used: np.ndarray,
    ref: np.ndarray,
    slot: np.ndarray,
    old_keys: np.ndarray,
    old_used: np.ndarray,
    old_ref: np.ndarray,
    old_slot: np.ndarray,
) -> None:  # pragma: no cover - compiled
    for i in range(len(old_keys)):
        if old_used[i]:
            j = -1 - key_find(tkeys, used, old_keys[i])
            tkeys[j] = old_keys[i]
            used[j] = 1
            ref[j] = old_ref[i]
            slot[j] = old_slot[i]


def _over_load(entries: int, capacity: int) -> bool:
    """Whether the key table is too full: above 3/4 of its cells. At most 1/2 doubled it as soon as
    the pinned blocks came on top of a full horizon of 2^k queued ones (21 bytes a cell: 42 MiB for a
    flood's 614,000 blocks instead of 21); linear probing still finds a key in a few cells there
    (the queue's kernel takes about 12 % longer on such a table)."""
    return 4 * entries > 3 * capacity


class FreeQueue:
    """vLLM's pinned blocks and free queue, unbounded: positions for every pool size at once."""

    def __init__(self, horizon: int = MODEL_HORIZON) -> None:
        if horizon < 1:
            raise ValueError("horizon must be positive")
        self.horizon = int(horizon)
        self._sc = np.zeros(5, dtype=np.int64)
        self._table(_MIN_TABLE)
        self._fen = np.zeros(_MIN_SLOTS + 1, dtype=np.int32)
        self._slot_key = np.zeros(_MIN_SLOTS, dtype=np.uint64)

    def _table(self, capacity: int) -> None:
        self._tkeys = np.zeros(capacity, dtype=np.uint64)
        self._used = np.zeros(capacity, dtype=np.uint8)
        self._ref = np.zeros(capacity, dtype=np.int32)
        self._slot = np.full(capacity, -1, dtype=np.int32)

    @property
    def pinned(self) -> int:
        """Blocks held by at least one request."""
        return int(self._sc[_PINNED])

    @property
    def queued(self) -> int:
        """Blocks in the free queue (released, not pinned again, not forgotten)."""
        return int(self._sc[_LIVE])

    @property
    def nbytes(self) -> int:
        arrays = (self._tkeys, self._used, self._ref, self._slot, self._fen, self._slot_key)
        return sum(a.nbytes for a in arrays)

    def _reserve(self, pins: int, releases: int) -> None:
        sc = self._sc
        if _over_load(int(sc[_ENTRIES]) + pins, len(self._tkeys)):
            capacity = len(self._tkeys)
            while _over_load(int(sc[_ENTRIES]) + pins, capacity):
                capacity *= 2
            old = (self._tkeys, self._used, self._ref, self._slot)
            self._table(capacity)
            _reinsert(self._tkeys, self._used, self._ref, self._slot, *old)
        if sc[_NEXT] + releases > len(self._slot_key):
            size = max(_MIN_SLOTS, 2 * (int(sc[_LIVE]) + releases))
            fen = np.zeros(size + 1, dtype=np.int32)
            slot_key = np.zeros(size, dtype=np.uint64)
            _compact(self._tkeys, self._used, self._slot, self._fen, self._slot_key, sc, fen, slot_key)
            self._fen, self._slot_key = fen, slot_key

    def run(self, ops: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Apply `ops` (QUERY, PIN, RELEASE) to `keys` in order.

        Returns (position, pinned, forgotten): for each QUERY, the block's position from the newest
        release (PINNED, ABSENT, or 1, 2, ...) and the pinned count then (other rows are 0); and the
        keys forgotten beyond the horizon meanwhile.
        """
        ops = np.ascontiguousarray(ops, dtype=np.int8)
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        if len(ops) != len(keys):
            raise ValueError("ops and keys differ in length")
        releases = int((ops == RELEASE).sum())
        self._reserve(int((ops == PIN).sum()), releases)
        pos = np.zeros(len(ops), dtype=np.int64)
        pinned = np.zeros(len(ops), dtype=np.int64)
        forgot = np.zeros(releases, dtype=np.uint64)
        n = _run(
            ops,
            keys,
            self._tkeys,
            self._used,
            self._ref,
            self._slot,
            self._fen,
            self._slot_key,
            self._sc,
            self.horizon,
            pos,
            pinned,
            forgot,
        )
        return pos, pinned, forgot[:n]
