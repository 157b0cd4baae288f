"""The KV-event source loads the tracker's compiled code while its sockets connect, before it decodes
its first message, so a stream's first batches do not wait for it, and it makes its update when a
publisher falls quiet, not at its next tick (issue 25: the figures stood still longer at the start
and at the end of a stream)."""

from __future__ import annotations

import threading

import pytest

from kvset.engine.stream_shape import RADIX_INSERTS, REQUEST_STEPS
from kvset.sources import kv_events
from kvset.sources.kv_event_warm_up import load_compiled_code
from kvset.sources.kv_events import KvEventsSource
from tests.support.kv_values import message, stored
from tests.support.vllm_publisher import FakeVllmPublisher


def test_the_warm_up_runs_the_tracker_and_the_engine_model_whole_growth_included() -> None:
    tracker, sglang = load_compiled_code()
    publisher = tracker.publishers[0]
    assert not tracker.rejects  # every event decoded
    assert publisher.shape.decided == REQUEST_STEPS
    counts = publisher.replay.counts
    assert (counts.requests, counts.reports, counts.admitted) == (2, 1, 1)  # the lookup was replayed
    queue = publisher.replay.queue
    assert len(queue._tkeys) > 1024 and len(queue._slot_key) > 1024  # grown past the first tables
    # SGLang's radix replay, which a vLLM stream no longer feeds while its shape is undecided
    radix = sglang.publishers[0]
    assert not sglang.rejects and radix.shape.decided == RADIX_INSERTS
    assert radix.radix.counts.requests == 2 and len(radix.radix.queue._tkeys) > 1024


def test_the_source_loads_it_after_opening_its_sockets_and_before_its_first_message(monkeypatch) -> None:
    order: list[str] = []
    with FakeVllmPublisher(replay=False) as pub:
        src = KvEventsSource([pub.endpoint], idle_tick=0.05)
        published = src.tracker.published

        def load() -> None:
            order.append("loaded" if src._receiver is not None else "loaded before the sockets")

        def decode(*args, **kwargs):
            order.append("decoded")
            return published(*args, **kwargs)

        monkeypatch.setattr(kv_events, "load_compiled_code", load)
        monkeypatch.setattr(src.tracker, "published", decode)
        stop = threading.Event()
        gen = src.updates(stop)
        next(gen)
        pub.wait_for_subscriber()
        pub.publish([pub.stored([1, 2, 3])])
        for _ in gen:
            if "decoded" in order:
                break
        stop.set()
        list(gen)
    assert order[:2] == ["loaded", "decoded"]


def test_the_source_wakes_when_a_publisher_falls_quiet_rather_than_at_its_next_tick() -> None:
    """The tracker finishes a quiet publisher's last requests at the update after its quiet second:
    the source makes that update then (its figures stood still up to a tick longer at a stream's end)."""
    src = KvEventsSource(["tcp://127.0.0.1:1"], idle_tick=0.25)
    src.tracker.published(0, message(0, [stored([1, 2, 3])]), now=10.0, at=1000.0)
    quiet = src._quiet_at()
    assert (
        quiet is not None
        and 10.0 + src.tracker.quiet_seconds <= quiet < 10.0 + src.tracker.quiet_seconds + 0.01
    )
    assert src._wait_for(10.9, next_tick=11.15, quiet=quiet) == pytest.approx(quiet - 10.9)
    assert src._wait_for(10.9, next_tick=11.0, quiet=quiet) == pytest.approx(0.1)  # a tick first
    update = src.tracker.take(1000.0 + src.tracker.quiet_seconds + 0.005)
    assert update.accesses is not None and update.accesses.keys.tolist() == [1, 2, 3]
    assert src._quiet_at() is None  # finished: nothing more to wake for


def _feed_until_a_request_finishes(src: KvEventsSource, seq: int) -> int:
    """Batches of one new 10-block request each from `seq` on, 0.02 s apart, until the engine model's
    replay (its delay line and finish lag behind the stream) finishes one; returns the next seq."""
    while not src.tracker.pending:
        ts = 1000.0 + seq * 0.02
        blocks = list(range(1 + 10 * seq, 11 + 10 * seq))
        src.tracker.published(0, message(seq, [stored(blocks)], ts=ts), now=10.0 + seq * 0.02, at=ts)
        seq += 1
    return seq


def test_the_first_accesses_after_a_stand_still_make_an_update_at_once_not_at_the_next_tick() -> None:
    """A flood's first figure waited for 65,536 accesses (7 of its requests) or the next tick after its
    first request finished: 0.14 s more at the start (issue 25)."""
    src = KvEventsSource(["tcp://127.0.0.1:1"], idle_tick=0.25, flush_accesses=65536)
    seq = _feed_until_a_request_finishes(src, 0)
    assert seq == 32 + 7 + 1 and src.tracker.pending == 10  # the delay line, the finish lag
    now = 10.0 + seq * 0.02
    assert src._update_due(now)  # the stream's first accesses: at once
    src.tracker.take(1000.0 + seq * 0.02)
    src._handed_out_at, src._pending_left = now, 0  # handed out
    seq = _feed_until_a_request_finishes(src, seq)
    later = 10.0 + seq * 0.02
    assert later - now < 0.25 and not src._update_due(later)  # accesses move: the tick batches them
    assert src._update_due(now + 0.25)  # they stood still a tick: at once
    src._pending_left = src.tracker.pending  # an update left them (the stream's shape undecided, say)
    assert not src._update_due(now + 0.3)  # not one update after another for the same accesses
