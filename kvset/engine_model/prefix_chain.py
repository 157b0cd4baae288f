"""The cached prefix a request hit, read off the parent links of the blocks an engine holds.

An engine that publishes only what it computes (vLLM's default "incremental" report mode; SGLang's
radix cache likewise) still says where each new run of blocks hangs: a store's first block names its
parent, the block before it in the request's token sequence, and the blocks of one store follow each
other. A request's first store after its lookup hangs on the last block of the prefix it found
cached, so the blocks it hit are that parent and its ancestors, back to a block without parent.

Block hashes are chained (a block's hash covers its parent's), so a key has one parent for as long
as it lives; the links are kept for the blocks known to be resident (stored and not yet removed),
which is all a lookup can have hit. A walk that meets a block not known (stored before kvset
listened, or its store was lost) gives up: that prefix cannot be told, and the caller counts it.

Pure and engine-neutral: keys are integers, roots are blocks stored without parent.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

ROOT = -1  # the parent of a block stored without one (the first block of a sequence)


class PrefixChain:
    """Parent links of the resident blocks; `walk(key)` gives the chain from the root to `key`."""

    def __init__(self) -> None:
        self._parent: dict[int, int] = {}
        self.walks = 0
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

    def removed(self, keys: Iterable[int]) -> None:
        for key in keys:
            self._parent.pop(int(key), None)

    def clear(self) -> None:
        self._parent.clear()

    def __contains__(self, key: int) -> bool:
        return int(key) in self._parent

    def walk(self, key: int, limit: int = 1 << 20) -> np.ndarray | None:
        """The resident chain root .. `key` in chain order (uint64), or None where a link is unknown
        (or the chain is longer than `limit`, which only a cycle of bad keys could make)."""
        self.walks += 1
        out: list[int] = []
        k = int(key)
        parent = self._parent
        while k != ROOT:
            up = parent.get(k)
            if up is None or len(out) >= limit:
                self.broken += 1
                return None
            out.append(k)
            k = up
        out.reverse()
        return np.array(out, dtype=np.uint64)
