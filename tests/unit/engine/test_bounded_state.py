"""What the KV-events source keeps per block is bounded in blocks whatever the stream: a stream that
never sends BlockRemoved (or loses them) does not grow the resident set, the parent links or the
block owners without end; what is forgotten is counted and said. The tables against Python's dict."""

from __future__ import annotations

import numpy as np
import pytest

from kvset.engine import kv_event_publisher
from kvset.engine.kv_event_health import kv_event_health
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.engine.resident_set import ResidentBlocks
from kvset.engine.stream_shape import MIN_STORES, RADIX_INSERTS, REQUEST_STEPS
from kvset.engine_model.prefix_chain import PrefixChain
from kvset.engine_model.radix_cache import RadixReplay
from kvset.engine_model.u64_map import U64Map
from kvset.rejects import RejectCounter
from tests.support.kv_values import message, removed, stored
from tests.support.sglang_fixtures import consume, messages


def keys(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def test_u64map_matches_a_dict_under_random_puts_swaps_gets_and_pops() -> None:
    rng = np.random.default_rng(3)
    table, reference = U64Map(), {}
    for step in range(300):
        batch = rng.integers(0, 3000, size=int(rng.integers(0, 400))).astype(np.uint64)
        if step % 3 == 2:
            only = int(rng.integers(0, 4))
            _, removed = table.pop(batch, only=only)
            expected = []
            for k in batch.tolist():
                expected.append(reference.get(k) == only)
                if reference.get(k) == only:
                    del reference[k]
            assert removed.tolist() == expected
        elif step % 3 == 1:  # a swap reads, key by key, what the dict held just before its put
            values = rng.integers(0, 4, size=len(batch))
            old, held = table.swap(batch, values)
            expected_old, expected_held = [], []
            for k, v in zip(batch.tolist(), values.tolist(), strict=True):
                expected_old.append(reference.get(k, -1))
                expected_held.append(k in reference)
                reference[k] = v
            assert (old.tolist(), held.tolist()) == (expected_old, expected_held)
        else:
            values = rng.integers(0, 4, size=len(batch))
            table.put(batch, values)
            reference.update(zip(batch.tolist(), values.tolist(), strict=True))
        got, present = table.get(np.arange(3000, dtype=np.uint64))
        assert len(table) == len(reference)
        assert present.sum() == len(reference)
        assert {
            k: v for k, v, p in zip(range(3000), got.tolist(), present.tolist(), strict=True) if p
        } == reference


def test_a_resident_set_without_removals_keeps_its_bound_and_counts_what_it_forgot() -> None:
    blocks = ResidentBlocks(max_resident=8)
    for k in range(100):
        blocks.store(keys(k))
    assert len(blocks) <= 8
    assert blocks.forgotten_resident + len(blocks) == 100
    # the newest are still known (a store of one is a hit report); a forgotten one is taken as new
    assert blocks.store(keys(99), hit_evidence=True)[:2] == (1, 0)
    assert blocks.store(keys(0), hit_evidence=True)[:2] == (0, 0)


def test_the_parent_links_keep_their_bound_and_the_newest_chains_still_walk() -> None:
    chain = PrefixChain(max_links=64)
    for n in range(100):  # stores of 10 blocks, each hanging on the one before: never removed
        first = 10 * n
        chain.stored(np.arange(first, first + 10, dtype=np.uint64), None if n % 2 == 0 else first - 1)
    assert len(chain) <= 64
    walked = chain.walk(999)
    assert walked is not None and walked.tolist() == list(range(980, 1000))  # its root: the store of n = 98
    assert chain.walk(5) is None  # forgotten: the chain cannot be told, and the walk says so


def test_the_health_says_resident_blocks_were_forgotten() -> None:
    tracker = KvEventTracker(["tcp://x"], [None], RejectCounter())
    for n in range(4):
        tracker.published(
            0, message(n, [stored(list(range(n * 10, n * 10 + 10)))]), now=float(n), at=float(n)
        )
        tracker.publishers[0].groups[0].resident.half = 4  # (a small bound, so that a few stores pass it)
    forgotten = tracker.publishers[0].groups[0].forgotten_resident
    assert forgotten > 0
    notes = " ".join(kv_event_health(tracker, at=4.0).notes)
    assert f"{forgotten:,} resident blocks forgotten" in notes


def test_once_the_shape_is_decided_the_other_shapes_groupings_let_go_of_their_tables() -> None:
    """Until the shape is decided every store goes to the three groupings; after, two of them are fed
    no more, and what they kept of the first stores (a flood's 10,000-block stores: tens of MiB of
    tables) is let go while the chosen one keeps its own."""
    tracker = KvEventTracker(["tcp://x"], [None], RejectCounter())
    blocks = 2_000
    for n in range(MIN_STORES + 2):
        store = stored(list(range(1 + n * blocks, 1 + (n + 1) * blocks)))
        tracker.published(0, message(n, [store]), now=float(n), at=float(n))
    publisher = tracker.publishers[0]
    assert publisher.shape.decided == REQUEST_STEPS
    fresh = RadixReplay()
    assert len(publisher.pages.chains) == 0
    assert len(publisher.radix.chains) == 0
    assert publisher.radix.queue.nbytes == fresh.queue.nbytes
    assert len(publisher.replay.chain) >= (MIN_STORES + 2) * blocks  # the chosen grouping's links kept


def test_while_the_shape_is_undecided_sglangs_radix_replay_is_not_fed() -> None:
    """A vLLM stream's first stores went to SGLang's radix replay as well (20 ms a 10,000-block store,
    most of a flood's CPU before its first figure); they are held for it, and dropped once the shape is
    another, so it never runs on them."""
    tracker = KvEventTracker(["tcp://x"], [None], RejectCounter())
    publisher = tracker.publishers[0]
    for n in range(MIN_STORES + 2):
        store = stored(list(range(1 + n * 100, 1 + (n + 1) * 100)))
        tracker.published(0, message(n, [store]), now=float(n), at=float(n))
        if n == MIN_STORES - 2:
            assert publisher.shape.decided is None
            held = publisher.radix_held
            assert held is not None and len(held.calls) == 2 * (MIN_STORES - 1)  # a batch, a store each
            assert len(publisher.radix.chains) == 0 and publisher.radix.counts.inserts == 0
    assert publisher.shape.decided == REQUEST_STEPS and publisher.radix_held is None
    assert len(publisher.radix.chains) == 0 and publisher.radix.counts.inserts == 0


def test_a_stream_that_stays_undecided_holds_a_bounded_number_of_calls(monkeypatch) -> None:
    """Removals alone never decide a shape: past the bound the held calls are made and the replay is
    fed as events come."""
    monkeypatch.setattr(kv_event_publisher, "RADIX_HELD_CALLS", 8)
    tracker = KvEventTracker(["tcp://x"], [None], RejectCounter())
    for n in range(20):
        tracker.published(0, message(n, [removed([n])]), now=float(n), at=float(n))
    publisher = tracker.publishers[0]
    assert publisher.shape.decided is None and publisher.radix_held is None


@pytest.mark.parametrize("name", ["coalesced", "per-page"])
def test_sglangs_figures_are_the_same_whether_its_first_inserts_were_held_or_fed(monkeypatch, name) -> None:
    held = consume(messages(name))
    monkeypatch.setattr(kv_event_publisher, "RADIX_HELD_CALLS", 3)  # fed from the second batch on
    fed = consume(messages(name))
    assert (
        held.tracker.publishers[0].shape.decided == fed.tracker.publishers[0].shape.decided == RADIX_INSERTS
    )
    assert held.accesses == fed.accesses > 0
    assert held.model.counts == fed.model.counts
