"""The engine's resident blocks, as its BlockStored / BlockRemoved events describe them.

Engines with page size 1 (SGLang) hold millions of resident "blocks", so the set is a numba
open-addressing table of uint64 keys (linear probing, backward-shift deletion: no tombstones),
not a Python set of int objects: a keys-only table of kvset.core.hash_table, a byte per cell saying
it is used (9 bytes a cell against the kernels' 16 for key-value pairs).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from kvset.core.hash_table import key_find, key_next_shift
from kvset.engine_model.records import MODEL_HORIZON

_MIN_CAPACITY = 1024


@njit(cache=True, nogil=True)
def _add_many(
    table: np.ndarray, used: np.ndarray, keys: np.ndarray, present: np.ndarray
) -> int:  # pragma: no cover - compiled
    added = 0
    for i in range(len(keys)):
        j = key_find(table, used, keys[i])
        present[i] = j >= 0
        if j < 0:
            table[-1 - j] = keys[i]
            used[-1 - j] = 1
            added += 1
    return added


@njit(cache=True, nogil=True)
def _contains_many(
    table: np.ndarray, used: np.ndarray, keys: np.ndarray, present: np.ndarray
) -> None:  # pragma: no cover - compiled
    for i in range(len(keys)):
        present[i] = key_find(table, used, keys[i]) >= 0


@njit(cache=True, nogil=True)
def _discard_many(
    table: np.ndarray, used: np.ndarray, keys: np.ndarray, present: np.ndarray
) -> int:  # pragma: no cover - compiled
    removed = 0
    for n in range(len(keys)):
        hole = key_find(table, used, keys[n])
        present[n] = hole >= 0
        if hole < 0:
            continue
        removed += 1
        used[hole] = 0
        move = key_next_shift(table, used, hole)
        while move >= 0:
            table[hole] = table[move]
            used[hole], used[move] = 1, 0
            hole = move
            move = key_next_shift(table, used, hole)
    return removed


class U64Set:
    """A set of uint64 keys with vectorized add / discard / contains."""

    def __init__(self, capacity: int = _MIN_CAPACITY) -> None:
        self._allocate(max(_MIN_CAPACITY, 1 << (int(capacity) - 1).bit_length()))

    def _allocate(self, capacity: int) -> None:
        self._table = np.zeros(capacity, dtype=np.uint64)
        self._used = np.zeros(capacity, dtype=np.uint8)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def _reserve(self, extra: int) -> None:
        # Keep the load factor at or below 1/2 so probe runs stay short.
        if 2 * (self._count + extra) <= len(self._table):
            return
        live = self.keys()
        capacity = len(self._table)
        while 2 * (self._count + extra) > capacity:
            capacity *= 2
        self._allocate(capacity)
        if len(live):
            self._count = _add_many(self._table, self._used, live, np.zeros(len(live), dtype=np.bool_))

    def add(self, keys: np.ndarray) -> np.ndarray:
        """Insert keys in order; returns, per key, whether it was already present."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        present = np.zeros(len(keys), dtype=np.bool_)
        if len(keys):
            self._reserve(len(keys))
            self._count += _add_many(self._table, self._used, keys, present)
        return present

    def discard(self, keys: np.ndarray) -> np.ndarray:
        """Remove keys in order; returns, per key, whether it was present."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        present = np.zeros(len(keys), dtype=np.bool_)
        if len(keys) and self._count:
            self._count -= _discard_many(self._table, self._used, keys, present)
        return present

    def contains(self, keys: np.ndarray) -> np.ndarray:
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        present = np.zeros(len(keys), dtype=np.bool_)
        if len(keys) and self._count:
            _contains_many(self._table, self._used, keys, present)
        return present

    def clear(self) -> None:
        self._allocate(_MIN_CAPACITY)

    def copy(self) -> U64Set:
        other = U64Set.__new__(U64Set)
        other._table, other._used, other._count = self._table.copy(), self._used.copy(), self._count
        return other

    def keys(self) -> np.ndarray:
        keys: np.ndarray = self._table[self._used.astype(bool)]
        return keys


class BoundedU64Set:
    """A U64Set of at most `bound` keys, in two generations: when the newer holds `bound / 2`, the
    older is dropped (counted in `dropped`) and the newer takes its place."""

    def __init__(self, bound: int) -> None:
        self.half = max(1, bound // 2)
        self.newer, self.older = U64Set(), U64Set()
        self.dropped = 0

    def __len__(self) -> int:
        return len(self.newer) + len(self.older)

    @property
    def nbytes(self) -> int:
        return sum(s._table.nbytes + s._used.nbytes for s in (self.newer, self.older))

    def rolls_with(self, n: int) -> bool:
        """Whether adding `n` keys first drops the older generation."""
        return len(self.newer) + n > self.half

    def add(self, keys: np.ndarray) -> np.ndarray:
        """Insert keys in order; per key, whether it was already present (the generations stay disjoint)."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        if self.rolls_with(len(keys)):
            self.dropped += len(self.older)
            self.older, self.newer = self.newer, U64Set(2 * len(self.newer))  # (no doubling all over)
        present = self.older.contains(keys)
        fresh = ~present
        present[fresh] = self.newer.add(keys[fresh])
        return present

    def discard(self, keys: np.ndarray) -> np.ndarray:
        present: np.ndarray = self.newer.discard(keys) | self.older.discard(keys)
        return present

    def contains(self, keys: np.ndarray) -> np.ndarray:
        present: np.ndarray = self.newer.contains(keys) | self.older.contains(keys)
        return present

    def copy(self) -> BoundedU64Set:
        other = BoundedU64Set(2 * self.half)
        other.newer, other.older = self.newer.copy(), self.older.copy()
        return other

    def clear(self) -> None:
        self.newer.clear()
        self.older.clear()


class Stored(NamedTuple):
    """What ResidentBlocks.store found."""

    already: int  # stores of blocks known to be resident: the engine reported a hit
    restored: int  # re-stores after removal: misses a larger cache would have hit
    resident: np.ndarray  # per key, whether it was resident before this store


MAX_RESIDENT = MODEL_HORIZON  # blocks: the engine model's reach, more than an engine's pool


class ResidentBlocks:
    """What one engine (one data-parallel rank) holds, and how it churns.

    - a store of a block that is already resident means the engine reports hits too;
    - a store of a block the engine evicted earlier is a miss that a larger cache would have
      hit ("re-store after removal"). Removed keys are remembered in two generations of
      `removed_memory / 2` keys each, so that count covers at least the last
      `removed_memory / 2` evictions and memory stays bounded;
    - after events were lost (`mark_uncertain`), the blocks resident then may have been evicted
      unseen: a store of one of them is no evidence of a hit, until it is stored or removed again.
    """

    def __init__(self, removed_memory: int = 2_000_000, max_resident: int = MAX_RESIDENT) -> None:
        self._generation_size = max(1, removed_memory // 2)
        # Bounded: a stream whose removals are lost (or never sent) would grow it without end; past
        # max_resident the older half is forgotten (`forgotten_resident`): a later store of one of
        # those blocks is taken as new, never as a hit.
        self.resident = BoundedU64Set(max_resident)
        self._uncertain = BoundedU64Set(max_resident)  # a subset of `resident`
        # The keys stored since the last loss: with `_uncertain`, they cover `resident`, so the next
        # loss adds only them (events lost at every other batch made each loss copy the whole set).
        # None: too many to keep (more than the resident blocks), the next loss reads `resident`.
        self._stored_since_loss: list[np.ndarray] | None = []
        self._stored_since_loss_n = 0
        # whether every key stored since the last loss is still resident: nothing removed, nothing
        # forgotten since (then the next loss need not ask the set which of them are)
        self._kept_since_loss = True
        self._forgotten_at_loss = 0
        self._removed_recent = U64Set()
        self._removed_older = U64Set()
        self.stored_total = 0
        self.stores_of_resident = 0  # of blocks known to be resident: the engine reported a hit
        self.stores_of_uncertain = 0  # of blocks resident before lost events: perhaps re-stores
        self.restores_after_removal = 0
        self.evictions_total = 0
        self.removals_not_resident = 0  # e.g. blocks stored before we joined the stream
        self.peak_resident = 0

    def __len__(self) -> int:
        return len(self.resident)

    @property
    def forgotten_resident(self) -> int:
        """Resident blocks forgotten to keep the set bounded (their removals never came)."""
        return self.resident.dropped

    @property
    def uncertain(self) -> int:
        """Resident blocks whose removal may have been lost."""
        return len(self._uncertain)

    def mark_uncertain(self) -> None:
        """Events were lost: any block resident now may have been evicted without our seeing it."""
        if not len(self._uncertain) or self._stored_since_loss is None:
            self._uncertain = self.resident.copy()
        elif self._stored_since_loss:
            stored = np.concatenate(self._stored_since_loss)
            kept = self._kept_since_loss and self.resident.dropped == self._forgotten_at_loss
            self._uncertain.add(stored if kept else stored[self.resident.contains(stored)])
        self._stored_since_loss, self._stored_since_loss_n = [], 0
        self._kept_since_loss, self._forgotten_at_loss = True, self.resident.dropped

    def store(self, keys: np.ndarray, hit_evidence: bool = True) -> Stored:
        """Record a BlockStored; returns the stores of blocks known to be resident, the re-stores after
        removal and, per key, whether it was resident before (the caller's own lookup: each store
        reads the set once, not once to ask and once to add).

        hit_evidence: False for a store that chains onto a parent: a hit report has none, and a
        resident block stored with one is computed again (vLLM's last block of a cached prompt)."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        # adding reports what was resident, but after dropping the older generation when it is full:
        # then (one store in half a horizon) the set is asked first
        before = self.resident.contains(keys) if self.resident.rolls_with(len(keys)) else None
        present = self.resident.add(keys)
        self._note_stored(keys)
        if len(self._uncertain):
            # Stored now, so resident for sure from here on; but this store is no evidence of a hit.
            unsure = self._uncertain.discard(keys)
            self.stores_of_uncertain += int((present & unsure).sum())
            present_for_sure = present & ~unsure
        else:
            present_for_sure = present
        already = int(present_for_sure.sum())
        restored = 0
        if not present.all() and (len(self._removed_recent) or len(self._removed_older)):
            fresh = keys[~present]
            restored = int((self._removed_recent.contains(fresh) | self._removed_older.contains(fresh)).sum())
        self.stored_total += len(keys)
        if not hit_evidence:
            already = 0
        self.stores_of_resident += already
        self.restores_after_removal += restored
        self.peak_resident = max(self.peak_resident, len(self.resident))
        return Stored(already, restored, present if before is None else before)

    def _note_stored(self, keys: np.ndarray) -> None:
        if self._stored_since_loss is None:
            return
        self._stored_since_loss_n += len(keys)
        if self._stored_since_loss_n > max(len(self.resident), 1 << 16):
            self._stored_since_loss = None  # the next loss copies `resident`, no dearer than these
        else:
            self._stored_since_loss.append(np.array(keys, dtype=np.uint64))

    def remove(self, keys: np.ndarray) -> int:
        """Record a BlockRemoved; returns how many of the keys were resident."""
        present = self.resident.discard(keys)
        self._kept_since_loss = False
        if len(self._uncertain):
            self._uncertain.discard(keys)
        evicted = int(present.sum())
        self.evictions_total += len(keys)
        self.removals_not_resident += len(keys) - evicted
        if len(self._removed_recent) + len(keys) > self._generation_size:
            self._removed_older = self._removed_recent
            self._removed_recent = U64Set()
        self._removed_recent.add(keys)
        return evicted

    def clear(self) -> None:
        """The engine dropped everything (AllBlocksCleared or a restart): a larger cache would be empty too."""
        self.resident.clear()
        self._uncertain.clear()
        self._stored_since_loss, self._stored_since_loss_n = [], 0
        self._removed_recent.clear()
        self._removed_older.clear()


class MediaResidents:
    """The pages each other medium holds (SGLang HiCache's CPU_PINNED, DISK, EXTERNAL tiers: its
    write-through copies), from the BlockStored and BlockRemoved events of the media not counted as
    accesses; what the Tiers figure shows beside the tiers --tiers plans."""

    def __init__(self) -> None:
        self._sets: dict[str, U64Set] = {}

    def stored(self, medium: str, keys: np.ndarray) -> None:
        self._sets.setdefault(medium, U64Set()).add(keys)

    def removed(self, medium: str, keys: np.ndarray) -> None:
        held = self._sets.get(medium)
        if held is not None:
            held.discard(keys)

    def clear(self) -> None:
        for held in self._sets.values():
            held.clear()

    def counts(self) -> tuple[tuple[str, int], ...]:
        return tuple((medium, len(held)) for medium, held in sorted(self._sets.items()))
