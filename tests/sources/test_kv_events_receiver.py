"""The SUB socket is emptied by a thread of its own while the source waits for its consumer (a pipeline
busy with its analyzer): nothing piles up inside ZMQ, what waits is bounded in bytes, and what passes
the bound is counted shed, in sequence order, never asked of the replay endpoint."""

from __future__ import annotations

import itertools
import threading
import time

from kvset.sources.kv_events import KvEventsSource
from tests.sources.test_kv_events_backlog import big_batch
from tests.support.vllm_publisher import FakeVllmPublisher


def test_a_waiting_source_still_empties_its_socket_into_a_byte_bounded_queue():
    sent, bound = 200, 1024 * 1024  # about 8 MiB published against a 1 MiB backlog
    with FakeVllmPublisher(replay=True) as pub:
        src = KvEventsSource(
            [pub.endpoint], [pub.replay_endpoint], idle_tick=0.05, backlog_bytes=bound, tail_probe_seconds=1e9
        )
        stop = threading.Event()
        gen = src.updates(stop)
        next(gen)  # from here the source is not asked for updates: its consumer is busy
        pub.wait_for_subscriber()
        for n in range(sent):
            pub.publish(big_batch(pub, n))
        [stream] = src._streams
        deadline = time.monotonic() + 20
        while stream.arrived < sent and time.monotonic() < deadline:  # the receiver's progress
            time.sleep(0.01)
        arrived, queued = stream.arrived, stream.queued_bytes
        stop.set()
        list(gen)
    assert arrived == sent  # every message left ZMQ while nothing consumed the updates
    assert 0 < queued <= bound  # what waits is bounded in bytes
    seq = src.tracker.publishers[0].sequence
    assert stream.shed > 0 and seq.shed == stream.shed  # the dropped are counted shed by the tracker
    assert src.received + stream.shed + src.unread_at_stop == sent  # every message accounted for
    assert seq.gaps == 0 and pub.replay_requests == []  # told in order: no gap, nothing asked again


def test_messages_received_while_the_decoding_thread_was_away_are_not_shed_at_once():
    # a first batch loading compiled code holds the decoding thread for seconds: what the receiver
    # queued meanwhile waits from when that thread sees it, as it did in the socket before
    from kvset.sources.clock import Clock
    from kvset.sources.kv_events import SHED_AFTER_S, SHED_MIN_QUEUED

    away, steps = [0.0], itertools.count()
    clock = Clock(monotonic=lambda: away[0] + 0.001 * next(steps))
    sent = 4 * SHED_MIN_QUEUED
    with FakeVllmPublisher(replay=False) as pub:
        src = KvEventsSource([pub.endpoint], idle_tick=0.05, clock=clock)
        stop = threading.Event()
        gen = src.updates(stop)
        next(gen)
        pub.wait_for_subscriber()
        for n in range(sent):
            pub.publish(big_batch(pub, n, blocks=8))
        [stream] = src._streams
        deadline = time.monotonic() + 20
        while stream.arrived < sent and time.monotonic() < deadline:
            time.sleep(0.01)
        away[0] += 10 * SHED_AFTER_S  # the decoding thread comes back long after they arrived
        for _ in gen:
            if src.received + stream.shed >= sent or time.monotonic() > deadline:
                break
        stop.set()
        list(gen)
    assert stream.shed == 0 and src.received == sent
