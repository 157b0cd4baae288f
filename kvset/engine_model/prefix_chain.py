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

ROOT = -1  # the parent of a block stored without one (the first block of a sequence)
MAX_CHAIN = 1 << 16  # blocks read back along one partial chain (a longer one is cut there)


class PrefixChain:
    """Parent links of the resident blocks; `walk(key)` gives the chain from the root to `key`."""

    def __init__(self, removed_memory: int = 1 << 21, max_links: int = 1 << 23) -> None:
        self._parent: dict[int, int] = {}
        self._removed: dict[int, int] = {}  # links of removed blocks, oldest first
        self.removed_memory = removed_memory
        self.max_links = max_links
        self.walks = 0
        self.through_removed = 0  # walks that went through a removed block's link
        self.broken = 0  # walks that met a block not known to be resident

    def __len__(self) -> int:
        return len(self._parent)

    def stored(self, keys: Iterable[int], parent: int | None) -> None:
        """One store: `keys` in chain order, the first one's parent `parent` (None: a root)."""
        previous = ROOT if parent is None else int(parent)
        for key in keys:
            k = int(key)
            self._parent[k] = previous
            previous = k
        if len(self._parent) > self.max_links:  # no removals come: forget the oldest half
            for key in list(self._parent)[: len(self._parent) // 2]:
                del self._parent[key]

    def parent(self, key: int) -> int | None:
        """The parent the key's store named (None: a root, or not known)."""
        up = self._parent.get(int(key), self._removed.get(int(key)))
        return None if up is None or up == ROOT else up

    def removed(self, keys: Iterable[int]) -> None:
        for key in keys:
            up = self._parent.pop(int(key), None)
            if up is not None:
                self._removed[int(key)] = up
        if len(self._removed) > self.removed_memory:
            for key in list(self._removed)[: len(self._removed) // 2]:
                del self._removed[key]

    def clear(self) -> None:
        self._parent.clear()
        self._removed.clear()

    def __contains__(self, key: int) -> bool:
        """Whether the key is known to be resident."""
        return int(key) in self._parent

    def walk(self, key: int, limit: int = 1 << 20, partial: bool = False) -> np.ndarray | None:
        """The resident chain root .. `key` in chain order (uint64), or None where a link is unknown
        (or the chain is longer than `limit`, which only a cycle of bad keys could make); `partial`:
        the chain from the first block whose parent is unknown, instead of None."""
        self.walks += 1
        out: list[int] = []
        k = int(key)
        parent, removed = self._parent, self._removed
        through = False
        while k != ROOT:
            up = parent.get(k)
            if up is None:
                up = removed.get(k)
                through = through or up is not None
            if up is None or len(out) >= limit:
                self.broken += 1
                if not partial:
                    return None
                if up is None:
                    out.append(k)  # known to the caller (the parent its store named): the chain's top
                break
            out.append(k)
            k = up
        out.reverse()
        self.through_removed += through
        return np.array(out, dtype=np.uint64)

    def chain(self, key: int, limit: int = MAX_CHAIN) -> np.ndarray:
        """The chain root .. `key` as far as its links are known (a partial walk, never None)."""
        found = self.walk(key, limit, partial=True)
        assert found is not None  # a partial walk always gives a chain
        return found
