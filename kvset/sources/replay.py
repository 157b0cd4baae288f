"""Replay a trace file: at its own timestamps times a speed, or as fast as the analyzer takes it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

from kvset.formats import TraceError, read_trace
from kvset.sources.base import Source, SourceHealth, SourceUpdate, TimelineEvent

PACED_BATCH = 4096  # accesses per batch when pacing by timestamps
FAST_BATCH = 1 << 18


class ReplaySource(Source):
    kind = "replay"

    def __init__(
        self,
        path: str,
        speed: float | None = 1.0,
        format: str | None = None,
        block_size: int | None = None,
        hash_algo: str = "sha256",
        python_hash_seed: str | None = None,
    ) -> None:
        self.path = path
        self.speed = speed
        self.format = format
        self.block_size = block_size
        self.hash_algo = hash_algo
        self.python_hash_seed = python_hash_seed
        pace = "as fast as possible" if not speed else f"{speed:g}x"
        self.name = f"replay {Path(path).name} ({pace})"

    def _health(self, state: str, delivered: int, trace=None, finished=False, connected=True) -> SourceHealth:
        return SourceHealth(
            source=self.name,
            kind=self.kind,
            connected=connected,
            state=state,
            last_data_at=time.time() if delivered else None,
            received=trace.lines if trace is not None else 0,
            accesses=delivered,
            rejected=trace.rejects.summary() if trace is not None else (),
            notes=tuple(trace.notes) if trace is not None else (),
            finished=finished,
        )

    def updates(self, stop: threading.Event) -> Iterator[SourceUpdate]:
        yield SourceUpdate(health=self._health("reading trace", 0))
        try:
            trace = read_trace(self.path, format=self.format, block_size=self.block_size,
                               hash_algo=self.hash_algo, python_hash_seed=self.python_hash_seed)  # fmt: skip
        except (TraceError, OSError) as exc:
            yield SourceUpdate(
                health=self._health(f"failed: {exc}", 0, finished=True, connected=False),
                events=(TimelineEvent(time.time(), "source-failed", f"{self.name}: {exc}"),),
            )
            return
        delivered = 0
        t0 = float(trace.request_timestamps[0]) if trace.requests else 0.0
        wall0 = time.monotonic()
        for batch in trace.batches(PACED_BATCH if self.speed else FAST_BATCH):
            if stop.is_set():
                return
            if self.speed:
                due = wall0 + (float(batch.timestamps[0]) - t0) / self.speed
                while not stop.is_set() and time.monotonic() < due:
                    stop.wait(min(0.25, due - time.monotonic()))
                    if time.monotonic() < due:  # stay visible while waiting for the next request
                        yield SourceUpdate(health=self._health("replaying: waiting for the next request", delivered, trace))
            delivered += len(batch)
            yield SourceUpdate(accesses=batch, health=self._health("replaying", delivered, trace))
        yield SourceUpdate(health=self._health(f"finished: {delivered:,} accesses replayed", delivered, trace,
                                               finished=True, connected=False))  # fmt: skip
