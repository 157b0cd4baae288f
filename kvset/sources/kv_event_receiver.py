"""The KV-event source's receiving half: a thread that only moves messages from the SUB sockets into
queues bounded in bytes, whatever the decoding thread is doing.

Why a thread of its own: the decoding thread also hands updates to the pipeline, and waits there
while the analyzer is busy; a socket left unread meanwhile piles messages up inside ZMQ, up to
RCVHWM messages of any size (100,000 of vLLM's 250 kB batches would be 25 GB). Receiving is cheap
(no decoding), so this thread keeps every socket empty and the queues hold what waits.

Each endpoint's queue holds at most its share of the byte bound; past it the oldest waiting are
dropped undecoded and only their sequence frames kept, for the decoding thread to count them shed
(kvset.sources.kv_events) before it decodes anything newer: the tracker sees the stream's numbers in
order. The connection monitors are read here too (a socket belongs to one thread).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from dataclasses import dataclass

import zmq
from zmq.utils.monitor import recv_monitor_message

from kvset.sources.clock import Clock

# A read of one socket stops after this many messages, so the others and `stop` are looked at.
_MAX_RECEIVED_PER_READ = 10_000
_POLL_MS = 50  # how often the receiving thread looks at its stop event
# Dropped messages whose sequence frames wait for the decoding thread: past this many, the rest are
# still counted shed, without a number (they then show as a sequence gap, never as nothing).
MAX_DROPPED_HELD = 100_000
# A message as the tracker reads it when shed: (topic, sequence, payload) with the payload left out
Frames = list[bytes]


@dataclass(slots=True)
class Queued:
    """A received message; `seen_at` is when the decoding thread first saw it queued (monotonic), so
    that a wait counts from there: messages queued while that thread was away (a first batch loading
    compiled code, a pipeline not taking updates) are not stale at once, as they were not in the socket."""

    frames: Frames
    size: int
    seen_at: float | None = None


@dataclass
class EndpointStream:
    """One publisher endpoint's sockets and connection state; `index` is its publisher in the tracker.
    The queue fields are shared between the two threads (under the receiver's lock)."""

    index: int
    address: str
    replay_address: str | None
    sub: zmq.Socket
    monitor: zmq.Socket | None
    dealer: zmq.Socket | None = None  # the decoding thread's
    connected: bool = False
    ever_connected: bool = False
    last_data_at: float | None = None
    error: str | None = None
    # received, not decoded yet, within the source's byte share
    queue: deque[Queued] = dataclasses.field(default_factory=deque)
    queued_bytes: int = 0
    peak_queued_bytes: int = 0
    # dropped by the receiver past the byte share, oldest first: (sequence frames only, bytes)
    dropped: deque[tuple[Frames, int]] = dataclasses.field(default_factory=deque)
    arrived: int = 0  # messages taken from the socket
    shed: int = 0  # messages shed (dropped unread, the oldest first) to stay within bounds, and their bytes
    shed_bytes: int = 0
    behind: bool = False  # messages still queued after the last decoding round


def _numbered(frames: Frames) -> Frames:
    """What the tracker needs of a shed message: its sequence frame (kvset.engine.kv_event_tracker)."""
    return [b"", frames[1], b""] if len(frames) == 3 else []


class Receiver:
    """Empties the streams' SUB sockets into their queues, in a thread, until `stop()`."""

    def __init__(self, streams: list[EndpointStream], share: int, clock: Clock) -> None:
        self.streams = streams
        self.share = share  # bytes queued per endpoint
        self.clock = clock  # (the decoding thread's: this one reads no time)
        self.lock = threading.Lock()
        self.arrival = threading.Event()  # set when something was queued: the decoding thread waits on it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kvset-events-receiver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop receiving; the sockets are the caller's again afterwards."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        poller = zmq.Poller()
        for stream in self.streams:
            poller.register(stream.sub, zmq.POLLIN)
            if stream.monitor is not None:
                poller.register(stream.monitor, zmq.POLLIN)
        while not self._stop.is_set():
            try:
                ready = dict(poller.poll(_POLL_MS))
            except zmq.ZMQError:  # the context is going away
                return
            for stream in self.streams:
                if stream.monitor is not None and stream.monitor in ready:
                    self._read_monitor(stream)
                if stream.sub in ready and self._receive(stream):
                    self.arrival.set()

    def _read_monitor(self, stream: EndpointStream) -> None:
        assert stream.monitor is not None
        while True:
            try:
                event = recv_monitor_message(stream.monitor, zmq.NOBLOCK)
            except zmq.ZMQError:  # zmq.Again included: nothing more to read
                return
            if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                stream.connected = stream.ever_connected = True
            elif event["event"] == zmq.EVENT_DISCONNECTED:
                stream.connected = False

    def _receive(self, stream: EndpointStream) -> int:
        """Empty the socket into the stream's queue; past its byte share the oldest are dropped.
        Returns the messages received."""
        received = 0
        for _ in range(_MAX_RECEIVED_PER_READ):
            try:
                frames = stream.sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            received += 1
            size = sum(len(frame) for frame in frames)
            stream.connected = stream.ever_connected = True
            with self.lock:
                stream.arrived += 1
                while stream.queue and stream.queued_bytes + size > self.share:
                    old = stream.queue.popleft()
                    stream.queued_bytes -= old.size
                    self._drop(stream, old.frames, old.size)
                if size > self.share:  # larger than the whole share alone (the queue is empty now)
                    self._drop(stream, frames, size)
                    continue
                stream.queue.append(Queued(frames, size))
                stream.queued_bytes += size
                stream.peak_queued_bytes = max(stream.peak_queued_bytes, stream.queued_bytes)
        return received

    @staticmethod
    def _drop(stream: EndpointStream, frames: Frames, size: int) -> None:
        stream.dropped.append((_numbered(frames) if len(stream.dropped) < MAX_DROPPED_HELD else [], size))

    # -------------------------------------------------------- the decoding thread's side
    def take(self, stream: EndpointStream) -> tuple[list[tuple[Frames, int]], tuple[Frames, int] | None]:
        """(the messages dropped since the last take, oldest first; the next message to decode or None)."""
        with self.lock:
            dropped = list(stream.dropped)
            stream.dropped.clear()
            if not stream.queue:
                return dropped, None
            message = stream.queue.popleft()
            stream.queued_bytes -= message.size
            return dropped, (message.frames, message.size)

    def take_stale(
        self, stream: EndpointStream, now: float, after: float, keep: int
    ) -> list[tuple[Frames, int]]:
        """The messages to shed, oldest first: those dropped, then those seen queued more than `after`
        seconds ago while more than `keep` wait. Those not seen yet are seen `now`."""
        with self.lock:
            out = list(stream.dropped)
            stream.dropped.clear()
            for message in reversed(stream.queue):  # the newest are the unseen ones
                if message.seen_at is not None:
                    break
                message.seen_at = now
            while len(stream.queue) > keep:
                seen_at = stream.queue[0].seen_at
                if seen_at is None or now - seen_at <= after:
                    break
                message = stream.queue.popleft()
                stream.queued_bytes -= message.size
                out.append((message.frames, message.size))
            return out

    def waiting(self) -> bool:
        """Whether any stream has something queued or dropped for the decoding thread."""
        with self.lock:
            return any(stream.queue or stream.dropped for stream in self.streams)

    def count_unread(self, give_up: float) -> int:
        """After stop(): the messages queued, dropped and still in the sockets (read, not decoded, until
        the clock passes `give_up`), all discarded."""
        unread = 0
        for stream in self.streams:
            unread += len(stream.queue) + len(stream.dropped)
            stream.queue.clear()
            stream.dropped.clear()
            stream.queued_bytes = 0
            while self.clock.monotonic() < give_up:
                try:
                    stream.sub.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.ZMQError:  # zmq.Again included: nothing more
                    break
                unread += 1
        return unread
