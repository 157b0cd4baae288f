"""The lfu stack (kvset.engine_model.radix_lfu) == a naive pool of C pages that evicts, when it needs
room, the unlocked page with the smallest (hit count, last release), when the stack is told the pages
the pool evicted (as the engine's BlockRemoved tell it): lfu is no stack algorithm (a page evicted
with many hits would still rank above newer ones), so the ranking holds at the engine's own pool."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.engine_model.free_queue import ABSENT, PIN, PINNED, QUERY, RELEASE
from kvset.engine_model.radix_lfu import LfuQueue


class NaivePool:
    """C pages; a page pinned joins it (evicting the lowest unlocked ones first); counts as given."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.resident: set[int] = set()
        self.holders: dict[int, int] = {}
        self.key: dict[int, tuple[int, int]] = {}  # unlocked page -> (count, release order)

    def pin(self, page: int) -> list[int]:
        """Pin the page; returns the pages evicted to make room."""
        evicted = []
        if page not in self.resident:
            while len(self.resident) >= self.capacity:
                victim = min(self.key, key=self.key.__getitem__)
                self.resident.discard(victim)
                del self.key[victim]
                evicted.append(victim)
            self.resident.add(page)
        self.key.pop(page, None)
        self.holders[page] = self.holders.get(page, 0) + 1
        return evicted

    def release(self, page: int, count: int, order: int) -> None:
        self.holders[page] -= 1
        if not self.holders[page]:
            del self.holders[page]
            self.key[page] = (count, order)


requests = st.lists(
    st.tuples(st.lists(st.integers(0, 30), min_size=1, max_size=6, unique=True), st.booleans()),
    min_size=1,
    max_size=40,
)


def _one(op: int, page: int) -> tuple[np.ndarray, np.ndarray]:
    return np.array([op], dtype=np.int8), np.array([page], dtype=np.uint64)


@settings(max_examples=400, deadline=None)
@given(requests, st.integers(0, 2**32 - 1), st.sampled_from([12, 15, 20, 30]))
def test_ranks_equal_a_naive_lfu_pool_told_its_evictions(reqs, seed, capacity):
    """Each request looks its pages up (a hit if the pool holds them), pins them, counts them (a lookup)
    or creates them (a store), and later releases them, two requests overlapping at most."""
    rng = np.random.default_rng(seed)
    queue, pool = LfuQueue(), NaivePool(capacity)
    counts: dict[int, int] = {}
    order = 0
    running: list[list[int]] = []
    for pages, lookup in reqs:
        keys = np.asarray(pages, dtype=np.uint64)
        pos, pinned, _ = queue.run(np.full(len(keys), QUERY, dtype=np.int8), keys)
        for page, p, n in zip(pages, pos.tolist(), pinned.tolist(), strict=True):
            hit = p == PINNED or (p != ABSENT and n + p <= capacity)
            assert (page in pool.resident) == hit, (page, p, n)
        for page in pages:
            evicted = pool.pin(page)
            queue.removed(np.asarray(evicted, dtype=np.uint64))
            queue.run(*_one(PIN, page))
        if lookup:
            queue.counted(keys)
            for page in pages:
                counts[page] = counts.get(page, 0) + 1
        else:
            queue.created(keys)
            counts.update(dict.fromkeys(pages, 1))
        running.append(pages)
        if len(running) > 1 or rng.random() < 0.5:
            done = running.pop(0)
            queue.run(np.full(len(done), RELEASE, dtype=np.int8), np.asarray(done[::-1], dtype=np.uint64))
            for page in done[::-1]:
                order += 1
                pool.release(page, counts.get(page, 1), order)


def test_a_page_counted_more_outlasts_a_newer_page_counted_less():
    queue = LfuQueue()
    hot, cold = np.array([1], dtype=np.uint64), np.array([2], dtype=np.uint64)
    for keys, times in ((hot, 3), (cold, 1)):
        for _ in range(times):
            queue.run(np.array([PIN], dtype=np.int8), keys)
            queue.counted(keys)
            queue.run(np.array([RELEASE], dtype=np.int8), keys)
    pos, _, _ = queue.run(np.array([QUERY, QUERY], dtype=np.int8), np.array([1, 2], dtype=np.uint64))
    assert pos.tolist() == [1, 2]  # the hot page is kept longest though the cold one is newer
