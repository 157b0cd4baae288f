"""A KV-event flood the source cannot keep up with: its backlog is shown, what is left unread when it
stops is counted, and what ZMQ drops at its high-water marks is counted lost (as sequence gaps), what
the source drops past its bound counted shed."""

from __future__ import annotations

import threading
import time

from kvset.quantities import plural
from kvset.sources.kv_events import KvEventsSource
from tests.support.vllm_publisher import FakeVllmPublisher


def big_batch(pub: FakeVllmPublisher, n: int, blocks: int = 2000) -> list:
    hashes = list(range(n * blocks + 1, (n + 1) * blocks + 1))
    return [pub.stored(hashes), pub.removed(hashes[: blocks // 2])]


def read_the_flood(gen, src, pub: FakeVllmPublisher, sent: int, timeout: float) -> list:
    """Updates while the flood's survivors arrive, until none comes for half a second; then one batch
    more, which reveals the last gap, and the updates until it is seen."""
    updates, deadline, quiet_since = [], time.monotonic() + timeout, None
    for update in gen:
        updates.append(update)
        if update.accesses is not None or quiet_since is None:
            quiet_since = time.monotonic()
        if time.monotonic() - quiet_since > 0.5 or time.monotonic() > deadline:
            break
    pub.publish(big_batch(pub, sent))
    for update in gen:
        updates.append(update)
        if src.tracker.publishers[0].sequence.last_seq == sent or time.monotonic() > deadline:
            break
    return updates


def test_a_source_behind_its_socket_shows_the_backlog_and_counts_what_it_left_unread():
    sent = 300
    with FakeVllmPublisher(replay=False) as pub:
        src = KvEventsSource([pub.endpoint], idle_tick=0.05, flush_accesses=20_000)
        stop = threading.Event()
        gen = src.updates(stop)
        next(gen)  # sockets open
        pub.wait_for_subscriber()
        for n in range(sent):
            pub.publish(big_batch(pub, n))
        time.sleep(1.0)  # all of it queued in the SUB socket, none read yet
        first = next(u for u in gen if u.accesses is not None)
        backlog = dict(first.health.details)["backlog"]
        assert "messages waiting in the socket: the source is not keeping up" in backlog
        stop.set()
        rest = list(gen)  # the source returns, with a last word on what it left behind
    last = rest[-1].health
    assert src.unread_at_stop > 0
    [stream] = src._streams
    assert last.received + stream.shed + src.unread_at_stop == sent  # every message read, shed or counted
    assert f"{src.unread_at_stop:,} messages still waiting in the socket when kvset stopped" in " ".join(
        last.notes
    )
    assert f"{src.unread_at_stop:,} messages unread at stop" in dict(last.details)["backlog"]


def test_messages_dropped_at_the_high_water_marks_or_the_backlog_bound_are_all_counted():
    sent = 2000
    with FakeVllmPublisher(replay=False, sndhwm=20) as pub:
        src = KvEventsSource([pub.endpoint], idle_tick=0.05, rcvhwm=20)
        stop = threading.Event()
        gen = src.updates(stop)
        next(gen)
        pub.wait_for_subscriber()
        for n in range(sent):  # far more than the two high-water marks and the TCP buffers hold
            pub.publish(big_batch(pub, n))
        time.sleep(1.0)
        updates = read_the_flood(gen, src, pub, sent, timeout=30)
        stop.set()
        list(gen)
    seq = src.tracker.publishers[0].sequence
    assert seq.last_seq == sent
    delivered = src.tracker.publishers[0].batches
    assert delivered < sent  # dropped: by ZMQ (the marks are small) or by the source's own bound
    # every batch not decoded is counted once: lost in a gap (ZMQ's drops) or shed by the source
    assert seq.lost + seq.shed == sent + 1 - delivered - seq.first_seq
    notes = " ".join(updates[-1].health.notes)
    if seq.lost:
        # a single dropped batch is said in the singular ("1 event batch")
        assert f"{plural(seq.lost, 'event batch', 'event batches')} lost in sequence gaps" in notes
    if seq.shed:
        assert f"{plural(seq.shed, 'message')} (" in notes
