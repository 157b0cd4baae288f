"""A source too slow for its publisher sheds what waited too long, the oldest first: counted, shown,
exported, and never asked of the replay endpoint (it would send back what kvset had no time for)."""

from __future__ import annotations

import itertools
import threading
import time

from kvset.sources.clock import Clock
from kvset.sources.kv_events import SHED_AFTER_S, SHED_MIN_QUEUED, KvEventsSource
from tests.sources.test_kv_events_backlog import big_batch
from tests.support.vllm_publisher import FakeVllmPublisher


def slow_clock() -> Clock:
    """A machine where every step takes a second: whatever waits in the queue is soon too old."""
    ticks = itertools.count()
    return Clock(monotonic=lambda: float(next(ticks)))


def read_waiting(pub: FakeVllmPublisher, sent: int, blocks: int):
    """A source on the slow clock, `sent` batches of `blocks` published while it waits, read until each
    is decoded or shed; (the source, its last update)."""
    src = KvEventsSource(
        [pub.endpoint],
        [pub.replay_endpoint],
        idle_tick=0.05,
        tail_probe_seconds=1e9,  # (no probe of the quiet tail: every replay asked would be a gap's)
        clock=slow_clock(),
    )
    stop = threading.Event()
    gen = src.updates(stop)
    next(gen)
    pub.wait_for_subscriber()
    for n in range(sent):
        pub.publish(big_batch(pub, n, blocks=blocks))
    time.sleep(0.5)  # all of it waiting in the socket
    deadline, last = time.monotonic() + 30, None
    for update in gen:
        last = update
        [stream] = src._streams
        if src.received + stream.shed >= sent or time.monotonic() > deadline:
            break
    stop.set()
    list(gen)
    return src, last


def test_messages_waiting_longer_than_the_bound_are_shed_counted_and_not_replayed():
    sent = 40
    with FakeVllmPublisher(replay=True) as pub:
        src, last = read_waiting(pub, sent, blocks=2000)
    [stream] = src._streams
    seq = src.tracker.publishers[0].sequence
    assert stream.shed > 0 and src.received + stream.shed == sent  # every message decoded or shed
    assert seq.shed == stream.shed and seq.gaps == 0 and seq.lost == 0
    assert pub.replay_requests == []  # shed batches are no gaps: nothing asked again
    assert last is not None and last.health is not None
    notes = " ".join(last.health.notes)
    assert f"{stream.shed:,} messages (" in notes and f"or {SHED_AFTER_S:g} s of waiting" in notes
    assert dict(last.health.counts)["batches_shed"] == stream.shed


def test_a_few_old_messages_are_a_pause_not_a_flood_and_are_all_decoded():
    # the first batch's decode can stall for seconds (compiled functions loading on a loaded machine):
    # what waited meanwhile is a handful of messages, which a source must decode, not shed
    sent = SHED_MIN_QUEUED
    with FakeVllmPublisher(replay=True) as pub:
        src, _ = read_waiting(pub, sent, blocks=8)  # soon "older" than the bound by the slow clock
    [stream] = src._streams
    assert stream.shed == 0 and src.received == sent


def test_a_pipeline_slow_for_seconds_loses_nothing_of_an_ordinary_stream():
    # the pipeline takes 2.5 s per update (the principals' figures being read, a slow moment): the
    # messages that wait meanwhile are late, not stale, and are all decoded (at a 2 s bound a quarter
    # of a real replay was shed so)
    base, steps = [0.0], itertools.count()
    clock = Clock(monotonic=lambda: base[0] + 0.01 * next(steps))  # a decode slice takes a message or two
    sent = 2 * SHED_MIN_QUEUED
    with FakeVllmPublisher(replay=True) as pub:
        src = KvEventsSource(
            [pub.endpoint], [pub.replay_endpoint], idle_tick=0.05, tail_probe_seconds=1e9, clock=clock
        )
        stop = threading.Event()
        gen = src.updates(stop)
        next(gen)
        pub.wait_for_subscriber()
        for n in range(sent):
            pub.publish(big_batch(pub, n, blocks=2000))
        [stream] = src._streams
        deadline = time.monotonic() + 20
        while stream.arrived < sent and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in gen:
            base[0] += 2.5  # the pipeline takes its time before it asks for the next update
            if src.received + stream.shed >= sent or time.monotonic() > deadline:
                break
        stop.set()
        list(gen)
    assert stream.shed == 0 and src.received == sent
