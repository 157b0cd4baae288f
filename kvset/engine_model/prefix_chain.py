"""The cached prefix a request hit, read off the parent links of the blocks an engine holds.

An engine that publishes only what it computes (vLLM's default "incremental" report mode; SGLang's
radix cache likewise) still says where each new run of blocks hangs: a store's first block names its
parent, the block before it in the request's token sequence, and the blocks of one store follow each
other. A request's first store after its lookup hangs on the last block of the prefix it found
cached, so the blocks it hit are that parent and its ancestors, back to a block without parent.

Block hashes are chained (a block's hash covers its parent's), so a key has one parent for good: the
links of the blocks known to be resident (stored and not yet removed) are kept, and those of removed
blocks too, in a bounded memory (`removed_memory`, the older half dropped when full). A removed link
is still walked: the engine hung the store on that parent, so it found the whole chain up to it
cached, whatever the events said about one copy of a hash (a hybrid model's shared pool publishes
removals of hashes its lookup still finds: measured on vLLM 0.33's HybridKVCacheCoordinator). A walk
that meets a block never stored (before kvset listened, or its store was lost) gives up: that prefix
cannot be told, and the caller counts it; or, asked for `partial`, gives the chain as far as it is
known (SGLang's radix replay, whose pages' first stores may predate kvset). The links of blocks never
removed are bounded too (`max_links`, the oldest half dropped), for a stream that sends no removals.

Pure and engine-neutral: keys are integers, roots are blocks stored without parent.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numba import njit

from kvset.core.hash_table import key_find
from kvset.engine_model.records import MODEL_HORIZON
from kvset.engine_model.u64_map import U64Map

ROOT = -1  # the parent of a block stored without one (the first block of a sequence)
MAX_CHAIN = 1 << 16  # blocks read back along one partial chain (a longer one is cut there)
_UNKNOWN, _DONE, _TOO_LONG = 0, 1, 2  # how a compiled walk ended
_Tables = tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]  # (keys, values, used) of each map


@njit(cache=True, nogil=True)
def _link(tables: _Tables, key: np.uint64) -> tuple[np.int64, int]:  # pragma: no cover - compiled
    """(parent, index of the table that knows it, or -1)."""
    for t in range(len(tables)):
        keys, vals, used = tables[t]
        j = key_find(keys, used, key)
        if j >= 0:
            return vals[j], t
    return np.int64(0), -1


@njit(cache=True, nogil=True)
def _walk(
    tables: _Tables, key: np.uint64, limit: int, out: np.ndarray
) -> tuple[int, int, bool]:  # pragma: no cover
    """Follow parents from `key`: (blocks written to out, how it ended, whether a removed link was used).
    tables: resident links (newer, older) then removed links (newer, older)."""
    n = 0
    through = False
    k = key
    while True:
        up, t = _link(tables, k)
        if t < 0:
            out[n] = k  # (the caller's, for a partial chain: its top)
            return n, _UNKNOWN, through
        through = through or t >= 2
        if n >= limit:
            return n, _TOO_LONG, through
        out[n] = k
        n += 1
        if up == ROOT:
            return n, _DONE, through
        k = np.uint64(up)


def _keys(keys: Iterable[int]) -> np.ndarray:
    if isinstance(keys, np.ndarray):
        return np.ascontiguousarray(keys, dtype=np.uint64)
    return np.fromiter((int(k) for k in keys), dtype=np.uint64)


class _Generations:
    """A bounded map: two U64Maps, the older dropped when the newer holds `bound / 2`."""

    def __init__(self, bound: int) -> None:
        self.half = max(1, bound // 2)
        self.newer, self.older = U64Map(), U64Map()

    def __len__(self) -> int:
        return len(self.newer) + len(self.older)

    def put(self, keys: np.ndarray, values: np.ndarray) -> None:
        if len(self.newer) + len(keys) > self.half:  # (sized as the last: no doubling all over again)
            self.older, self.newer = self.newer, U64Map(2 * len(self.newer))
        self.newer.put(keys, values)

    def pop(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, present = self.newer.pop(keys)
        old_values, old_present = self.older.pop(keys)
        return np.where(present, values, old_values), present | old_present

    def contains(self, keys: np.ndarray) -> np.ndarray:
        present: np.ndarray = self.newer.get(keys)[1] | self.older.get(keys)[1]
        return present

    def arrays(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return [(m._table, m._vals, m._used) for m in (self.newer, self.older)]

    def clear(self) -> None:
        self.newer, self.older = U64Map(), U64Map()


class PrefixChain:
    """Parent links of the resident blocks; `walk(key)` gives the chain from the root to `key`."""

    def __init__(self, removed_memory: int = MODEL_HORIZON, max_links: int = MODEL_HORIZON) -> None:
        self._parent = _Generations(max_links)
        self._removed = _Generations(removed_memory)  # links of removed blocks
        self.removed_memory = removed_memory
        self.max_links = max_links
        self.walks = 0
        self.through_removed = 0  # walks that went through a removed block's link
        self.broken = 0  # walks that met a block not known to be resident

    def __len__(self) -> int:
        return len(self._parent)

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes for g in (self._parent, self._removed) for m in (g.newer, g.older))

    def stored(self, keys: Iterable[int], parent: int | None) -> None:
        """One store: `keys` in chain order, the first one's parent `parent` (None: a root)."""
        chain = _keys(keys)
        if not len(chain):
            return
        parents = np.empty(len(chain), dtype=np.int64)
        parents[0] = ROOT if parent is None else np.uint64(int(parent)).astype(np.int64)
        parents[1:] = chain[:-1].view(np.int64)
        self._parent.put(chain, parents)

    def parent(self, key: int) -> int | None:
        """The parent the key's store named (None: a root, or not known)."""
        up, t = _link(self._tables(), np.uint64(int(key)))
        return None if t < 0 or up == ROOT else int(np.int64(up).astype(np.uint64))

    def removed(self, keys: Iterable[int]) -> None:
        gone = _keys(keys)
        if not len(gone):
            return
        parents, present = self._parent.pop(gone)
        if present.any():
            self._removed.put(gone[present], parents[present])

    def clear(self) -> None:
        self._parent.clear()
        self._removed.clear()

    def __contains__(self, key: int) -> bool:
        """Whether the key is known to be resident."""
        return bool(self._parent.contains(np.array([int(key)], dtype=np.uint64))[0])

    def _tables(self) -> _Tables:  # (as numba reads it: a tuple of (keys, values, used))
        return tuple(self._parent.arrays() + self._removed.arrays())

    def walk(self, key: int, limit: int = 1 << 20, partial: bool = False) -> np.ndarray | None:
        """The resident chain root .. `key` in chain order (uint64), or None where a link is unknown
        (or the chain is longer than `limit`, which only a cycle of bad keys could make); `partial`:
        the chain from the first block whose parent is unknown, instead of None."""
        self.walks += 1
        # no chain is longer than the links known (but a cycle of bad keys, cut there)
        limit = min(limit, len(self._parent) + len(self._removed) + 1)
        out = np.empty(limit + 1, dtype=np.uint64)
        n, ended, through = _walk(self._tables(), np.uint64(int(key)), limit, out)
        if ended != _DONE:
            self.broken += 1
            if not partial:
                return None
            n += ended == _UNKNOWN  # the block whose parent is unknown tops the chain
        chain = out[:n][::-1].copy()
        self.through_removed += through
        return chain

    def chain(self, key: int, limit: int = MAX_CHAIN) -> np.ndarray:
        """The chain root .. `key` as far as its links are known (a partial walk, never None)."""
        found = self.walk(key, limit, partial=True)
        assert found is not None  # a partial walk always gives a chain
        return found
