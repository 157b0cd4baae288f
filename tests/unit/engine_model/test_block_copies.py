"""vLLM's second copies of a cached block: the replay's keys for them, and the resident set's count."""

from __future__ import annotations

import numpy as np

from kvset.engine_model.block_copies import BlockCopies
from kvset.engine_model.free_queue import ABSENT, PIN, QUERY, RELEASE, FreeQueue

K = np.uint64


def test_a_block_computed_again_is_a_new_copy_and_the_old_one_keeps_its_place_in_the_free_queue():
    copies, queue = BlockCopies(), FreeQueue()
    old = np.array([1, 2, 3], K)
    queue.run(np.full(3, PIN, np.int8), old)
    queue.run(np.full(3, RELEASE, np.int8), old[::-1])  # a finished request's blocks, queued
    again = copies.fresh(np.array([2, 3, 4], K), np.array([True, True, False]))  # 2, 3 still cached
    assert again[2] == 4 and len({*again[:2].tolist(), 1, 2, 3, 4}) == 6
    assert copies.current(np.array([1, 2, 3, 4], K)).tolist() == [1, *again.tolist()]
    queue.run(np.full(3, PIN, np.int8), again)
    assert queue.queued == 3 and queue.pinned == 3  # vLLM's pool: the old copies still queued
    later = copies.fresh(np.array([2], K), np.array([True]))  # computed a third time
    assert later[0] not in again and copies.current(np.array([2], K))[0] == later[0]
    pos, _, _ = queue.run(np.full(1, QUERY, np.int8), np.array([later[0]], K))
    assert pos[0] == ABSENT  # (a new key, until pinned)


def test_a_hash_stays_resident_until_its_last_copy_is_removed():
    copies = BlockCopies()
    keys = np.array([1, 2, 3], K)
    copies.stored(keys, np.array([True, True, False]), report=False)  # 1 and 2 computed again
    copies.stored(keys, np.array([True, True, True]), report=True)  # a hit report: no copy
    assert copies.removed(np.array([1, 3], K)).tolist() == [3]  # 1 keeps its other copy
    assert copies.removed(np.array([1, 2], K)).tolist() == [1]
    assert copies.removed(np.array([2], K)).tolist() == [2]
