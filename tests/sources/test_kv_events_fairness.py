"""Several ranks, one flooding: every rank is read in turn (the quiet one is not starved, the flooding
one is shown behind); and a publisher faster than decoding costs a bounded number of bytes, what
passes the bound shed (the oldest first), counted and shown."""

from __future__ import annotations

import threading
import time

from kvset.sources.kv_events import KvEventsSource
from tests.sources.test_kv_events_backlog import big_batch, read_the_flood
from tests.support.vllm_publisher import FakeVllmPublisher


def test_a_flooding_rank_does_not_starve_the_others_and_is_shown_behind():
    flood, quiet = 200, 20
    with FakeVllmPublisher(rank=0, replay=False) as loud, FakeVllmPublisher(rank=1, replay=False) as calm:
        src = KvEventsSource([loud.endpoint, calm.endpoint], idle_tick=0.05, flush_accesses=20_000)
        stop = threading.Event()
        gen = src.updates(stop)
        next(gen)
        loud.wait_for_subscriber()
        calm.wait_for_subscriber()
        for n in range(flood):
            loud.publish(big_batch(loud, n))
        for n in range(quiet):
            calm.publish([calm.stored([10**9 + 8 * n + i for i in range(8)])])
        time.sleep(1.0)  # everything is waiting in the two sockets
        loud_rank, calm_rank = src.tracker.publishers
        deadline, backlog = time.monotonic() + 60, ""
        for update in gen:
            backlog = dict(update.health.details).get("backlog", "")
            if calm_rank.batches == quiet or time.monotonic() > deadline:
                break
        loud_read = loud_rank.batches
        stop.set()
        list(gen)
    assert calm_rank.batches == quiet
    # read in turn: the quiet rank's batches came about one for one with the flood's, not after it
    assert loud_read <= 2 * quiet + 10, loud_read
    assert "rank 0 behind: " in backlog and "rank 1 behind" not in backlog


def test_a_publisher_faster_than_decoding_is_bounded_in_bytes_and_what_is_shed_is_counted_and_shown():
    sent, bound = 300, 2 * 1024 * 1024  # about 24 MiB published against a 2 MiB backlog
    with FakeVllmPublisher(replay=False) as pub:
        src = KvEventsSource([pub.endpoint], idle_tick=0.05, flush_accesses=20_000, backlog_bytes=bound)
        stop = threading.Event()
        gen = src.updates(stop)
        next(gen)
        pub.wait_for_subscriber()
        for n in range(sent):
            pub.publish(big_batch(pub, n))
        time.sleep(1.0)
        updates = read_the_flood(gen, src, pub, sent, timeout=60)
        stop.set()
        list(gen)
    [stream] = src._streams
    assert 0 < stream.peak_queued_bytes <= bound
    assert stream.shed > 0
    seq = src.tracker.publishers[0].sequence
    delivered = src.tracker.publishers[0].batches
    # every batch published is decoded or shed; a shed batch is counted shed, not a gap to replay
    assert delivered + stream.shed == sent + 1
    assert seq.shed == stream.shed and seq.lost == 0 and seq.gaps == 0
    health = updates[-1].health
    notes = " ".join(health.notes)
    assert f"{stream.shed:,} messages (" in notes and "shed unread" in notes
    assert dict(health.counts)["batches_shed"] == stream.shed  # the exporter's kvset_batches_shed_total
