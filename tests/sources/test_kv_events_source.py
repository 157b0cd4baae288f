"""The live KV-events source against a fake publisher speaking vLLM's protocol on 127.0.0.1."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from kvset.engine.kv_event_health import HITS_REPORTED_NOTE, RECONSTRUCTED_NOTE
from kvset.sources.kv_events import KvEventsSource
from tests.support.vllm_publisher import FakeVllmPublisher

TICK = 0.05
U64 = (1 << 64) - 1


class Run:
    """Iterates a source in a worker thread (as the pipeline does) and accumulates what it yields."""

    def __init__(self, source: KvEventsSource) -> None:
        self.source = source
        self.stop = threading.Event()
        self._queue: queue.Queue = queue.Queue()
        self.keys: list[int] = []
        self.tokens: list[int] = []
        self.times: list[float] = []
        self.starts: list[int] = []
        self.events: list = []
        self.health = None
        self.engine = None
        self.updates = 0
        self._thread = threading.Thread(target=self._iterate, daemon=True)
        self._thread.start()

    def _iterate(self) -> None:
        try:
            for update in self.source.updates(self.stop):
                self._queue.put(update)
        except BaseException as exc:  # surfaced in the test thread
            self._queue.put(exc)

    def _take(self, update) -> None:
        if isinstance(update, BaseException):
            raise update
        self.updates += 1
        batch = update.accesses
        if batch is not None:
            offset = len(self.keys)
            self.starts += [offset + int(s) for s in batch.request_starts]
            self.keys += batch.keys.tolist()
            self.tokens += batch.tokens.tolist()
            self.times += np.broadcast_to(batch.timestamps, (len(batch.keys),)).tolist()
        self.events += update.events
        self.health = update.health or self.health
        self.engine = update.engine or self.engine

    def wait_for(self, condition: Callable[[Run], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while self.health is None or not condition(self):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out; last health: {self.health}")
            try:
                self._take(self._queue.get(timeout=remaining))
            except queue.Empty:
                continue

    def detail(self, key: str) -> str:
        assert self.health is not None
        return dict(self.health.details)[key]

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def close(self) -> None:
        self.stop.set()
        self._thread.join(timeout=5)
        assert not self._thread.is_alive(), "the source did not return after stop"


@contextmanager
def running(source: KvEventsSource, *publishers: FakeVllmPublisher) -> Iterator[Run]:
    run = Run(source)
    try:
        for publisher in publishers:
            publisher.wait_for_subscriber()
        yield run
    finally:
        run.close()


@pytest.fixture
def fake() -> Iterator[FakeVllmPublisher]:
    with FakeVllmPublisher() as publisher:
        yield publisher


def source_for(*publishers: FakeVllmPublisher, replay: bool = True, **kwargs) -> KvEventsSource:
    return KvEventsSource(
        [p.endpoint for p in publishers],
        [p.replay_endpoint for p in publishers] if replay else None,
        idle_tick=TICK,
        quiet_seconds=kwargs.pop("quiet_seconds", 0.2),  # requests finish when the stream is quiet
        tail_probe_seconds=kwargs.pop("tail_probe_seconds", 60.0),  # (tested on its own)
        **kwargs,
    )


def test_accesses_arrive_in_order_with_keys_tokens_and_timestamps(fake: FakeVllmPublisher) -> None:
    # the first batch loads the engine model's compiled functions, which holds the GIL for a few
    # hundred ms on a loaded machine: a quiet window shorter than that ends the request between the
    # first two batches, which the test sends back to back
    with running(source_for(fake, quiet_seconds=1.0), fake) as run:
        fake.publish([fake.stored([U64, 2, 3], block_size=16)], ts=100.0)
        fake.publish(
            [fake.stored([4], block_size=16, parent=3), fake.stored([5, 6], token_ids=list(range(20)))],
            ts=101.5,
        )
        fake.publish([fake.removed([2])], ts=102.0)
        run.wait_for(
            lambda r: (
                r.health.received == 3
                and r.engine is not None
                and r.engine.evictions_total == 1
                and len(r.keys) == 6
            )
        )
        assert run.keys == [U64, 2, 3, 4, 5, 6]
        assert run.tokens == [16, 16, 16, 16, 16, 4]  # the last block of the second request is partial
        assert run.starts == [0, 4]  # 4 continues the chain ending in 3: one request
        assert run.times == [102.0] * 6  # finished when the stream went quiet (after its last batch)
        health = run.health
        assert health.kind == "events" and health.connected and health.state == "connected"
        assert health.accesses == 6 and health.rejected_total == 0
        assert run.engine.resident_blocks == 5 and run.engine.block_size == 16
        assert "3 batches, 6 accesses, 5 resident blocks" in run.detail(f"rank 0 {fake.endpoint}")


def test_idle_source_still_reports_health_and_stops_promptly(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        run.wait_for(lambda r: r.updates >= 4 and r.health.connected, timeout=3)
        assert run.health.state == "connected, waiting for data"
        assert run.keys == [] and run.engine is None
        assert run.health.reports_hits is None  # no event yet: neither "misses only" nor "hits reported"
    # leaving `running` stops the source: Run.close fails if its thread has not returned


def test_nothing_listening_is_reported_not_hung() -> None:
    with FakeVllmPublisher(replay=False) as gone:
        endpoint = gone.endpoint
    source = KvEventsSource([endpoint], idle_tick=TICK)
    run = Run(source)
    try:
        run.wait_for(lambda r: r.updates >= 3, timeout=3)
        assert not run.health.connected and run.health.state == "connecting"
    finally:
        run.close()


def test_gap_is_recovered_from_the_replay_socket(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        fake.publish([fake.stored([1])], ts=1.0)
        fake.publish([fake.stored([2])], ts=2.0, deliver=False)  # dropped on the way
        fake.publish([fake.stored([3])], ts=3.0, deliver=False)
        fake.publish([fake.stored([4])], ts=4.0)
        fake.publish([fake.stored([5])], ts=5.0)
        run.wait_for(lambda r: len(r.keys) == 5)
        assert run.keys == [1, 2, 3, 4, 5]
        assert run.times == [5.0] * 5  # five requests, finished when the stream went quiet
        assert fake.replay_requests == [1]
        run.wait_for(lambda r: "sequence-gap" in r.kinds())
        assert run.detail("sequence gaps") == "1 gap, 2 batches missing: 2 recovered by replay, 0 lost"
        assert not any("lost" in n for n in run.health.notes)


def test_unrecoverable_gap_is_counted_and_shown(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        fake.publish([fake.stored([1])])
        fake.publish([fake.stored([2])], deliver=False, replayable=False)  # gone from the buffer too
        fake.publish([fake.stored([3])])
        run.wait_for(lambda r: len(r.keys) == 2 and "sequence-gap" in r.kinds())
        assert run.keys == [1, 3]
        assert run.detail("sequence gaps") == "1 gap, 1 batch missing: 0 recovered by replay, 1 lost"
        assert any(n.startswith("1 event batch lost") for n in run.health.notes)
        gap = next(e for e in run.events if e.kind == "sequence-gap")
        assert "seq 1..1" in gap.text and "1 lost" in gap.text


def test_replay_that_never_answers_times_out(fake: FakeVllmPublisher) -> None:
    fake.replay_silent = True
    with running(source_for(fake, replay_timeout=0.3), fake) as run:
        fake.publish([fake.stored([1])])
        fake.publish([fake.stored([2])], deliver=False)
        fake.publish([fake.stored([3])])
        fake.publish([fake.stored([4])])  # arrives while the replay is pending: held, then in order
        updates_before = run.updates
        run.wait_for(lambda r: len(r.keys) == 3)
        assert run.keys == [1, 3, 4]
        assert run.updates - updates_before >= 2  # health kept flowing during the wait
        assert "(replay timed out)" in next(e for e in run.events if e.kind == "sequence-gap").text
        assert run.detail("sequence gaps").endswith("0 recovered by replay, 1 lost")
        # The replay socket recovers for the next gap once the publisher answers again: a gap found
        # past one stated wait after the silent replay (one found sooner is counted lost at once)
        fake.replay_silent = False
        sequence = run.source.tracker.publishers[0].sequence
        run.wait_for(lambda r: sequence.replay_allowed(r.source.clock.monotonic()))
        fake.publish([fake.stored([5])], deliver=False)
        fake.publish([fake.stored([6])])
        run.wait_for(lambda r: len(r.keys) == 5)
        assert run.keys == [1, 3, 4, 5, 6]


def test_a_replay_given_up_makes_an_update_at_once_not_at_the_next_tick(fake: FakeVllmPublisher) -> None:
    """What a replay held is counted as soon as the replay ends (issue 25): with ticks a minute apart,
    the update saying the gap was lost comes at the replay's deadline."""
    fake.replay_silent = True
    source = KvEventsSource(
        [fake.endpoint],
        [fake.replay_endpoint],
        idle_tick=60.0,
        quiet_seconds=60.0,
        tail_probe_seconds=60.0,
        replay_timeout=0.2,
    )
    with running(source, fake) as run:
        run.wait_for(lambda r: r.updates >= 1)  # the first update comes at once
        fake.publish([fake.stored([1])])
        fake.publish([fake.stored([2])], deliver=False)
        fake.publish([fake.stored([3])])
        run.wait_for(
            lambda r: dict(r.health.details).get("sequence gaps", "").endswith("1 lost"), timeout=20.0
        )
        assert dict(run.health.counts)["backlog_batches"] == 0  # the held batch was accepted
        run.stop.set()
        fake.publish([fake.stored([4])])  # wakes the source, which then sees its stop


def test_gap_without_replay_endpoint_is_lost(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake, replay=False), fake) as run:
        fake.publish([fake.stored([1])])
        fake.publish([fake.stored([2])], deliver=False)
        fake.publish([fake.stored([3])])
        run.wait_for(lambda r: len(r.keys) == 2)
        assert run.keys == [1, 3]
        assert "1 lost" in run.detail("sequence gaps")
        assert any("--replay-endpoint" in n for n in run.health.notes)


def test_truncated_frames_and_garbage_are_rejected_and_counted(fake: FakeVllmPublisher) -> None:
    # the replays answer within milliseconds; the default 1 s wait was once over on a loaded CI
    # machine, and this test counts rejections, not timeouts (those have tests of their own)
    with running(source_for(fake, replay_timeout=5.0), fake) as run:
        fake.publish([fake.stored([1])])
        fake.send_truncated([fake.stored([2, 3, 4])])  # seq 1: intact in the replay buffer
        fake.publish_payload(b"\xc1 this is not msgpack")  # seq 2: garbage in the buffer too
        fake.send_frames([b"", (3).to_bytes(8, "big")])  # a message that lost its payload frame
        fake.send_frames([b"", b"\x00\x03", b"\x90"])  # a short sequence frame
        fake.publish([fake.stored([5])])
        run.wait_for(
            lambda r: r.health.received == 6 and len(r.keys) == 5 and "1 lost" in r.detail("sequence gaps")
        )
        # The truncated batch is asked again by its number and comes back whole, in its place.
        assert run.keys == [1, 2, 3, 4, 5]
        assert fake.replay_requests == [1, 2]
        reasons = {r.reason: r.count for r in run.health.rejected}
        assert reasons == {  # a payload that is still bad when replayed is not counted twice
            "payload: truncated msgpack": 1,
            "payload: not msgpack": 1,
            "message: not 3 frames (topic, seq, payload)": 1,
            "message: sequence frame is not 8 bytes": 1,
        }
        assert run.detail("sequence gaps") == "2 gaps, 2 batches missing: 1 recovered by replay, 1 lost"
        texts = [e.text for e in run.events if e.kind == "sequence-gap"]
        assert any("seq 1 unreadable: recovered by replay" in t for t in texts)
        assert any("seq 2 unreadable: lost (its replayed copy is unreadable too" in t for t in texts)
        # The publisher itself sends unreadable batches: they are not asked for again, one by one.
        fake.send_truncated([fake.stored([6])])
        fake.publish([fake.stored([7])])
        run.wait_for(lambda r: r.health.received == 8 and len(r.keys) == 6)
        assert run.keys == [1, 2, 3, 4, 5, 7]
        assert fake.replay_requests == [1, 2]


def test_unreadable_batch_without_replay_endpoint_keeps_its_number(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake, replay=False), fake) as run:
        fake.publish([fake.stored([1])])
        fake.send_truncated([fake.stored([2, 3, 4])])
        fake.publish([fake.stored([5])])
        run.wait_for(lambda r: r.health.received == 3 and len(r.keys) == 2)
        assert run.keys == [1, 5]
        assert {r.reason: r.count for r in run.health.rejected} == {"payload: truncated msgpack": 1}
        assert run.detail("sequence gaps").startswith("0 gaps")


def test_overflowing_and_garbage_messages_are_counted_and_the_source_keeps_running(
    fake: FakeVllmPublisher,
) -> None:
    nested = b"\x93" + fake.encode_batch([], 1.0)[1:10] + b"\x91" * 3001 + b"\x90" + b"\x00"
    with running(source_for(fake), fake) as run:
        fake.publish([fake.stored([1], block_size=1 << 63, token_ids=[]), fake.stored([2])])
        fake.publish([fake.removed([2], group_idx=(1 << 64) - 1)])
        fake.publish_payload(nested)
        fake.publish([fake.stored([3], group_idx=1 << 63, token_ids=[])])
        fake.publish([fake.stored([4])])
        run.wait_for(
            lambda r: r.health.received == 5 and len(r.keys) == 2 and "1 lost" in r.detail("sequence gaps")
        )
        assert run.keys == [2, 4]
        reasons = {r.reason: r.count for r in run.health.rejected}
        assert reasons == {
            "event: block_size is not an integer in 1..1048576": 1,
            "event: group_idx is not an integer in 0..2147483647": 2,
            "payload: undecodable (RecursionError)": 1,
        }
        assert run.health.connected and run.engine.resident_blocks == 2


def test_an_exception_while_handling_a_message_is_counted_and_the_source_keeps_running(
    fake: FakeVllmPublisher, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kvset.engine.kv_event_sequence as sequence_module
    import kvset.engine.kv_event_tracker as tracker_module

    poison = fake.encode_batch([fake.stored([666])], 1.0)
    real_message, real_payload = tracker_module.decode_message, sequence_module.decode_payload

    def buggy_message(frames, rejects, where=""):
        if frames[-1] == poison:
            raise RuntimeError("a decoder bug")
        return real_message(frames, rejects, where)

    def buggy_payload(payload, rejects, where=""):
        if payload == poison:
            raise RuntimeError("a decoder bug")
        return real_payload(payload, rejects, where)

    monkeypatch.setattr(tracker_module, "decode_message", buggy_message)
    monkeypatch.setattr(sequence_module, "decode_payload", buggy_payload)
    with running(source_for(fake), fake) as run:
        fake.publish([fake.stored([1])])
        fake.publish_payload(poison)  # its number is never read: seq 2 shows a gap, its replay fails too
        fake.publish([fake.stored([3])])
        run.wait_for(lambda r: len(r.keys) == 2 and "sequence-gap" in r.kinds())
        assert run.keys == [1, 3]
        assert {r.reason: r.count for r in run.health.rejected} == {"undecodable message: RuntimeError": 2}
        assert run.detail("sequence gaps") == "1 gap, 1 batch missing: 0 recovered by replay, 1 lost"
        fake.publish([fake.stored([4])])
        run.wait_for(lambda r: len(r.keys) == 3)
        assert run.keys == [1, 3, 4]


def test_publisher_restart_is_a_timeline_event_and_resets_the_resident_set(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        fake.publish([fake.stored([1, 2])])
        fake.publish([fake.stored([3])])
        run.wait_for(lambda r: r.engine is not None and r.engine.resident_blocks == 3)
        fake.restart()
        fake.wait_for_subscriber()
        fake.publish([fake.stored([7])])  # seq 0 again
        run.wait_for(lambda r: len(r.keys) == 4)
        run.wait_for(lambda r: r.engine.resident_blocks == 1)
        assert run.keys == [1, 2, 3, 7]
        reset = [e for e in run.events if e.kind == "engine-reset"]
        assert len(reset) == 1 and "went back from 1 to 0" in reset[0].text
        assert run.detail("resets") == "1 engine restarts, 0 AllBlocksCleared"
        assert run.detail("sequence gaps").startswith("0 gaps")


def test_restart_seen_late_replays_the_new_publishers_first_batches(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        for k in range(4):
            fake.publish([fake.stored([k])])
        run.wait_for(lambda r: len(r.keys) == 4)
        fake.restart()
        fake.wait_for_subscriber()
        fake.publish([fake.stored([10])], deliver=False)  # seq 0, missed while reconnecting
        fake.publish([fake.stored([11])])  # seq 1 < 4: a restart, and seq 0 comes from replay
        run.wait_for(lambda r: len(r.keys) == 6)
        assert run.keys == [0, 1, 2, 3, 10, 11]
        assert run.kinds().count("engine-reset") == 1
        assert fake.replay_requests == [0]


def test_all_blocks_cleared_resets_the_resident_set(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        fake.publish([fake.stored([1, 2, 3])])
        run.wait_for(lambda r: r.engine is not None and r.engine.resident_blocks == 3)
        fake.publish([fake.removed([1]), fake.cleared(), fake.stored([4])])
        run.wait_for(lambda r: "all-blocks-cleared" in r.kinds() and r.engine.resident_blocks == 1)
        assert run.engine.evictions_total == 1
        fake.publish([fake.stored([1])])
        run.wait_for(lambda r: len(r.keys) == 5)
        # 1 was evicted before the clear; after it a larger cache would be empty too, so its
        # re-store is not a miss that a larger cache would have hit.
        assert run.engine.restores_after_removal == 0 and run.engine.resident_blocks == 2
        assert run.keys == [1, 2, 3, 4, 1]
        assert run.detail("resets") == "0 engine restarts, 1 AllBlocksCleared"


def test_misses_only_then_hits_reported(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        run.wait_for(lambda r: r.updates >= 1)
        assert run.health.reports_hits is None  # nothing stored yet: no claim either way
        fake.publish([fake.stored([1, 2])])
        fake.publish([fake.stored([3], parent=2)])
        fake.publish([fake.removed([3]), fake.stored([3], parent=2)])  # evicted, then needed again
        # the second request's hits 1, 2 read off the chain its store hangs on (vLLM's default mode)
        run.wait_for(lambda r: len(r.keys) == 6)
        assert run.keys[3:] == [1, 2, 3]
        assert run.health.notes[0] == RECONSTRUCTED_NOTE
        assert run.detail("hit reporting") == "misses only so far"
        assert run.health.reports_hits is False and run.health.hits_reconstructed
        assert run.engine.restores_after_removal == 1
        # vLLM >= 0.26 with kv_cache_report_mode=full re-emits hit blocks with no parent; one such
        # store is not yet a sustained signal.
        fake.publish([fake.stored([1, 2, 3], parent=None)])
        run.wait_for(lambda r: len(r.keys) == 9)
        assert run.health.reports_hits is False
        assert (
            run.detail("hit reporting") == "misses only so far (3 stores of resident blocks: too few to tell)"
        )
        fake.publish([fake.stored([1, 2, 3], parent=None), fake.stored([1, 2, 3, 1], parent=None)])
        run.wait_for(lambda r: len(r.keys) == 16)
        assert run.health.notes[0] == HITS_REPORTED_NOTE
        assert run.detail("hit reporting") == "hits reported (10 stores of resident blocks of 14 stores)"
        assert run.health.reports_hits is True


def test_hits_need_one_percent_of_the_stores(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        fake.publish([fake.stored(list(range(1200)))])
        fake.publish([fake.stored(list(range(10)), parent=None)])  # 10 of 1210 stores: under 1 %
        run.wait_for(lambda r: len(r.keys) == 1210)
        assert run.health.reports_hits is False
        fake.publish([fake.stored([10, 11, 12], parent=None)])  # 13 of 1213: over 1 %
        run.wait_for(lambda r: len(r.keys) == 1213)
        assert run.health.reports_hits is True


@pytest.mark.parametrize("replay", [True, False])
def test_a_removal_lost_in_a_gap_does_not_make_re_stores_look_like_hits(
    fake: FakeVllmPublisher, replay: bool
) -> None:
    blocks = list(range(1, 13))
    with running(source_for(fake, replay=replay), fake) as run:
        fake.publish([fake.stored(blocks)])
        fake.publish([fake.removed(blocks)], deliver=False, replayable=False)  # lost for good
        fake.publish([fake.stored(blocks)])  # the engine computes them again: 12 misses, not hits
        run.wait_for(lambda r: len(r.keys) == 24 and "1 lost" in r.detail("sequence gaps"))
        assert run.health.reports_hits is False
        assert run.detail("hit reporting") == "misses only so far"
        # Stored after the gap they are known to be resident: storing them again is a hit.
        fake.publish([fake.stored(blocks, parent=None)])
        run.wait_for(lambda r: len(r.keys) == 36)
        assert run.health.reports_hits is True
        assert run.detail("hit reporting").startswith("hits reported (12 stores of resident blocks")


def test_two_kv_cache_groups_with_the_same_hashes_count_one_group(fake: FakeVllmPublisher) -> None:
    # A hybrid model: each request's blocks are stored once per KV cache group, under the same hashes.
    with running(source_for(fake), fake) as run:
        for r in range(6):
            hashes = [100 * r + i for i in range(4)]
            fake.publish([fake.stored(hashes, group_idx=0), fake.stored(hashes, group_idx=1)])
        fake.publish([fake.removed([0, 1], group_idx=1)])  # the other group's eviction
        run.wait_for(lambda r: r.health.received == 7 and r.engine is not None and len(r.keys) == 24)
        assert run.keys == [100 * r + i for r in range(6) for i in range(4)]
        assert run.starts == [4 * r for r in range(6)]
        assert run.health.reports_hits is False
        assert run.detail("hit reporting") == "misses only so far"
        assert run.engine.resident_blocks == 24 and run.engine.evictions_total == 0
        note = next(n for n in run.health.notes if n.startswith("several KV cache groups"))
        assert note.startswith("several KV cache groups (a hybrid model): the curve is group 0's")
        assert "24 stored blocks of group 1 outside the curve" in note
        assert (
            run.detail("KV cache group") == "0 (first seen); ignored: 7 events, 24 stored blocks of group 1"
        )


def test_the_full_attention_group_is_counted_when_events_name_the_kinds(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        fake.publish(
            [
                fake.stored([10, 11], group_idx=0, spec_kind="sliding_window"),
                fake.stored([1, 2], group_idx=1, spec_kind="full_attention"),
            ]
        )
        fake.publish([fake.stored([12], group_idx=0, spec_kind="sliding_window")])
        fake.publish([fake.stored([3], group_idx=1, spec_kind="full_attention")])
        run.wait_for(lambda r: r.health.received == 3 and len(r.keys) == 3)
        assert run.keys == [1, 2, 3]
        assert any(
            n.startswith("several KV cache groups (a hybrid model): the curve is group 1's")
            for n in run.health.notes
        )
        assert run.detail("KV cache group").startswith("1 (full_attention); ignored: 2 events")


def test_a_later_full_attention_group_takes_over_from_a_sliding_window_group(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        fake.publish([fake.stored([10, 11], group_idx=0, spec_kind="sliding_window")])
        fake.publish([fake.stored([1, 2], group_idx=1, spec_kind="full_attention")])
        fake.publish([fake.stored([12], group_idx=0, spec_kind="sliding_window")])
        run.wait_for(lambda r: r.health.received == 3 and "kv-cache-group" in r.kinds() and len(r.keys) == 4)
        assert run.keys == [10, 11, 1, 2]
        switch = next(e for e in run.events if e.kind == "kv-cache-group")
        assert (
            "group 1 (full_attention)" in switch.text and "instead of group 0 (sliding_window)" in switch.text
        )
        assert run.engine.resident_blocks == 2


def test_medium_and_group_filters(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake, group_idx=0), fake) as run:
        fake.publish(
            [
                fake.stored([1], medium="GPU", group_idx=0),
                fake.stored([2], medium="CPU", group_idx=0),
                fake.stored([3], medium="GPU", group_idx=1),
                fake.removed([1], medium="CPU", group_idx=0),  # the CPU tier's eviction, not the GPU's
                fake.stored([4], medium=None, group_idx=None),  # no medium / group: GPU, any group
            ]
        )
        run.wait_for(lambda r: r.health.received == 1 and len(r.keys) == 2)
        assert run.keys == [1, 4]
        assert run.engine.resident_blocks == 2 and run.engine.evictions_total == 0
        assert run.detail("medium") == "GPU; ignored: CPU 2 events"
        assert run.detail("KV cache group") == "0 (--group-idx); ignored: 1 event, 1 stored block of group 1"


def test_all_media_and_several_groups_count_the_first_group_with_a_note(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake, medium="all"), fake) as run:
        fake.publish([fake.stored([1], group_idx=0), fake.stored([2], medium="CPU", group_idx=1)])
        run.wait_for(lambda r: r.health.received == 1 and len(r.keys) == 1)
        assert run.keys == [1]
        assert any(
            n.startswith("several KV cache groups (a hybrid model): the curve is group 0's")
            for n in run.health.notes
        )


def test_other_media_only_is_explained(fake: FakeVllmPublisher) -> None:
    with running(source_for(fake), fake) as run:
        fake.publish([fake.stored([1], medium="CPU_PINNED")])
        run.wait_for(lambda r: r.health.received == 1)
        assert run.keys == []
        assert any("no GPU events yet" in n and "CPU_PINNED (1 event)" in n for n in run.health.notes)


@pytest.mark.parametrize("layout", ["vllm-array", "sglang"])
def test_array_layouts_live(layout: str) -> None:
    with FakeVllmPublisher(layout=layout, rank=2) as fake, running(source_for(fake), fake) as run:
        fake.publish([fake.stored([U64, 1 << 63, 5], block_size=1, token_ids=[1, 2, 3])], ts=7.0)
        fake.publish([fake.removed([U64]), fake.stored([6], block_size=1)], ts=8.0, deliver=False)
        fake.publish([fake.cleared()], ts=9.0)
        run.wait_for(lambda r: len(r.keys) == 4 and "all-blocks-cleared" in r.kinds())
        # SGLang's signed hashes come out as the same unsigned keys; the gap replays in both layouts.
        assert run.keys == [U64, 1 << 63, 5, 6]
        assert run.tokens == [1, 1, 1, 1]
        assert fake.replay_requests == [1]
        assert "rank 2 " + fake.endpoint in dict(run.health.details)


def test_two_data_parallel_ranks_merge_into_one_stream() -> None:
    with (
        FakeVllmPublisher(rank=0) as rank0,
        FakeVllmPublisher(rank=1) as rank1,
        running(source_for(rank0, rank1), rank0, rank1) as run,
    ):
        rank0.publish([rank0.stored([1, 2])])
        rank1.publish([rank1.stored([1])])  # each rank has its own sequence numbers: no gap
        rank1.publish([rank1.stored([3])], deliver=False)
        rank1.publish([rank1.stored([4])])
        rank0.publish([rank0.removed([2])])
        run.wait_for(lambda r: len(r.keys) == 5 and r.engine.evictions_total == 1)
        assert sorted(run.keys) == [1, 1, 2, 3, 4]
        assert run.keys.index(3) < run.keys.index(4)  # the replayed batch keeps rank 1's order
        assert run.detail(f"rank 0 {rank0.endpoint}").startswith("2 batches, 2 accesses, 1 resident block,")
        assert run.detail(f"rank 1 {rank1.endpoint}").startswith("3 batches, 3 accesses, 3 resident blocks")
        # The ranks' caches are separate: block 1 on rank 1 is not a hit on rank 0's block 1.
        assert run.detail("hit reporting") == "misses only so far"
        assert run.engine.resident_blocks == 4
        assert rank0.replay_requests == [] and rank1.replay_requests == [1]
        assert run.health.source == f"events {rank0.endpoint} (+1)"


def test_a_batch_lost_at_the_end_of_the_stream_is_asked_for_when_the_stream_goes_quiet(
    fake: FakeVllmPublisher,
) -> None:
    with running(source_for(fake, tail_probe_seconds=0.3), fake) as run:
        fake.publish([fake.stored([1, 2])], ts=1.0)
        fake.publish([fake.stored([3], parent=2)], ts=1.1, deliver=False)  # the last batch, lost on the way
        # recovered: block 3 continues the request (or, when the quiet stream finished that request
        # first, starts the next one, its hits 1, 2 read off the chain it hangs on)
        run.wait_for(lambda r: bool(r.keys) and r.keys[-1] == 3)
        assert run.keys in ([1, 2, 3], [1, 2, 1, 2, 3])
        assert fake.replay_requests == [1]
        assert run.detail("sequence gaps") == "1 gap, 1 batch missing: 1 recovered by replay, 0 lost"
        assert run.detail("quiet stream") == "asked 1 times for batches after the last one seen"
