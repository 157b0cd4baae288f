"""SGLang's `--radix-eviction-policy lfu` as a stack: pinned pages on top, then the unlocked pages by
(hit count, last access), the most kept first.

SGLang 0.5.23's LFUStrategy evicts the unlocked leaf with the smallest (node.hit_count,
node.last_access_time). A node's hit count starts at 1 when an insert creates it and grows by one for
each later request whose insert passes through it (once per request: `inserted_len`); a split node's
halves both keep it. A child is never counted more, nor touched later, than its parent, so the leaf
with the smallest key is the unlocked page with the smallest key anywhere in the tree: eviction is by
a priority over pages, and a page keeps its key while it waits (only a lookup through it changes it,
and that is the query itself). A page with a larger key is never evicted before it, so for a page b
waiting with key k, the pages a pool must hold before it are those pinned and those unlocked with a
key above k, and

    D = pinned(t) + (rank of b among the unlocked pages, counted from the largest key) <= C

gives its hit or miss at every pool size in one pass, with one difference from vLLM's free queue
(kvset.engine_model.free_queue): a page pinned while b waits may rejoin the unlocked pages below b
(a new page, counted once), so that number can fall, and a pool that had to evict b while it was
pinned is not seen at the query; and a page evicted while b was pinned may keep a key above b's.
With requests that overlap, D is an estimate (the pages the engine evicted, its BlockRemoved, leave
the ranking: `removed`); the validation on SGLang's own radix cache measures it. The counts are read off the events, which are
SGLang's own at its pool size: a request's lookup adds one to each page of its prompt path, a page
it stores (new, or computed again after an eviction) starts at 1, as SGLang's new node does.

`LfuQueue.run(ops, keys)` has FreeQueue's operations and results: QUERY (rank and pinned count, no
change), PIN (a request holds the page), RELEASE (at zero holders the page rejoins the unlocked set
with its count and a newer access time); `counted(keys)` and `created(keys)` change the counts.
The unlocked pages are a sortedcontainers.SortedList of keys (count << 40 | access order); beyond
`horizon` of them, the one with the smallest key is forgotten. Pure: values in, values out.
"""

from __future__ import annotations

import numpy as np
from sortedcontainers import SortedList  # type: ignore[import-untyped]

from kvset.engine_model.free_queue import ABSENT, PIN, PINNED, QUERY, RELEASE
from kvset.engine_model.records import MODEL_HORIZON

_ORDER_BITS = 40  # access order below, the hit count above: the key compares as (count, order)


class LfuQueue:
    """SGLang's lfu order of the unlocked pages, with the pinned ones: ranks for every pool at once."""

    def __init__(self, horizon: int = MODEL_HORIZON) -> None:
        if horizon < 1:
            raise ValueError("horizon must be positive")
        self.horizon = int(horizon)
        self._unlocked: SortedList = SortedList()
        self._key: dict[int, int] = {}  # an unlocked page -> its key in _unlocked
        self._page: dict[int, int] = {}  # ... and back
        self._holders: dict[int, int] = {}  # a pinned page -> its holders
        self._count: dict[int, int] = {}  # a page's hit count (SGLang's node.hit_count)
        self._order = 0

    @property
    def pinned(self) -> int:
        return len(self._holders)

    @property
    def queued(self) -> int:
        return len(self._unlocked)

    def counted(self, keys: np.ndarray) -> None:
        """A request's insert passed through these pages: each one's hit count grows by one."""
        for k in keys.tolist():
            self._count[k] = self._count.get(k, 0) + 1

    def created(self, keys: np.ndarray) -> None:
        """These pages were stored (a new node, or one computed again): their hit count is 1."""
        for k in keys.tolist():
            self._count[k] = 1

    def removed(self, keys: np.ndarray) -> None:
        """The engine evicted these pages (its BlockRemoved): they no longer hold a place above the
        pages it kept. Under lru an evicted page is older than every page still cached, so it never
        counts; under lfu an old page with many hits ranks above newer ones, so once the engine has
        evicted it, counting it would lengthen the distance of every page below it."""
        for k in keys.tolist():
            key = self._key.pop(k, None)
            if key is not None:
                self._unlocked.remove(key)
                del self._page[key]
            self._count.pop(k, None)

    def run(self, ops: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """FreeQueue.run's operations and results (position 1: the page the pool keeps longest)."""
        if len(ops) != len(keys):
            raise ValueError("ops and keys differ in length")
        pos = np.zeros(len(ops), dtype=np.int64)
        pinned = np.zeros(len(ops), dtype=np.int64)
        forgot: list[int] = []
        unlocked, key_of, holders = self._unlocked, self._key, self._holders
        for i, (op, k) in enumerate(zip(ops.tolist(), keys.tolist(), strict=True)):
            if op == QUERY:
                pinned[i] = len(holders)
                if k in holders:
                    pos[i] = PINNED
                elif k in key_of:
                    pos[i] = len(unlocked) - unlocked.bisect_left(key_of[k])
                else:
                    pos[i] = ABSENT
            elif op == PIN:
                if k in key_of:
                    key = key_of.pop(k)
                    unlocked.remove(key)
                    del self._page[key]
                holders[k] = holders.get(k, 0) + 1
            elif op == RELEASE:
                held = holders.get(k, 0) - 1
                if held > 0:
                    holders[k] = held
                    continue
                holders.pop(k, None)
                if k in key_of:  # released without a pin: it only moves
                    del self._page[key_of[k]]
                    unlocked.remove(key_of.pop(k))
                self._order += 1
                key = (self._count.get(k, 1) << _ORDER_BITS) | self._order
                key_of[k], self._page[key] = key, k
                unlocked.add(key)
                if len(unlocked) > self.horizon:
                    forgot.append(self._forget_smallest())
        return pos, pinned, np.asarray(forgot, dtype=np.uint64)

    def _forget_smallest(self) -> int:
        key = self._unlocked.pop(0)
        page = self._page.pop(key)
        del self._key[page]
        self._count.pop(page, None)
        return page
