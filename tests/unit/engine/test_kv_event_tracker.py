"""What KV events mean, on plain values: accesses, KV cache groups, media, hit evidence, health."""

from __future__ import annotations

import numpy as np

from kvset.engine.kv_event_health import HITS_REPORTED_NOTE, MISSES_ONLY_NOTE, kv_event_health
from kvset.engine.kv_event_sequence import AskReplay
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.rejects import RejectCounter
from kvset.units import StreamUnits
from tests.support.kv_values import END_OF_REPLAY, cleared, message, removed, replayed, stored

ADDRESS = "tcp://127.0.0.1:5557"


def tracker(replay: str | None = None, **kwargs) -> KvEventTracker:
    return KvEventTracker([ADDRESS], [replay], RejectCounter(), **kwargs)


class Feed:
    """Publishes numbered batches into a tracker, as its source would after reading its socket."""

    def __init__(self, t: KvEventTracker) -> None:
        self.t = t
        self.seq = 0

    def __call__(self, *events, ts: float = 1.0, rank: int = 0) -> list:
        steps = self.t.published(0, message(self.seq, list(events), ts, rank), now=0.0, at=100.0)
        self.seq += 1
        return steps

    def skip(self, n: int = 1) -> None:
        self.seq += n


QUIET = 100.0 + 2.0  # the publisher has been quiet long enough: its requests are finished


def accessed(t: KvEventTracker) -> list[int]:
    batch = t.take(at=QUIET).accesses
    return [] if batch is None else batch.keys.tolist()


def detail(t: KvEventTracker, key: str) -> str:
    return dict(kv_event_health(t, at=100.0).details)[key]


def test_a_request_is_its_chained_stores_handed_out_once_finished_with_its_tokens() -> None:
    t = tracker()
    feed = Feed(t)
    feed(stored([1, 2, 3], block_size=16), ts=10.0)  # a request with no cached prefix: a new chain
    feed(
        stored([4], block_size=16, parent=3),
        stored([5, 6], block_size=16, token_ids=list(range(20))),
        ts=11.5,
    )
    assert t.take(at=100.0).accesses is None  # still running: it may store more
    update = t.take(at=QUIET)
    batch = update.accesses
    assert batch is not None
    assert batch.keys.tolist() == [1, 2, 3, 4, 5, 6]
    assert batch.request_starts.tolist() == [0, 4]  # 4 chains onto 3: the same request
    assert batch.tokens.tolist() == [16, 16, 16, 16, 16, 4]  # the last block of 20 tokens is partial
    assert np.broadcast_to(batch.timestamps, (6,)).tolist() == [11.5] * 6  # when they finished
    assert batch.block_size == 16
    assert update.engine is not None and update.engine.resident_blocks == 6 and update.engine.at == QUIET
    assert t.take(at=QUIET + 1).accesses is None  # handed out once


def test_the_first_store_decides_the_streams_block_size_and_other_sizes_are_refused() -> None:
    t = tracker(block_size=32)  # --block-size: only for events that do not say theirs
    feed = Feed(t)
    feed(stored([1], block_size=16), stored([2], block_size=32), stored([3, 4], block_size=16))
    update = t.take(at=QUIET)
    assert update.units == StreamUnits(16, "event")
    assert update.accesses.keys.tolist() == [1, 3, 4] and update.accesses.block_size == 16
    (refused,) = t.rejects.summary()
    assert refused.count == 1 and "another block size than the stream's 16 tokens" in refused.reason
    assert update.engine.block_size == 16


def test_events_without_a_block_size_take_the_flag_then_vllms_default() -> None:
    for given, units in ((32, StreamUnits(32, "flag")), (None, StreamUnits(16, "default"))):
        t = tracker(block_size=given)
        Feed(t)(stored([1, 2], block_size=None, token_ids=[]))  # older vLLM, SGLang: no block_size
        update = t.take(at=QUIET)
        assert update.units == units and update.accesses.tokens.tolist() == [units.block_size] * 2
    t = tracker(block_size=32)  # token_ids over the blocks say it: the events' own
    Feed(t)(stored([1, 2], block_size=None, token_ids=list(range(128))))
    assert t.take(at=QUIET).units == StreamUnits(64, "event")


def test_the_full_attention_group_is_counted_when_the_events_name_the_kinds() -> None:
    t = tracker()
    feed = Feed(t)
    feed(
        stored([10, 11], group_idx=0, spec_kind="sliding_window"),
        stored([1, 2], group_idx=1, spec_kind="full_attention"),
    )
    feed(
        stored([12], group_idx=0, spec_kind="sliding_window"),
        stored([3], group_idx=1, spec_kind="full_attention"),
    )
    assert accessed(t) == [1, 2, 3]
    assert detail(t, "KV cache group") == "1 (full_attention); ignored: 2 events, 3 stored blocks of group 0"


def test_without_kinds_the_first_group_seen_is_counted_and_a_note_says_so() -> None:
    t = tracker()
    feed = Feed(t)
    feed(stored([1, 2], group_idx=0), stored([1, 2], group_idx=1))  # a hybrid model: same hashes per group
    feed(stored([1, 2], group_idx=1))
    assert accessed(t) == [1, 2]
    health = kv_event_health(t, at=100.0)
    assert health.reports_hits is False  # group 1's copies are not hits in group 0
    assert any(
        n.startswith("several KV cache groups (a hybrid model): the curve is group 0's")
        and "4 stored blocks of group 1 outside the curve" in n
        for n in health.notes
    )


def test_a_full_attention_group_that_shows_up_later_takes_over() -> None:
    t = tracker()
    feed = Feed(t)
    feed(stored([10], group_idx=0, spec_kind="sliding_window"))
    feed(stored([1], group_idx=1, spec_kind="full_attention"))
    feed(stored([11], group_idx=0, spec_kind="sliding_window"))
    update = t.take(at=QUIET)
    assert update.accesses is not None and update.accesses.keys.tolist() == [10, 1]
    switch = [e for e in update.events if e.kind == "kv-cache-group"]
    assert len(switch) == 1 and "group 1 (full_attention)" in switch[0].text and switch[0].at == 100.0


def test_a_group_given_by_the_user_is_the_only_one_tracked() -> None:
    t = tracker(group_idx=1)
    feed = Feed(t)
    feed(
        stored([1], group_idx=0, spec_kind="full_attention"),
        stored([2], group_idx=1, spec_kind="sliding_window"),
    )
    assert accessed(t) == [2]
    assert detail(t, "KV cache group") == "1 (--group-idx); ignored: 1 event, 1 stored block of group 0"


def test_only_the_selected_medium_counts_and_the_others_are_named() -> None:
    t = tracker()  # GPU, what events without a medium describe
    feed = Feed(t)
    feed(
        stored([1], medium="GPU"),
        stored([2], medium="CPU"),
        stored([3], medium=None),
        removed([1], medium="CPU"),
    )
    update = t.take(at=QUIET)
    assert update.accesses is not None and update.accesses.keys.tolist() == [1, 3]
    assert (
        update.engine is not None
        and update.engine.resident_blocks == 2
        and update.engine.evictions_total == 0
    )
    assert detail(t, "medium") == "GPU; ignored: CPU 2 events"


def test_medium_all_counts_every_tier() -> None:
    t = tracker(medium="all")
    Feed(t)(stored([1], medium="GPU"), stored([2], medium="CPU_PINNED"))
    assert accessed(t) == [1, 2]
    assert detail(t, "medium") == "all"


def test_other_media_only_is_explained() -> None:
    t = tracker()
    Feed(t)(stored([1], medium="CPU_PINNED"))
    assert accessed(t) == []
    assert any(
        "no GPU events yet" in n and "CPU_PINNED (1 event)" in n for n in kv_event_health(t, 100.0).notes
    )


def test_hits_are_reported_from_ten_stores_of_resident_blocks() -> None:
    t = tracker()
    feed = Feed(t)
    feed(stored(list(range(20))))
    feed(stored(list(range(9))))  # vLLM's full report mode re-stores the blocks a request hit
    health = kv_event_health(t, 100.0)
    assert health.reports_hits is False and health.notes[0] == MISSES_ONLY_NOTE
    assert detail(t, "hit reporting") == "misses only so far (9 stores of resident blocks: too few to tell)"
    feed(stored([9]))
    health = kv_event_health(t, 100.0)
    assert health.reports_hits is True and health.notes[0] == HITS_REPORTED_NOTE
    assert detail(t, "hit reporting") == "hits reported (10 stores of resident blocks of 30 stores)"


def test_hits_need_one_percent_of_the_stores_too() -> None:
    t = tracker()
    feed = Feed(t)
    feed(stored(list(range(1200))))
    feed(stored(list(range(10))))  # 10 of 1210 stores: under 1 %
    assert kv_event_health(t, 100.0).reports_hits is False
    feed(stored([10, 11, 12]))  # 13 of 1213
    assert kv_event_health(t, 100.0).reports_hits is True


def test_after_lost_events_a_re_store_is_no_evidence_of_a_hit() -> None:
    t = tracker()  # no replay endpoint: a gap is lost for good
    feed = Feed(t)
    blocks = list(range(12))
    feed(stored(blocks))
    feed.skip()  # perhaps the engine evicted them all in the batch that was lost
    feed(stored(blocks))
    assert kv_event_health(t, 100.0).reports_hits is False
    assert detail(t, "stores after lost events").startswith(
        "12 stores of blocks whose eviction may have been lost"
    )
    feed(stored(blocks))  # stored after the gap, they are known to be resident now
    assert kv_event_health(t, 100.0).reports_hits is True


def test_a_gap_recovered_by_replay_keeps_the_order_and_says_so_on_the_timeline() -> None:
    t = tracker(replay="tcp://127.0.0.1:5558")
    feed = Feed(t)
    feed(stored([1]))
    feed.skip()
    assert feed(stored([3])) == [AskReplay(1)]
    assert t.replay_deadline == 0.0 + 1.0
    t.replay_reply(0, replayed(1, [stored([2])]), now=0.1, at=100.0)
    assert t.replay_reply(0, END_OF_REPLAY, now=0.2, at=100.0) == []
    update = t.take(at=QUIET)
    assert update.accesses is not None and update.accesses.keys.tolist() == [1, 2, 3]
    assert [e.kind for e in update.events] == ["sequence-gap"]
    assert detail(t, "sequence gaps") == "1 gap, 1 batch missing: 1 recovered by replay, 0 lost"
    assert detail(t, "replay wait") == "a gap waits at most 1 s for its replay, then counts lost"


def test_the_wait_for_a_replay_is_stated_and_is_the_replay_timeout() -> None:
    t = tracker(replay="tcp://127.0.0.1:5558", replay_timeout=0.25)
    feed = Feed(t)
    feed(stored([1]))
    feed.skip()
    assert feed(stored([3])) == [AskReplay(1)]
    assert t.replay_deadline == 0.25
    assert detail(t, "replay wait") == "a gap waits at most 0.25 s for its replay, then counts lost"
    no_replay = kv_event_health(tracker(), 0.0).details
    assert "replay wait" not in dict(no_replay)  # no replay endpoint: nothing waits


def test_lost_batches_are_noted_with_the_way_to_recover_them() -> None:
    t = tracker()
    feed = Feed(t)
    feed(stored([1]))
    feed.skip(2)
    feed(stored([4]))
    notes = kv_event_health(t, 100.0).notes
    assert any(n.startswith("2 event batches lost") and "give --replay-endpoint" in n for n in notes)


def test_a_restart_and_a_clear_empty_the_resident_set() -> None:
    t = tracker()
    feed = Feed(t)
    feed(stored([1, 2, 3]))
    feed(removed([1]), cleared(), stored([4]))
    update = t.take(at=100.0)
    assert (
        update.engine is not None
        and update.engine.resident_blocks == 1
        and update.engine.evictions_total == 1
    )
    assert "all-blocks-cleared" in [e.kind for e in update.events]
    feed.seq = 0  # the engine started again
    feed(stored([7, 8]))
    update = t.take(at=100.0)
    assert update.engine is not None and update.engine.resident_blocks == 2
    reset = [e for e in update.events if e.kind == "engine-reset"]
    assert len(reset) == 1 and "went back from 1 to 0" in reset[0].text
    assert detail(t, "resets") == "1 engine restarts, 1 AllBlocksCleared"


def test_the_data_parallel_rank_names_the_publisher() -> None:
    t = tracker()
    Feed(t)(stored([1, 2]), removed([2]), rank=3)
    accessed(t)  # the request finished: its accesses are counted when handed out
    assert detail(t, f"rank 3 {ADDRESS}").startswith(
        "1 batch, 2 accesses, 1 resident block, 1 eviction, last seq 0"
    )


def test_a_message_without_its_payload_is_rejected_and_its_number_shows_as_a_gap() -> None:
    t = tracker()
    feed = Feed(t)
    feed(stored([1]))
    assert t.published(0, [b"", (1).to_bytes(8, "big")], now=0.0, at=100.0) == []  # no payload frame
    feed.skip()
    feed(stored([2]))
    assert accessed(t) == [1, 2]
    assert {r.reason: r.count for r in t.rejects.summary()} == {
        "message: not 3 frames (topic, seq, payload)": 1
    }


def test_a_quiet_streams_last_requests_finish_while_its_tail_is_probed_not_while_a_gap_is() -> None:
    """A quiet stream's tail is probed (a batch lost at its very end leaves no gap); its last requests
    are finished at the quiet second all the same, not the probe's wait later (issue 25: a flood's last
    figures stood still 2 s). A gap's replay still defers them: what it brings back comes first."""
    t = tracker(replay="tcp://127.0.0.1:5558")
    t.published(0, message(0, [stored([1, 2, 3])]), now=10.0, at=100.0)
    probe = t.tick(now=10.0 + t.quiet_seconds, at=100.0 + t.quiet_seconds)
    assert [type(step) for _, step in probe] == [AskReplay] and t.publishers[0].sequence.replaying
    batch = t.take(at=100.0 + t.quiet_seconds).accesses
    assert batch is not None and batch.keys.tolist() == [1, 2, 3]

    gap = tracker(replay="tcp://127.0.0.1:5558")
    gap.published(0, message(0, [stored([1, 2, 3])]), now=10.0, at=100.0)
    gap.published(0, message(2, [stored([5])]), now=10.0, at=100.0)  # seq 1 missing: asked for
    assert gap.take(at=100.0 + gap.quiet_seconds).accesses is None
    gap.tick(now=10.0 + 5.0, at=105.0)  # the replay is given up; the held batch is accepted
    batch = gap.take(at=100.0 + gap.quiet_seconds + 5.0).accesses
    assert batch is not None and batch.keys.tolist() == [1, 2, 3, 5]


def test_without_apply_at_once_what_a_replay_released_is_applied_one_batch_at_a_time() -> None:
    """The source applies the batches a replay held one by one, making updates between them (issue 25:
    a flood's 27 held batches, applied at once, held its figures still for 0.4 s more)."""
    t = KvEventTracker(["tcp://x:1"], ["tcp://x:2"], RejectCounter(), replay_timeout=1.0)
    t.apply_at_once = False
    t.published(0, message(0, [stored([1])]), now=0.0, at=100.0)
    assert t.unapplied_batches == 1 and t.publishers[0].batches == 0  # decided, not applied
    assert t.apply_next(100.0) and not t.apply_next(100.0) and t.publishers[0].batches == 1
    for seq in (2, 3, 4):  # seq 1 missing: asked, the rest held
        t.published(0, message(seq, [stored([10 * seq])]), now=0.1, at=100.1)
    assert t.unapplied == 0 and t.publishers[0].sequence.held == 3
    t.tick(now=1.5, at=101.5)  # given up: the held batches are released, not applied yet
    assert t.unapplied_batches == 3 and t.publishers[0].batches == 1
    applied = []
    while t.apply_next(101.5):
        applied.append(t.publishers[0].batches)
    assert applied[-3:] == [2, 3, 4]  # one batch a step, after the gap's loss and its timeline event
    assert t.take(103.0, final=True).accesses.keys.tolist() == [1, 20, 30, 40]


def test_a_final_take_applies_what_is_decided_first() -> None:
    t = KvEventTracker(["tcp://x:1"], [None], RejectCounter())
    t.apply_at_once = False
    t.published(0, message(0, [stored([1, 2])]), now=0.0, at=100.0)
    assert t.take(100.0).accesses is None and t.publishers[0].batches == 0  # an update applies nothing
    assert t.take(100.5, final=True).accesses.keys.tolist() == [1, 2]
    assert t.publishers[0].batches == 1 and t.unapplied == 0
