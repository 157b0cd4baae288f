"""Stream shapes on real bytes from SGLang 0.5.23's own ZmqEventPublisher (tests/fixtures/sglang_kv_events):
every page the publisher sent is an access, whatever the shape, and the shape found is said."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from kvset.engine.kv_event_health import kv_event_health
from kvset.engine.stream_shape import ONE_EVENT_PER_PAGE, RADIX_INSERTS, REQUEST_STEPS, StreamShape
from kvset.engine_model.replay import RequestReplay
from tests.support.sglang_fixtures import consume, messages, truth


def _published_pages(name: str) -> int:
    """Pages in the BlockStored events of the recorded stream, counted from the raw msgpack."""
    pages = 0
    for _, frames in messages(name):
        for event in msgspec.msgpack.decode(frames[2])[1]:
            if event["type"] == "BlockStored":
                pages += len(event["block_hashes"])
    return pages


def test_one_event_per_page_with_hit_reports_keeps_every_page_the_publisher_sent():
    # each page its own BlockStored, the pages a lookup matched re-reported without parent
    published = _published_pages("per-page-hits")
    assert published == truth("per-page-hits")["published_pages"]
    consumed = consume(messages("per-page-hits"))
    publisher = consumed.tracker.publishers[0]
    assert publisher.shape.decided == ONE_EVENT_PER_PAGE and consumed.tracker.hits_reported
    assert consumed.accesses == published and not consumed.rejects
    health = kv_event_health(consumed.tracker, 0.0)
    assert dict(health.details)["stream shape"].startswith("one event per page, hit reports present")
    assert any("one event per page" in note for note in health.notes)


def test_the_vllm_grouping_alone_would_lose_most_of_that_stream():
    # what kvset did before shapes were told apart: the loss the shape detection exists for
    replay = RequestReplay()
    resident: set[int] = set()
    dec = msgspec.msgpack.Decoder()
    for ts, frames in messages("per-page-hits"):
        replay.begin_batch(ts)
        for event in dec.decode(frames[2])[1]:
            if event["type"] != "BlockStored":
                continue
            keys = np.array(event["block_hashes"], dtype=np.uint64)
            cached = all(int(k) in resident for k in keys)
            resident.update(int(k) for k in keys)
            replay.stored(keys, np.full(len(keys), 16), event.get("parent_block_hash"), cached)
    replay.flush()
    kept = sum(len(k) for k, _, _ in replay.take_accesses())
    assert kept < 0.8 * _published_pages("per-page-hits")


def test_sglang_streams_are_radix_inserts_and_every_cached_page_is_read_off_the_parent_chain():
    for name in ("coalesced", "per-page"):
        t = truth(name)
        consumed = consume(messages(name))
        publisher = consumed.tracker.publishers[0]
        assert publisher.shape.decided == RADIX_INSERTS, name
        assert not consumed.tracker.hits_reported
        counts = consumed.model.counts
        # SGLang's own count of cached tokens, page for page, and every stored page kept
        assert counts["prefix_pages"] * t["page_size"] == t["cached_tokens"], name
        assert consumed.accesses == counts["prefix_pages"] + _published_pages(name), name
        assert counts["requests"] == t["requests"], name
        detail = dict(kv_event_health(consumed.tracker, 0.0).details)["stream shape"]
        assert detail.startswith("radix inserts, store-only") and "signed 64-bit hashes" in detail


def test_shape_is_undecided_until_enough_stores_and_request_steps_for_multi_block_stores():
    shape = StreamShape()
    shape.begin_batch(0)
    for i in range(10):
        shape.stored(4, None if i == 0 else 100 + i, 100 + i, 104 + i)
    assert shape.shape() is None
    assert shape.shape(final=True) == REQUEST_STEPS
    assert "request steps" in shape.describe(hits_reported=False)


@pytest.mark.parametrize("topic_frame", [True, False])
def test_sglangs_replay_router_recovers_a_dropped_batch(topic_frame):
    """0.5.23 replies with the topic frame; older SGLang releases left it out."""
    from kvset.engine.kv_event_sequence import AskReplay
    from kvset.engine.kv_event_tracker import KvEventTracker
    from kvset.engine_model import EngineModel
    from kvset.rejects import RejectCounter

    live = messages("coalesced")
    replies = [frames for _, frames in messages("replay-coalesced")]
    # SGLang 0.5.23's ROUTER answers with the topic frame: ["", topic, seq, payload], then the end marker
    assert all(len(r) == 4 and r[0] == b"" for r in replies)
    if not topic_frame:
        replies = [[r[0], *r[2:]] for r in replies]
    replayed = [int.from_bytes(r[-2], "big") for r in replies[:-1]]
    dropped = replayed[1]
    assert replayed == [dropped - 1, dropped, dropped + 1] == list(range(len(live) - 3, len(live)))
    full = consume(live)

    rejects = RejectCounter()
    tracker = KvEventTracker(["sglang"], ["replay"], rejects)
    model = EngineModel()
    asked: list[int] = []
    t = 0.0
    for i, (t, frames) in enumerate(live):
        if i == dropped:
            continue
        for step in tracker.published(0, frames, t, t):
            if isinstance(step, AskReplay):
                asked.append(step.start)
                for reply in replies:
                    tracker.replay_reply(0, reply, t, t)
    accesses = 0
    for final in (False, True):
        update = tracker.take(t + 10, final=final)
        accesses += 0 if update.accesses is None else len(update.accesses.keys)
        if update.engine_model is not None:
            model.add(0, update.engine_model)
    sequence = tracker.publishers[0].sequence
    assert asked == [dropped] and sequence.recovered == 1 and sequence.lost == 0
    assert not rejects
    # accesses are handed out per take; the full run's total is the reference
    assert tracker.accesses == full.tracker.accesses
    assert model.counts["prefix_pages"] == full.model.counts["prefix_pages"]
