"""Replay a trace file: at its own timestamps times a speed, or as fast as the analyzer takes it.

A paced replay can change speed and pause while it plays (the app's `+`, `-` and space): the
playhead keeps the trace time reached, so a new speed goes on from there and a pause holds it; the
time of the last delivery (the data age) is when accesses were really handed over, not when the
source last spoke.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from kvset.formats import TraceError, TraceLineParser
from kvset.formats.stream import TraceStream
from kvset.quantities import plural
from kvset.sources.base import IDLE_TICK, Source
from kvset.sources.clock import REAL_CLOCK, Clock
from kvset.sources.tail import FileTailer
from kvset.types import AccessBatch, SourceHealth, SourceUpdate, TimelineEvent
from kvset.units import DEFAULT_HASH_ALGO

PACED_BATCH = 4096  # accesses per batch when pacing by timestamps
FAST_BATCH = 1 << 18
MIN_SPEED, MAX_SPEED = 1 / 64, 4096.0  # what `+` and `-` reach


class Playhead:
    """Where a paced replay is in its trace: trace time = `at` + (now - `since`) x speed, unless paused.
    Changed from the app's thread, read from the source's: under a lock."""

    def __init__(self, speed: float, clock: Clock) -> None:
        self.clock = clock
        self.speed = speed
        self.paused = False
        self._lock = threading.Lock()
        self._at: float | None = None  # trace seconds at `since` (None: before the first request)
        self._since = 0.0

    def _position(self, now: float) -> float:
        assert self._at is not None
        return self._at if self.paused else self._at + (now - self._since) * self.speed

    def wait_for(self, stamp: float) -> float:
        """Seconds of wall time until the request stamped `stamp` is due (inf while paused)."""
        with self._lock:
            now = self.clock.monotonic()
            if self._at is None:
                self._at, self._since = stamp, now
            if self.paused:
                return float("inf")
            return max(0.0, (stamp - self._position(now)) / self.speed)

    def _rebase(self) -> None:
        now = self.clock.monotonic()
        if self._at is not None:
            self._at, self._since = self._position(now), now

    def change_speed(self, factor: float) -> float:
        with self._lock:
            self._rebase()
            self.speed = min(MAX_SPEED, max(MIN_SPEED, self.speed * factor))
            return self.speed

    def toggle_pause(self) -> bool:
        with self._lock:
            self._rebase()
            self.paused = not self.paused
            return self.paused


class ReplaySource(Source):
    """The stream's units are the trace's: its format's, --block-size, or settled from its first
    lines (kvset.formats.block_size); said with the first accesses."""

    kind = "replay"
    units = None

    def __init__(
        self,
        path: str,
        speed: float | None = 1.0,
        format: str | None = None,
        block_size: int | None = None,
        hash_algo: str = DEFAULT_HASH_ALGO,
        python_hash_seed: str | None = None,
        follow: bool = False,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        """follow: tail the file like `tail -F` (rotation and truncation handled), playing new
        requests as they are written, instead of reading it once in timestamp order."""
        self.path = path
        self.clock = clock
        self.follow = follow
        self.speed = speed
        self.format = format
        self.block_size = block_size
        self.hash_algo = hash_algo
        self.python_hash_seed = python_hash_seed
        pace = "following" if follow else ("as fast as possible" if not speed else f"{speed:g}x")
        self.name = f"replay {Path(path).name} ({pace})"
        self.address = str(path)
        # the speed and pause controls: a paced replay of a whole file only
        self.playhead = Playhead(speed, clock) if speed and not follow else None
        self.last_data_at: float | None = None  # wall time accesses were last handed over

    def change_speed(self, factor: float) -> float | None:
        """Multiply the speed (clamped to MIN_SPEED..MAX_SPEED); the new speed, None when not paced."""
        return None if self.playhead is None else self.playhead.change_speed(factor)

    def toggle_pause(self) -> bool | None:
        """Pause or resume reading; whether now paused, None when not paced."""
        return None if self.playhead is None else self.playhead.toggle_pause()

    def _pace(self) -> str:
        if self.playhead is None:
            return ""
        return f" at {self.playhead.speed:g}x"

    def _health(self, state: str, delivered: int, trace=None, finished=False, connected=True) -> SourceHealth:
        return SourceHealth(
            source=self.name,
            kind=self.kind,
            connected=connected,
            state=state,
            last_data_at=self.last_data_at if delivered else None,
            received=trace.lines if trace is not None else 0,
            accesses=delivered,
            rejected=trace.rejects.summary() if trace is not None else (),
            # the stream's notes are complete at its end; until then, the parser's
            notes=tuple(trace.notes or trace.parser.notes) if trace is not None else (),
            finished=finished,
        )

    def updates(self, stop: threading.Event) -> Iterator[SourceUpdate]:
        if self.follow:
            yield from self._follow(stop)
            return
        yield SourceUpdate(health=self._health("reading trace", 0))
        # a stream: the first batches play while the rest of the file is still being read
        trace = TraceStream(
            self.path,
            format=self.format,
            block_size=self.block_size,
            hash_algo=self.hash_algo,
            python_hash_seed=self.python_hash_seed,
            exact=False,
        )
        delivered = 0
        playhead = self.playhead
        try:
            for chunk in trace:
                for batch in _pieces(chunk, PACED_BATCH if playhead else FAST_BATCH):
                    if stop.is_set():
                        return
                    stamp = float(np.asarray(batch.timestamps).flat[0])  # a trace's: one per access
                    # asked again after each wait: the speed or the pause may have changed meanwhile
                    while (
                        playhead is not None and not stop.is_set() and (wait := playhead.wait_for(stamp)) > 0
                    ):
                        self.clock.wait(stop, min(IDLE_TICK, wait))
                        # stay visible while waiting for the next request (or paused)
                        if playhead.wait_for(stamp) > 0:
                            doing = (
                                "paused (space resumes)"
                                if playhead.paused
                                else "replaying: waiting for the next request"
                            )
                            yield SourceUpdate(health=self._health(doing + self._pace(), delivered, trace))
                    if stop.is_set():
                        return
                    delivered += len(batch)
                    self.last_data_at = self.clock.wall()
                    yield SourceUpdate(
                        accesses=batch,
                        health=self._health("replaying" + self._pace(), delivered, trace),
                        units=trace.units,
                    )
        except (TraceError, OSError) as exc:
            # The first line says what failed; the rest (the rejection reasons) goes to the notes.
            first, *why = [line for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
            health = self._health(f"failed: {first}", delivered, trace, finished=True, connected=False)
            yield SourceUpdate(
                health=dataclasses.replace(health, notes=health.notes + tuple(why)),
                events=(TimelineEvent(self.clock.wall(), "source-failed", f"{self.name}: {first}"),),
            )
            return
        yield SourceUpdate(
            health=self._health(
                f"finished: {plural(delivered, 'access', 'accesses')} replayed",
                delivered,
                trace,
                finished=True,
                connected=False,
            )
        )

    def _follow(self, stop: threading.Event) -> Iterator[SourceUpdate]:
        parser = TraceLineParser(
            self.format,
            block_size=self.block_size,
            hash_algo=self.hash_algo,
            python_hash_seed=self.python_hash_seed,
        )
        tailer = FileTailer(self.path, follow=True, clock=self.clock)
        delivered = lines = 0
        last_data = None
        try:
            while not stop.is_set():
                read = tailer.read(timeout=IDLE_TICK)
                now = self.clock.wall()
                events = tuple(ev.to_timeline() for ev in read.events if ev.kind != "line-too-long")
                for ev in read.events:
                    if ev.kind == "line-too-long":
                        parser.rejects.reject("line longer than the tail limit", ev.text)
                batches = [b for b in self._parse_runs(parser, read.lines, now) if len(b)]
                lines += len(read.lines)
                for b in batches:
                    delivered += len(b)
                if read.lines:
                    last_data = now
                state = "waiting for the file" if read.waiting else "following"
                health = SourceHealth(
                    source=self.name,
                    kind=self.kind,
                    connected=not read.waiting,
                    state=state,
                    last_data_at=last_data,
                    received=lines,
                    accesses=delivered,
                    rejected=parser.rejects.summary(),
                    notes=tuple(parser.notes),
                )
                if not batches:
                    yield SourceUpdate(health=health, events=events)
                for i, b in enumerate(batches):
                    yield SourceUpdate(
                        accesses=b, health=health, events=events if i == 0 else (), units=parser.units
                    )
        finally:
            tailer.close()

    @staticmethod
    def _parse_runs(
        parser: TraceLineParser, numbered: list[tuple[int, bytes]], now: float
    ) -> list[AccessBatch]:
        """Parse runs of consecutive line numbers (a rotation restarts the numbering)."""
        out = []
        i = 0
        while i < len(numbered):
            j = i + 1
            while j < len(numbered) and numbered[j][0] == numbered[j - 1][0] + 1:
                j += 1
            try:
                parsed = parser.feed_lines([raw for _, raw in numbered[i:j]], numbered[i][0])
            except TraceError as exc:  # only in strict mode; followed files are never strict
                parser.rejects.reject("unreadable lines", str(exc))
                parsed = None
            if parsed is not None and parsed.requests:
                stamps = np.where(np.isnan(parsed.request_timestamps), now, parsed.request_timestamps)
                principals = parsed.access_principals()
                out.append(
                    AccessBatch(
                        keys=parsed.keys,
                        tokens=parsed.tokens,
                        request_starts=parsed.request_starts,
                        timestamps=np.repeat(stamps, parsed.request_lengths()),
                        block_size=parser.block_size,
                        principals=principals,
                        principal_names=parser.principal_names if principals is not None else None,
                    )
                )
            i = j
        return out


def _pieces(batch: AccessBatch, max_accesses: int) -> Iterator[AccessBatch]:
    """Whole requests, at most max_accesses a piece (a longer request is a piece of its own)."""
    starts = np.asarray(batch.request_starts)
    bounds = np.append(starts, len(batch))
    first = 0
    while first < len(starts):
        begin = int(bounds[first])
        last = min(
            max(int(np.searchsorted(bounds, begin + max_accesses, side="right")) - 1, first + 1), len(starts)
        )
        end = int(bounds[last])
        yield AccessBatch(
            keys=batch.keys[begin:end],
            tokens=np.asarray(batch.tokens)[begin:end],  # a trace's: one per access (a view, no copy)
            request_starts=starts[first:last] - begin,
            timestamps=np.asarray(batch.timestamps)[begin:end],
            block_size=batch.block_size,
            principals=None if batch.principals is None else batch.principals[begin:end],  # --by
            principal_names=batch.principal_names,
        )
        first = last
