"""SGLang's radix cache replayed on its own events (kvset.engine_model.radix_cache), checked against what
SGLang 0.5.23's real RadixCache counted in the recorded runs (tests/fixtures/sglang_kv_events)."""

from __future__ import annotations

import numpy as np

from kvset.engine_model.radix_cache import MODEL_NAME, RadixReplay
from tests.support.sglang_fixtures import consume, messages, truth


def test_prediction_at_sglangs_pool_is_within_two_points_of_its_own_cached_tokens():
    for name in ("coalesced", "per-page"):
        t = truth(name)
        assert 0.3 <= t["locked_share_median"] <= 0.9  # running requests lock much of the pool
        consumed = consume(messages(name))
        model = consumed.model
        assert model.name == MODEL_NAME
        predicted = model.at(t["pool_tokens"] // t["page_size"]).hit_rate
        assert predicted is not None and abs(predicted - t["hit_rate"]) <= 0.02, (
            name,
            predicted,
            t["hit_rate"],
        )
        # locks matter here: with nothing pinned the same pool would hit more
        at = model.at(t["pool_tokens"] // t["page_size"])
        assert at.pinned > 0.01


def test_the_curve_rises_with_the_pool_and_a_huge_pool_hits_every_prefix_page():
    consumed = consume(messages("coalesced"))
    t = truth("coalesced")
    rates = [consumed.model.at(c).hit_rate or 0.0 for c in (100, 400, 750, 2000, 1 << 20)]
    assert rates == sorted(rates)
    # in an unbounded pool every page read off a parent chain is a hit: the prefix tokens over the query
    # tokens (partial last pages included)
    everything = consumed.model.at(1 << 20)
    prefix_tokens = consumed.model.counts["prefix_pages"] * t["page_size"]
    assert everything.hit_tokens >= prefix_tokens


def _pages(*keys: int) -> np.ndarray:
    return np.array(keys, dtype=np.uint64)


def test_a_locked_path_is_never_evicted_and_the_leaf_goes_before_its_parent():
    replay = RadixReplay()
    tokens = np.full(3, 16, dtype=np.int64)
    replay.begin_batch(0.0)
    replay.stored(_pages(1, 2, 3), tokens, None, 16)  # request A's prefill
    replay.begin_batch(1.0)
    replay.begin_batch(2.0)
    replay.begin_batch(3.0)
    replay.stored(_pages(4), np.zeros(1, np.int64), 3, 16)  # A's output: it finishes
    replay.begin_batch(4.0)
    # B matches A's first two pages (its first store's parent is page 2) and computes page 9
    replay.stored(_pages(9), np.full(1, 16, dtype=np.int64), 2, 16)
    replay.flush()
    parts = replay.take_model()
    assert len(parts) == 2
    distance, unpinned, cause, query_tokens, _ = parts[1]
    # A released 4 (its leaf) first and 1 (the root) last: 1 is the newest, then 2; but 1, 2 and 3 are
    # one radix node (A's insert) until B's lookup splits it, and SGLang evicts a node whole, so page 1
    # goes with page 2 (page 2 needs room beside page 1, which B now locks)
    assert distance[:2].tolist() == [2, 2]
    assert unpinned[:2].tolist() == [1, 1]
    assert cause[2] != 0 and query_tokens.tolist() == [16, 16, 16]
    accesses = replay.take_accesses()
    assert [a[0].tolist() for a in accesses] == [[1, 2, 3, 4], [1, 2, 9]]


def test_pages_recomputed_in_one_insert_are_one_node_again_whatever_their_first_life_was():
    replay = RadixReplay()
    page = np.full(1, 16, dtype=np.int64)
    replay.begin_batch(0.0)
    replay.stored(_pages(1, 2), np.full(2, 16, dtype=np.int64), None, 16)  # A's prefill: node [1, 2]
    replay.begin_batch(1.0)
    replay.stored(_pages(3), np.zeros(1, np.int64), 2, 16)  # A's output: node [3]
    replay.begin_batch(2.0)
    # SGLang evicted all of it; B's prompt is the same history, recomputed and inserted at once: one
    # new node [1, 2, 3], no parent (SGLang inserts the unmatched part of a key as one node)
    replay.stored(_pages(1, 2, 3), np.full(3, 16, dtype=np.int64), None, 16)
    replay.begin_batch(3.0)
    replay.stored(_pages(4), np.zeros(1, np.int64), 3, 16)  # B's output: it finishes
    replay.begin_batch(4.0)
    replay.stored(_pages(9), page, 3, 16)  # C matches all three pages and computes page 9
    replay.flush()
    distance, _, _, _, _ = replay.take_model()[-1]
    # B released 4, 3, 2, 1 (1 the newest): page 3 needs 3 pages beside it; node [1, 2, 3] is evicted
    # whole, so pages 1 and 2 go with page 3, not with page 2 as A's node [1, 2] would have
    assert distance[:3].tolist() == [3, 3, 3]
