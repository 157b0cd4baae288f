"""Each page's parent, as the stores that put it in the cache said, and a chain read back from them.

An engine that publishes no hit reports (SGLang; vLLM in its default mode) shows a request's cached
prefix only as the parent of the first page the request stores. Every page's own parent is known
from its first store, so the prefix is the chain of parents from that page back to the root, as
far as the pages are remembered (the oldest forgotten first, beyond `memory`).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

PARENT_MEMORY = 1 << 21  # pages whose parent is remembered
MAX_CHAIN = 1 << 16  # pages read back along one chain


class ParentChains:
    def __init__(self, memory: int = PARENT_MEMORY, max_chain: int = MAX_CHAIN) -> None:
        self._parent: OrderedDict[int, int] = OrderedDict()
        self.memory = memory
        self.max_chain = max_chain
        self.cut = 0  # chains longer than max_chain, cut there

    def stored(self, keys: np.ndarray, parent: int | None) -> None:
        """A store of `keys` (in chain order) whose first page's parent is `parent` (None: the root,
        or not said)."""
        if parent is not None:
            self._remember(int(keys[0]), parent)
        for a, b in zip(keys[:-1].tolist(), keys[1:].tolist(), strict=True):
            self._remember(b, a)

    def parent(self, page: int) -> int | None:
        return self._parent.get(page)

    def _remember(self, page: int, parent: int) -> None:
        self._parent[page] = parent
        self._parent.move_to_end(page)
        if len(self._parent) > self.memory:
            self._parent.popitem(last=False)

    def chain(self, last: int) -> np.ndarray:
        """The pages from the root of `last`'s chain to `last`, as far as their parents are known."""
        out, seen, page = [last], {last}, last
        while True:
            parent = self._parent.get(page)
            if parent is None or parent in seen:
                break
            if len(out) >= self.max_chain:
                self.cut += 1
                break
            out.append(parent)
            seen.add(parent)
            page = parent
        return np.array(out[::-1], dtype=np.uint64)

    def clear(self) -> None:
        self._parent.clear()
