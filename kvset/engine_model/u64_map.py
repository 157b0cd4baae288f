"""A map of uint64 keys to int64 values, vectorized: the engine model's per-block links and owners.

A block's parent and the request that stored it last were Python dicts: about 100 bytes a block,
and a Python loop over every block of a store (10,000-block stores came at 0.2 M blocks/s). Here
they are a numba open-addressing table like the resident set's U64Set (kvset.engine.resident_set) (linear probing,
backward-shift deletion), with a value beside each key: 17 bytes a cell, at most half the cells
used.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core.hash_table import key_find, key_next_shift
from kvset.core.kernel_types import Int

_MIN_CAPACITY = 1024


@njit(cache=True, nogil=True)
def _put_many(
    table: np.ndarray,
    vals: np.ndarray,
    used: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    old: np.ndarray,
    present: np.ndarray,
    previous: bool,
) -> int:  # pragma: no cover - compiled
    """Set each key's value; with `previous`, old/present: what it held before (read on the way)."""
    added = 0
    for i in range(len(keys)):
        j = key_find(table, used, keys[i])
        if j < 0:
            j = -1 - j
            table[j] = keys[i]
            used[j] = 1
            added += 1
        elif previous:
            old[i] = vals[j]
            present[i] = True
        vals[j] = values[i]
    return added


@njit(cache=True, nogil=True)
def _get_many(
    table: np.ndarray,
    vals: np.ndarray,
    used: np.ndarray,
    keys: np.ndarray,
    out: np.ndarray,
    present: np.ndarray,
) -> None:  # pragma: no cover - compiled
    for i in range(len(keys)):
        j = key_find(table, used, keys[i])
        if j >= 0:
            out[i] = vals[j]
            present[i] = True


@njit(cache=True, nogil=True)
def _delete_at(table: np.ndarray, vals: np.ndarray, used: np.ndarray, hole: Int) -> None:  # pragma: no cover
    used[hole] = 0
    move = key_next_shift(table, used, hole)  # backward-shift deletion (kvset.core.hash_table)
    while move >= 0:
        table[hole], vals[hole] = table[move], vals[move]
        used[hole], used[move] = 1, 0
        hole = move
        move = key_next_shift(table, used, hole)


@njit(cache=True, nogil=True)
def _pop_many(
    table: np.ndarray,
    vals: np.ndarray,
    used: np.ndarray,
    keys: np.ndarray,
    only: np.ndarray,
    check: bool,
    out: np.ndarray,
    present: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """Remove each key (with `check`: only where its value is only[i]); out/present: what it held."""
    removed = 0
    for i in range(len(keys)):
        j = key_find(table, used, keys[i])
        if j < 0 or (check and vals[j] != only[i]):
            continue
        out[i] = vals[j]
        present[i] = True
        _delete_at(table, vals, used, j)
        removed += 1
    return removed


_NONE = np.zeros(0, dtype=np.int64)  # (no previous values asked for)
_NO = np.zeros(0, dtype=np.bool_)


def _u64(keys: np.ndarray | list[int]) -> np.ndarray:
    return np.ascontiguousarray(keys, dtype=np.uint64)


class U64Map:
    """uint64 key -> int64 value, with vectorized put / get / pop."""

    def __init__(self, capacity: int = _MIN_CAPACITY) -> None:
        self._allocate(max(_MIN_CAPACITY, 1 << (int(capacity) - 1).bit_length()))

    def _allocate(self, capacity: int) -> None:
        self._table = np.zeros(capacity, dtype=np.uint64)
        self._vals = np.zeros(capacity, dtype=np.int64)
        self._used = np.zeros(capacity, dtype=np.uint8)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        return self._table.nbytes + self._vals.nbytes + self._used.nbytes

    def _reserve(self, extra: int) -> None:
        if 2 * (self._count + extra) <= len(self._table):  # load factor at most 1/2
            return
        live = self._used.astype(bool)
        keys, vals = self._table[live], self._vals[live]
        capacity = len(self._table)
        while 2 * (self._count + extra) > capacity:
            capacity *= 2
        self._allocate(capacity)
        self._count = _put_many(self._table, self._vals, self._used, keys, vals, _NONE, _NO, False)

    def put(self, keys: np.ndarray | list[int], values: np.ndarray | int) -> None:
        """Set each key's value, in order (a key given twice keeps its last value)."""
        self._put(_u64(keys), values, _NONE, _NO, False)

    def swap(
        self, keys: np.ndarray | list[int], values: np.ndarray | int, default: int = -1
    ) -> tuple[np.ndarray, np.ndarray]:
        """put, returning what get would have said just before (one pass over the table, not two; a
        key given twice reads, the second time, the value the first gave it)."""
        keys = _u64(keys)
        old = np.full(len(keys), default, dtype=np.int64)
        present = np.zeros(len(keys), dtype=np.bool_)
        self._put(keys, values, old, present, True)
        return old, present

    def _put(
        self, keys: np.ndarray, values: np.ndarray | int, old: np.ndarray, present: np.ndarray, previous: bool
    ) -> None:
        if not len(keys):
            return
        vals = np.broadcast_to(np.asarray(values, dtype=np.int64), keys.shape)
        self._reserve(len(keys))
        self._count += _put_many(
            self._table, self._vals, self._used, keys, np.ascontiguousarray(vals), old, present, previous
        )

    def get(self, keys: np.ndarray | list[int], default: int = -1) -> tuple[np.ndarray, np.ndarray]:
        """(each key's value, `default` where absent; whether each key is present)."""
        keys = _u64(keys)
        out = np.full(len(keys), default, dtype=np.int64)
        present = np.zeros(len(keys), dtype=np.bool_)
        if len(keys) and self._count:
            _get_many(self._table, self._vals, self._used, keys, out, present)
        return out, present

    def get_one(self, key: int) -> int | None:
        values, present = self.get(np.array([key], dtype=np.uint64))
        return int(values[0]) if present[0] else None

    def pop(
        self, keys: np.ndarray | list[int], only: np.ndarray | int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Remove the keys (with `only`: those whose value is it); (what each held, whether removed)."""
        keys = _u64(keys)
        out = np.full(len(keys), -1, dtype=np.int64)
        present = np.zeros(len(keys), dtype=np.bool_)
        if len(keys) and self._count:
            check = np.ascontiguousarray(
                np.broadcast_to(np.asarray(0 if only is None else only, np.int64), keys.shape)
            )
            self._count -= _pop_many(
                self._table, self._vals, self._used, keys, check, only is not None, out, present
            )
        return out, present

    def clear(self) -> None:
        self._allocate(_MIN_CAPACITY)
