"""`--log PATH`: block accesses and the engine's own readings from a vLLM or SGLang log.

This module tails the file (following rotation and truncation, or reading it once) and hands
each line to kvset.engine.log_tracker, which knows what the lines mean.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterator

from kvset.engine import ENGINES, TRUNCATED_POLICIES
from kvset.engine.log_tracker import LogTracker
from kvset.rejects import RejectCounter
from kvset.sources.base import IDLE_TICK, Source
from kvset.sources.clock import REAL_CLOCK, Clock
from kvset.sources.tail import FileTailer
from kvset.types import SourceHealth, SourceUpdate, TimelineEvent
from kvset.units import DEFAULT_HASH_ALGO, StreamUnits

__all__ = ["ENGINES", "TRUNCATED_POLICIES", "LogSource"]


class LogSource(Source):
    """Reads or follows an engine log (see kvset.engine.log_tracker for what it finds there)."""

    kind = "log"

    def __init__(
        self,
        path: str | os.PathLike[str],
        follow: bool = True,
        engine: str = "auto",
        block_size: int | None = None,
        hash_algo: str = DEFAULT_HASH_ALGO,
        python_hash_seed: str | None = None,
        max_log_len: int | None = None,
        truncated: str = "skip",
        from_end: bool = False,
        window_s: float = 60.0,
        max_bytes_per_read: int = 4 << 20,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.path = os.fspath(path)
        self.clock = clock
        self.follow = follow
        self.rejects = RejectCounter()
        reference = None  # a finished log's timestamps are read against its mtime, a live one's against now
        if not follow:
            try:
                reference = os.stat(self.path).st_mtime
            except OSError:
                reference = None
        self.tracker = LogTracker(
            engine=engine,
            block_size=block_size,
            hash_algo=hash_algo,
            python_hash_seed=python_hash_seed,
            max_log_len=max_log_len,
            truncated=truncated,
            window_s=window_s,
            clock_reference=self.clock.wall() if reference is None else reference,
            rejects=self.rejects,
        )
        # known before reading: the prompts are hashed into blocks of the engine's block size
        self.units: StreamUnits | None = self.tracker.units
        self.name = f"log {self.path}"
        self.address = self.path
        self._tailer = FileTailer(
            self.path, follow=follow, from_end=from_end, max_bytes=max_bytes_per_read, clock=clock
        )
        self.last_data_at: float | None = None
        self._events: list[TimelineEvent] = []
        self._status = "starting"
        self.read_error: str | None = None  # why the file could not be read (on), shown in the notes

    @property
    def block_size(self) -> int:
        return self.tracker.block_size

    @property
    def hash_algo(self) -> str:
        return self.tracker.hash_algo

    @property
    def lines(self) -> int:
        return self.tracker.lines

    @property
    def engines_seen(self) -> set[str]:
        return self.tracker.engines_seen

    # -- the Source interface -------------------------------------------------------------

    def updates(self, stop: threading.Event) -> Iterator[SourceUpdate]:
        while not stop.is_set():
            read = self._tailer.read(timeout=IDLE_TICK if self.follow else 0.0)
            now = self.clock.wall()
            if read.lines and self.follow:
                self.read_error = None  # reading again
            for ev in read.events:
                if ev.kind == "line-too-long":
                    self.rejects.reject("line longer than the tail limit", ev.text)
                else:
                    if ev.kind == "read-error":
                        self.read_error = ev.text
                    self._events.append(ev.to_timeline())
            for number, raw in read.lines:
                self.tracker.read_line(number, raw, now)
            if read.waiting:
                self._status = "waiting for file"
            elif read.finished:
                self._status = self._finished_state()
            else:
                self._status = "following" if self.follow else "reading"
            if read.lines:
                self.last_data_at = now
            update = self.tracker.take(now)
            events, self._events = tuple(self._events) + update.events, []
            yield dataclasses.replace(update, health=self.health(), events=events)
            if read.finished:
                return

    def _finished_state(self) -> str:
        """A whole read that gave no line at all failed (unreadable, or nothing in it)."""
        if self.tracker.lines:
            return "finished"
        return f"failed: {self.read_error}" if self.read_error else "failed: the log is empty"

    def close(self) -> None:
        self._tailer.close()

    def health(self) -> SourceHealth:
        notes: list[str] = []
        if self.read_error is not None:
            if self.follow:
                notes.append(f"cannot read the log: {self.read_error}")
            else:
                notes.append(
                    f"the log could not be read to its end ({self.read_error}); what came before is used"
                )
        parts = self.tracker.health_parts()
        details = (
            *parts.details,
            ("rotations", str(self._tailer.rotations)),
            ("truncations", str(self._tailer.truncations)),
        )
        return SourceHealth(
            source=self.name,
            kind=self.kind,
            connected=self._status not in ("waiting for file", "starting"),
            state=self._status,
            last_data_at=self.last_data_at,
            received=self.tracker.lines,
            accesses=self.tracker.accesses,
            rejected=self.rejects.summary(),
            notes=(*notes, *parts.notes),
            finished=self._status == "finished" or self._status.startswith("failed"),
            details=details,
        )
