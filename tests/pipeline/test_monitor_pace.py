"""A paused display's pipeline: it waits for its snapshot's time without waking on a timer, and a
stop or a new interval wakes it at once."""

import threading
from functools import partial

from kvset.core.stack_distance import new_analyzer
from kvset.monitor import Monitor
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.base import Source
from kvset.sources.threads import SourceThreads
from kvset.types import SourceHealth, SourceUpdate


class QuietSource(Source):
    """Says hello, then once more when told (`go`), then waits for the stop: an engine with no traffic."""

    name = kind = "quiet"

    def __init__(self) -> None:
        self.paces: list[float] = []
        self.go = threading.Event()

    def updates(self, stop):
        yield SourceUpdate(health=SourceHealth(self.name, self.kind, True, "connected"))
        self.go.wait()
        yield SourceUpdate(health=SourceHealth(self.name, self.kind, True, "still connected"))
        stop.wait()

    def pace(self, seconds: float) -> None:
        self.paces.append(seconds)


def _running(monkeypatch, interval: float):
    """A monitor running in a thread with a quiet source; the queue waits it asked for; its snapshots."""
    waits: list[float] = []
    take = SourceThreads.take

    def recorded(self, timeout):
        waits.append(timeout)
        return take(self, timeout)

    monkeypatch.setattr(SourceThreads, "take", recorded)
    source = QuietSource()
    monitor = Monitor(
        [source], partial(new_analyzer, horizon=1000), SnapshotBuilder(SnapshotConfig()), interval
    )
    stop, published = threading.Event(), threading.Semaphore(0)
    thread = threading.Thread(target=monitor.run, args=(stop, lambda _s: published.release()), daemon=True)
    thread.start()
    assert published.acquire(timeout=10)  # the first snapshot
    return monitor, source, stop, thread, published, waits


def test_a_paused_pipeline_waits_for_its_snapshot_and_a_stop_wakes_it(monkeypatch):
    monitor, source, stop, thread, _, waits = _running(monkeypatch, interval=60.0)
    assert source.paces == [60.0]  # the source was told the pace
    source.go.set()  # its update is applied in the wait, which goes on
    stop.set()
    thread.join(10)
    assert not thread.is_alive()  # woken by the stop, not by the 60 s
    # after the first snapshot it asked the queue for the whole wait, not a timer's tick at a time
    assert max(waits) > 50


def test_a_new_interval_wakes_the_pipeline_and_its_sources(monkeypatch):
    monitor, source, stop, thread, published, _ = _running(monkeypatch, interval=60.0)
    try:
        monitor.interval = 0.05  # the display resumed
        assert source.paces == [60.0, 0.05]
        source.go.set()
        assert published.acquire(timeout=10)  # the change is shown long before the 60 s
    finally:
        source.go.set()
        stop.set()
        thread.join(10)
