"""Each source in a worker thread of its own, handing its updates to the pipeline over one queue.

The queue is bounded (QUEUE_UPDATES), so a fast replay waits for the analyzer instead of filling
memory. A source that raises ends in a failed health update, never in the pipeline's thread. The
updates with accesses that wait in the queue are counted per source: the backlog the screen shows.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import traceback
from collections.abc import Sequence

from kvset.rejects import Rejection
from kvset.sources.base import Source
from kvset.types import SourceHealth, SourceUpdate, TimelineEvent

QUEUE_UPDATES = 64
PUT_RETRY_SECONDS = 0.2  # how often a waiting source thread looks at `stop`


class Finished:
    """Queue marker: a source's iterator ended (normally or not)."""

    def __init__(self, index: int) -> None:
        self.index = index


class Wake:
    """Queue marker: the pipeline is asked to look at `stop` and its snapshot time again."""


WAKE = Wake()

QueueItem = SourceUpdate | Finished | Wake


class SourceThreads:
    """The sources' threads and their queue; `take` is called from the pipeline thread only."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self.sources = list(sources)
        self._queue: queue.Queue[tuple[int, QueueItem]] = queue.Queue(maxsize=QUEUE_UPDATES)
        self._threads: list[threading.Thread] = []
        self._backlog_lock = threading.Lock()
        self._backlog_updates = [0] * len(self.sources)
        self._backlog_accesses = [0] * len(self.sources)
        self._wake_asked = threading.Event()

    def start(self, stop: threading.Event) -> None:
        for i, s in enumerate(self.sources):
            t = threading.Thread(target=self._pump, args=(i, s, stop), name=f"kvset-source-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        # `stop` wakes the pipeline at once, so that it need not wake on a timer to look at it
        watch = threading.Thread(target=self._wake_on, args=(stop,), name="kvset-stop-watch", daemon=True)
        watch.start()

    def _wake_on(self, stop: threading.Event) -> None:
        stop.wait()  # no timeout: blocks without waking until set
        self.wake()

    def wake(self) -> None:
        """Make the pipeline's current or next `take` return WAKE (from any thread)."""
        self._wake_asked.set()
        with contextlib.suppress(queue.Full):  # the pipeline is busy taking: it sees the flag next take
            self._queue.put_nowait((-1, WAKE))

    def take(self, timeout: float) -> tuple[int, QueueItem] | None:
        """The next queued item (waiting up to `timeout` seconds; 0: only what is queued now), or None.
        An update's accesses leave the backlog here, as the pipeline takes them."""
        if self._wake_asked.is_set():
            self._wake_asked.clear()
            return -1, WAKE
        try:
            index, item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
        except queue.Empty:
            return None
        if isinstance(item, SourceUpdate) and item.accesses is not None:
            self._count(index, -1, -len(item.accesses))
        return index, item

    def backlog(self, index: int) -> tuple[int, int]:
        """Updates with accesses, and their accesses, that source `index` has queued and the pipeline
        has not taken yet."""
        with self._backlog_lock:
            return self._backlog_updates[index], self._backlog_accesses[index]

    def join(self, timeout: float = 2.0) -> None:
        for t in self._threads:
            t.join(timeout=timeout)

    def _pump(self, index: int, source: Source, stop: threading.Event) -> None:
        try:
            # Sources return once `stop` is set, after a last update that says what they left behind.
            for update in source.updates(stop):
                if not self._put(index, update, stop):
                    break
        except Exception as exc:  # a broken source must not take the monitor down
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            failed = SourceHealth(
                source=source.name,
                kind=source.kind,
                connected=False,
                state=f"failed: {detail}",
                rejected=(Rejection("source failed", 1, (detail,)),),
                finished=True,
            )
            event = TimelineEvent(time.time(), "source-failed", f"{source.name}: {detail}")
            self._put(index, SourceUpdate(health=failed, events=(event,)), stop)
        finally:
            try:
                source.close()
            finally:
                self._put(index, Finished(index), stop)

    def _put(self, index: int, item: QueueItem, stop: threading.Event) -> bool:
        """Queue an item, waiting while the analyzer catches up; False once stopped with no room."""
        accesses = (
            len(item.accesses) if isinstance(item, SourceUpdate) and item.accesses is not None else None
        )
        if accesses is not None:  # counted before the put, so that the pipeline never takes it first
            self._count(index, 1, accesses)
        while True:
            try:
                self._queue.put((index, item), timeout=PUT_RETRY_SECONDS)
                return True
            except queue.Full:
                if stop.is_set():
                    if accesses is not None:
                        self._count(index, -1, -accesses)
                    return False

    def _count(self, index: int, updates: int, accesses: int) -> None:
        with self._backlog_lock:
            self._backlog_updates[index] += updates
            self._backlog_accesses[index] += accesses
