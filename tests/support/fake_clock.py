"""A clock for the sources (kvset.sources.clock.Clock) whose time moves only when the source waits.

A sleep or an event wait returns at once and moves the time on by what was asked (an event already
set returns without moving it), so a test drives a source's pacing exactly and sleeps nowhere.
Things scheduled with `at(t, action)` happen when the time reaches t: a writer appending to a log,
a file rotated, in the order a real writer would have done them, at the moments a test names.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable

from kvset.sources.clock import Clock

EPOCH = 1_767_225_600.0  # the wall time at monotonic 0 (2026-01-01T00:00:00Z)


class FakeClock:
    def __init__(self, epoch: float = EPOCH) -> None:
        self.now = 0.0  # monotonic seconds
        self.epoch = epoch
        self.waits: list[float] = []  # every sleep or wait asked for, in order
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    def at(self, t: float, action: Callable[[], None]) -> None:
        """Do `action` when the time reaches t (at once if it has)."""
        heapq.heappush(self._due, (t, next(self._order), action))
        self._run_due()

    def advance(self, seconds: float) -> None:
        """Move the time on, doing what falls due on the way, in time order."""
        end = self.now + max(0.0, seconds)
        while self._due and self._due[0][0] <= end:
            t, _, action = heapq.heappop(self._due)
            self.now = max(self.now, t)
            action()
        self.now = end

    def _run_due(self) -> None:
        self.advance(0.0)

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.epoch + self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.advance(seconds)

    def wait(self, event: threading.Event, timeout: float) -> bool:
        if event.is_set():
            return True
        self.waits.append(timeout)
        self.advance(timeout)
        return event.is_set()

    def clock(self) -> Clock:
        return Clock(wall=self.wall, monotonic=self.monotonic, sleep=self.sleep, wait=self.wait)
