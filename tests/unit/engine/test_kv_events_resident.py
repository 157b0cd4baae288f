"""The engine's resident set: the uint64 hash set against Python's set, and its churn counters."""

from __future__ import annotations

import numpy as np
import pytest

from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.engine.resident_set import ResidentBlocks, U64Set
from kvset.rejects import RejectCounter
from tests.support.kv_values import message, stored


def keys(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def test_u64set_matches_python_set_under_random_adds_and_discards() -> None:
    rng = np.random.default_rng(7)
    table, reference = U64Set(), set()
    for step in range(400):
        # A small key space forces collisions, long probe runs and backward-shift deletions.
        batch = rng.integers(0, 2500, size=int(rng.integers(0, 300))).astype(np.uint64)
        if step % 3 == 2:
            present = table.discard(batch)
            expected = []
            for k in batch.tolist():
                expected.append(k in reference)
                reference.discard(k)
        else:
            present = table.add(batch)
            expected = []
            for k in batch.tolist():
                expected.append(k in reference)
                reference.add(k)
        assert present.tolist() == expected
        assert len(table) == len(reference)
        probe = rng.integers(0, 2500, size=64).astype(np.uint64)
        assert table.contains(probe).tolist() == [k in reference for k in probe.tolist()]


def test_u64set_full_64_bit_keys_and_growth() -> None:
    rng = np.random.default_rng(3)
    big = rng.integers(0, np.iinfo(np.uint64).max, size=50_000, dtype=np.uint64, endpoint=True)
    big[:3] = [0, np.iinfo(np.uint64).max, 1 << 63]
    table = U64Set()
    assert not table.add(big).any()
    assert len(table) == len(np.unique(big))
    assert table.contains(big).all()
    assert table.discard(big[:25_000]).all()
    assert not table.contains(big[:25_000]).any() and table.contains(big[25_000:]).all()
    table.clear()
    assert len(table) == 0 and not table.contains(big[:10]).any()


def test_resident_blocks_counts_hits_restores_and_evictions() -> None:
    blocks = ResidentBlocks()
    assert blocks.store(keys(1, 2, 3))[:2] == (0, 0)
    assert blocks.store(keys(3, 4))[:2] == (1, 0)  # 3 is resident: the engine reported a hit
    assert blocks.remove(keys(1, 2, 99)) == 2  # 99 was never seen resident
    assert len(blocks) == 2 and blocks.evictions_total == 3 and blocks.removals_not_resident == 1
    assert blocks.store(keys(1, 5))[:2] == (0, 1)  # 1 was evicted before: a larger cache would have hit
    assert (blocks.stored_total, blocks.stores_of_resident, blocks.restores_after_removal) == (7, 1, 1)
    assert blocks.peak_resident == 4
    blocks.clear()
    # After a reset a larger cache would be empty too: no re-store counts, nothing resident.
    assert len(blocks) == 0
    assert blocks.store(keys(2, 3))[:2] == (0, 0)


def test_removed_memory_is_bounded_to_two_generations() -> None:
    blocks = ResidentBlocks(removed_memory=4)  # generations of 2 keys
    for k in range(10):
        blocks.store(keys(k))
        blocks.remove(keys(k))
    # Only the most recent removals are remembered: 9 and 8 yes, 0 no.
    assert blocks.store(keys(9, 8, 0))[:2] == (0, 2)


def test_blocks_resident_before_a_gap_are_uncertain_until_stored_or_removed_again() -> None:
    blocks = ResidentBlocks()
    blocks.store(keys(1, 2, 3, 4))
    blocks.mark_uncertain()  # a gap may have hidden the removal of any of them
    assert len(blocks) == 4 and blocks.uncertain == 4
    # 1 and 2 were perhaps evicted and stored again: not evidence of a reported hit.
    assert blocks.store(keys(1, 2, 5))[:2] == (0, 0)
    assert (blocks.stores_of_resident, blocks.stores_of_uncertain) == (0, 2)
    assert blocks.uncertain == 2  # 1 and 2 are known resident now; 3 and 4 still uncertain
    assert blocks.store(keys(1, 2))[:2] == (2, 0)  # stored since the gap: a hit for sure
    assert blocks.remove(keys(3)) == 1 and blocks.uncertain == 1
    assert blocks.store(keys(3))[:2] == (0, 1)  # evicted after the gap and back: a re-store, not a hit
    assert blocks.stores_of_resident == 2
    blocks.mark_uncertain()
    blocks.mark_uncertain()  # twice: still one set of what was resident
    assert blocks.uncertain == len(blocks) == 5
    blocks.clear()
    assert blocks.uncertain == 0
    blocks.store(keys(4))
    assert blocks.store(keys(4))[:2] == (1, 0)


def test_u64set_copy_is_independent() -> None:
    table = U64Set()
    table.add(keys(1, 2, 3))
    copy = table.copy()
    table.discard(keys(1))
    assert copy.contains(keys(1, 2, 3)).all() and len(copy) == 3 and len(table) == 2


@pytest.mark.parametrize("seed", range(4))
def test_uncertain_blocks_after_many_losses_are_those_of_a_plain_set_model(seed) -> None:
    """A loss marks only what was stored since the last one (every second batch lost made each loss
    copy the whole resident set); the outcome is a plain model's: every block resident at a loss and
    neither stored nor removed since."""
    rng = np.random.default_rng(seed)
    blocks = ResidentBlocks()
    resident: set[int] = set()
    uncertain: set[int] = set()
    stores_of_uncertain = 0
    for _ in range(400):
        op = rng.integers(0, 3)
        keys = rng.choice(300, size=int(rng.integers(1, 40)), replace=False).astype(np.uint64)
        if op == 0:
            blocks.store(keys)
            stores_of_uncertain += len(uncertain & set(keys.tolist()))
            resident |= set(keys.tolist())
            uncertain -= set(keys.tolist())
        elif op == 1:
            blocks.remove(keys)
            resident -= set(keys.tolist())
            uncertain -= set(keys.tolist())
        else:
            blocks.mark_uncertain()
            uncertain = set(resident)
        assert (len(blocks), blocks.uncertain) == (len(resident), len(uncertain))
    assert blocks.stores_of_uncertain == stores_of_uncertain


def test_a_counted_store_asks_each_generation_of_the_resident_set_once(monkeypatch) -> None:
    """A store's blocks were looked up in the resident set to ask whether they were cached, then
    again to add them: four passes over a large table a store (a flood's 10,000-block stores). Now
    the adding says what was resident: the older generation is asked, the newer one added to."""
    tracker = KvEventTracker(["tcp://x:1"], [None], RejectCounter())
    tracker.published(0, message(0, [stored([1, 2, 3])]), now=0.0, at=0.0)
    passes: list[str] = []
    for name in ("contains", "add"):
        kernel = getattr(U64Set, name)

        def counted(self: U64Set, keys: np.ndarray, name: str = name, kernel=kernel) -> np.ndarray:
            passes.append(name)
            return kernel(self, keys)

        monkeypatch.setattr(U64Set, name, counted)
    tracker.published(0, message(1, [stored([3, 4, 5], parent=2)]), now=0.1, at=0.1)
    assert sorted(passes) == ["add", "contains"]
    blocks = tracker.publishers[0].groups[0]
    assert blocks.resident.contains(keys(1, 2, 3, 4, 5)).all() and len(blocks) == 5
    assert blocks.store(keys(5, 6)).resident.tolist() == [True, False]  # what was resident before


def test_a_store_that_drops_the_older_generation_says_what_was_resident_before_it() -> None:
    blocks = ResidentBlocks(max_resident=8)  # generations of 4
    blocks.store(keys(1, 2, 3))
    blocks.store(keys(4, 5))  # 1, 2, 3 now the older generation
    blocks.store(keys(6, 7, 8))  # the older dropped: 4, 5 older, 6, 7, 8 newer
    got = blocks.store(keys(1, 4, 6, 9, 10))  # drops 4, 5 first
    assert got.resident.tolist() == [False, True, True, False, False]
    assert got.already == 1  # 6 (4 was in the generation the store dropped)


def test_a_loss_asks_the_resident_set_nothing_when_nothing_left_it_since_the_last_one(monkeypatch) -> None:
    """Events lost every other batch (the flood): each loss asked the resident set which of the blocks
    stored since the last loss were still resident, two passes over its table. With no removal and
    nothing forgotten since, they all are; with a removal the set is asked as before."""
    blocks = ResidentBlocks()
    blocks.store(keys(1, 2, 3))
    blocks.mark_uncertain()
    blocks.store(keys(4, 5))
    asked: list[int] = []
    contains = U64Set.contains

    def counted(self: U64Set, batch: np.ndarray) -> np.ndarray:
        asked.append(len(batch))
        return contains(self, batch)

    monkeypatch.setattr(U64Set, "contains", counted)
    blocks.mark_uncertain()
    assert asked == [2]  # the uncertain set's older generation, as it adds 4 and 5; not the resident set
    assert blocks.uncertain == 5
    blocks.store(keys(6, 7))
    blocks.remove(keys(6))
    asked.clear()
    blocks.mark_uncertain()
    assert len(asked) == 3 and blocks.uncertain == 6  # asked: 6 was removed; 1 to 5 and 7 uncertain
    assert blocks.store(keys(7, 6))[:2] == (0, 1)  # 7 no evidence of a hit; 6 a re-store after removal
