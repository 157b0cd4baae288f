"""An analyzer slower than its sources: the backlog waiting for it is shown per source, and `--once`
analyses everything that was queued before it stops instead of dropping it unreported."""

from __future__ import annotations

import threading
import time

import numpy as np

from kvset.core.analyzer import Analyzer
from kvset.monitor import Monitor
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.base import Source
from kvset.types import AccessBatch, SourceHealth, SourceUpdate

BATCHES, PER_BATCH = 40, 100


class Burst(Source):
    """Hands over all its batches at once, then stays connected until stopped."""

    kind = "test"
    name = "burst"

    def __init__(self) -> None:
        self.handed_over = threading.Event()

    def updates(self, stop):
        yield SourceUpdate(health=SourceHealth(self.name, self.kind, True, "connected"))
        for i in range(BATCHES):
            keys = np.arange(i * PER_BATCH, (i + 1) * PER_BATCH, dtype=np.uint64)
            yield SourceUpdate(accesses=AccessBatch(keys, timestamps=float(i)))
        # The generator resumes here only once the last batch is queued.
        self.handed_over.set()
        while not stop.is_set():
            stop.wait(0.05)
            yield SourceUpdate(health=SourceHealth(self.name, self.kind, True, "connected"))


class SlowAnalyzer(Analyzer):
    def feed_batch(self, batch):
        time.sleep(0.05)
        return super().feed_batch(batch)


def monitor(source: Source | None = None) -> Monitor:
    return Monitor(
        [source or Burst()],
        lambda units, **slots: SlowAnalyzer(10_000, units=units, **slots),
        SnapshotBuilder(SnapshotConfig()),
        interval=0.05,
    )


def test_once_analyses_every_queued_batch_before_it_stops():
    snap = monitor().collect(0.3)  # stops while most batches still wait in the queue
    assert snap.totals.accesses == BATCHES * PER_BATCH


def test_the_backlog_waiting_for_the_analyzer_is_in_the_source_health():
    burst = Burst()
    m = monitor(burst)
    stop = threading.Event()
    snaps = []
    # A snapshot delivered after one that already saw every batch queued was built after that too
    # (on a loaded machine the source may still be handing over when the first one is taken).
    seen_all = []

    def delivered(snap):
        if seen_all:
            snaps.append(snap)
        elif burst.handed_over.is_set():
            seen_all.append(True)

    t = threading.Thread(target=m.run, args=(stop, delivered), daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not snaps and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    t.join(10)
    assert snaps, "no snapshot after the source handed everything over"
    backlog = dict(snaps[0].sources[0].details).get("backlog", "")
    assert "waiting for the analyzer" in backlog
    waiting = int(backlog.split(" batch")[0].replace(",", ""))
    assert waiting + snaps[0].totals.accesses // PER_BATCH == BATCHES  # analysed + waiting = handed over
