"""The KV-event source loads the tracker's compiled code while its sockets connect, before it decodes
its first message, so a stream's first batches do not wait for it (issue 25: the figures stood still
longer at start)."""

from __future__ import annotations

import threading

from kvset.engine.stream_shape import REQUEST_STEPS
from kvset.sources import kv_events
from kvset.sources.kv_event_warm_up import load_compiled_code
from kvset.sources.kv_events import KvEventsSource
from tests.support.vllm_publisher import FakeVllmPublisher


def test_the_warm_up_runs_the_tracker_and_the_engine_model_whole_growth_included() -> None:
    tracker = load_compiled_code()
    publisher = tracker.publishers[0]
    assert not tracker.rejects  # every event decoded
    assert publisher.shape.decided == REQUEST_STEPS
    counts = publisher.replay.counts
    assert (counts.requests, counts.reports, counts.admitted) == (2, 1, 1)  # the lookup was replayed
    queue = publisher.replay.queue
    assert len(queue._tkeys) > 1024 and len(queue._slot_key) > 1024  # grown past the first tables


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
