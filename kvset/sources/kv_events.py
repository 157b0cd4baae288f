"""Live block accesses from an engine's KV-cache events over ZMQ (vLLM, SGLang): the sockets.

One SUB socket per endpoint (one per data-parallel rank: each rank has its own sequence
numbers and its own cache), merged into one access stream in arrival order, and a DEALER socket
per endpoint, opened on the first sequence gap, to ask the publisher's replay socket for what was
missed. What the messages mean (accesses, resident blocks, gaps, replays, health notes) is
kvset.engine.kv_event_tracker's; this module only moves bytes and says whether it is connected.

Nothing here blocks: sockets are polled with a timeout and an update is yielded at least
every `idle_tick` seconds. A read stops at a pending replay's deadline, so a replay endpoint that
never answers holds the batches after a gap for --replay-timeout and no longer, however fast they
come.

When no endpoint has answered after NO_PUBLISHER_AFTER_S, the state says so and asks whether the
engine publishes at all (ZMQ keeps retrying a port where nothing listens, or a host that does not
resolve, without an error).

A thread of its own (kvset.sources.kv_event_receiver) only receives: it empties every SUB socket
into a queue per endpoint however long this one waits for the pipeline, so nothing piles up inside
ZMQ. This thread decodes from the queues in turn, one message each, for at most DECODE_SLICE_S: a
rank that floods gets the same share as the others. The queues hold at most `backlog_bytes` in all
(an equal share per endpoint) and nothing older than SHED_AFTER_S: past either bound the oldest
waiting messages are *shed*, dropped undecoded, counted and shown, so memory stays flat under any
publisher however fast and what is analysed stays fresh. A shed message's sequence number is read
and given to the tracker: its batch is counted shed, not taken for a gap, so the replay endpoint is
not asked to send again what kvset had no time for. A source that cannot keep up shows its backlog
(per endpoint: messages and bytes queued, shed), and when it stops, how many were left unread. ZMQ
drops only what overflows RCVHWM faster than the receiving thread reads, without telling; those
show up as sequence gaps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from collections import deque
from collections.abc import Iterator

import zmq

from kvset.engine import DEFAULT_MEDIUM
from kvset.engine.kv_event_health import kv_event_health
from kvset.engine.kv_event_sequence import AskReplay, DropReplayConnection
from kvset.engine.kv_event_tracker import KvEventTracker, ReplayStep
from kvset.engine.zmq_endpoints import event_addresses
from kvset.quantities import MIB, format_bytes, plural
from kvset.rejects import RejectCounter
from kvset.sources.base import IDLE_TICK, Source
from kvset.sources.clock import REAL_CLOCK, Clock
from kvset.sources.kv_event_receiver import EndpointStream, Frames, Receiver
from kvset.sources.kv_event_warm_up import load_compiled_code
from kvset.types import SourceHealth, SourceUpdate

__all__ = ["DEFAULT_MEDIUM", "KvEventsSource"]

_MONITORED = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
RCVHWM = 100_000  # vLLM's own publisher HWM
DEFAULT_BACKLOG_BYTES = 16 * MIB  # the queues of received, undecoded messages, all endpoints together
# Decoding between two looks at the replay sockets and the clock: short, so a replay's deadline and
# the next update are kept while a flood waits in the queues.
DECODE_SLICE_S = 0.02
NO_PUBLISHER_AFTER_S = 1.5  # `--once` answers within 3 s (kvset.cli.live_monitor.all_sources_dead)
# A message still undecoded this long after it was received is shed: what is analysed stays this fresh
# when the publisher outruns decoding or analysis for long. Not shorter: the pipeline pauses for a few
# seconds now and then (the principals' figures read, a slow moment), and a 2 s bound shed a quarter
# of an ordinary stream then; the byte bound is what keeps memory flat.
SHED_AFTER_S = 30.0
# ... unless no more than this many wait: a few old messages are a pause (the engine model's compiled
# functions loading on the first batch, a slow moment of the machine), not a publisher outrunning
# kvset, and decoding them catches up at once
SHED_MIN_QUEUED = 8
# While a replay is asked, its socket is looked at this often (the SUB sockets are the receiver's).
_REPLAY_LOOK_S = 0.005
# At stop, the messages left in a socket are counted (not decoded), for at most this long.
_UNREAD_COUNT_S = 0.5
# A publisher's quiet moment is looked at this much after it (its wall and monotonic stamps differ
# by a little; looked at before it, the finish would wait for the next tick).
_QUIET_MARGIN_S = 0.005


class KvEventsSource(Source):
    """block_size: the engine's tokens per block (--block-size) for events that do not carry it; the
    stream's units are learned from the first KV event (kvset.engine.kv_event_tracker)."""

    kind = "events"
    units = None  # said with the first accesses, from the events

    def __init__(
        self,
        endpoints: list[str],
        replay_endpoints: list[str] | None = None,
        topic: str = "",
        medium: str = DEFAULT_MEDIUM,
        radix_policy: str = "lru",
        group_idx: int | None = None,
        block_size: int | None = None,
        replay_timeout: float = 1.0,
        idle_tick: float = IDLE_TICK,
        flush_accesses: int = 65536,
        removed_memory: int = 2_000_000,
        quiet_seconds: float = 1.0,
        tail_probe_seconds: float | None = None,
        rcvhwm: int = RCVHWM,
        backlog_bytes: int = DEFAULT_BACKLOG_BYTES,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.clock = clock  # what it waits for is the sockets' poll, not on this clock
        self.endpoints, self.replay_endpoints = event_addresses(endpoints, replay_endpoints)
        self.rejects = RejectCounter()
        self.tracker = KvEventTracker(
            self.endpoints,
            self.replay_endpoints,
            self.rejects,
            medium=medium,
            radix_policy=radix_policy,
            group_idx=group_idx,
            block_size=block_size,
            replay_timeout=replay_timeout,
            removed_memory=removed_memory,
            quiet_seconds=quiet_seconds,
            tail_probe_seconds=tail_probe_seconds,
        )
        self.topic = topic
        self.idle_tick = idle_tick
        self.flush_accesses = flush_accesses
        extra = f" (+{len(self.endpoints) - 1})" if len(self.endpoints) > 1 else ""
        self.name = f"events {self.endpoints[0]}{extra}"
        self.address = ",".join(self.endpoints)
        self._ctx: zmq.Context | None = None
        self._poller: zmq.Poller | None = None
        self._streams: list[EndpointStream] = []
        self._receiver: Receiver | None = None  # receives from the SUB sockets, in its own thread
        self._closed = False
        self.received = 0
        self.last_data_at: float | None = None
        self.rcvhwm = rcvhwm
        self.backlog_share = max(1, backlog_bytes // len(self.endpoints))  # bytes queued per endpoint
        self._opened_at: float | None = None  # monotonic
        self.behind = False  # the last read left messages waiting in a socket
        self._quiet_seen = -math.inf  # the last quiet moment an update was made for (monotonic)
        self._handed_out_at = -math.inf  # the last update that handed accesses out (monotonic)
        self._pending_left = 0  # the tracker's pending accesses left by the last update (shape undecided)
        self.unread_at_stop = 0  # messages still in the sockets when the source stopped

    # ----------------------------------------------------------------- sockets
    def _open(self) -> None:
        self._ctx = zmq.Context()
        self._poller = zmq.Poller()
        for index, (address, replay_address) in enumerate(
            zip(self.endpoints, self.replay_endpoints, strict=True)
        ):
            sub = self._ctx.socket(zmq.SUB)
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.RCVHWM, self.rcvhwm)
            sub.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
            sub.setsockopt(zmq.SUBSCRIBE, self.topic.encode())
            try:
                monitor = sub.get_monitor_socket(_MONITORED)
            except zmq.ZMQError:  # monitoring unsupported: connection state is inferred from data
                monitor = None
            stream = EndpointStream(index, address, replay_address, sub, monitor)
            try:
                sub.connect(address)
            except zmq.ZMQError as exc:  # e.g. an address libzmq cannot parse: shown, not raised
                stream.error = f"cannot connect to {address}: {exc}"
            self._streams.append(stream)
        self._opened_at = self.clock.monotonic()
        self._receiver = Receiver(self._streams, self.backlog_share, self.clock)
        self._receiver.start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._receiver is not None:
            self._receiver.stop()
        for stream in self._streams:
            if stream.monitor is not None:
                with contextlib.suppress(zmq.ZMQError):
                    stream.sub.disable_monitor()
                stream.monitor.close(linger=0)
            self._close_dealer(stream)
            stream.sub.close(linger=0)
        if self._ctx is not None:
            self._ctx.term()

    def _close_dealer(self, stream: EndpointStream) -> None:
        if stream.dealer is not None:
            if self._poller is not None:
                self._poller.unregister(stream.dealer)
            stream.dealer.close(linger=0)
            stream.dealer = None

    # ----------------------------------------------------------------- loop
    def updates(self, stop: threading.Event) -> Iterator[SourceUpdate]:
        if self._closed:
            return
        self._open()
        assert self._poller is not None
        self.tracker.apply_at_once = False  # the loop applies what is decided, one batch at a time
        load_compiled_code()  # while the sockets connect; the receiver queues what comes meanwhile
        try:
            next_tick = self.clock.monotonic()
            released = False  # a replay ended: an update once what it released is applied
            while not stop.is_set():
                now = self.clock.monotonic()
                quiet = self._quiet_at()
                deadline = self.tracker.replay_deadline
                self._wait(self._wait_for(now, next_tick, quiet))
                self._decode_round()
                for index, step in self.tracker.tick(self.clock.monotonic(), self.clock.wall()):
                    self._carry_out(self._streams[index], [step])
                now = self.clock.monotonic()
                fell_quiet = quiet is not None and now >= quiet
                # a replay that ended (answered, given up) released what it held: counted once applied,
                # not up to a tick later
                if deadline is not None and self.tracker.replay_deadline != deadline:
                    released = True
                applied = released and not self.tracker.unapplied
                if now >= next_tick or fell_quiet or applied or self._update_due(now):
                    update = self._update()
                    if update.accesses is not None and len(update.accesses):
                        self._handed_out_at = now
                    self._pending_left = self.tracker.pending
                    yield update
                    released = released and not applied
                    next_tick = self.clock.monotonic() + self.idle_tick
                    if quiet is not None and fell_quiet:
                        self._quiet_seen = quiet
            self.unread_at_stop = self._count_unread()
            yield self._update(final=True)  # the last word: what was left behind, and the requests still open
        finally:
            self.close()

    def _update_due(self, now: float) -> bool:
        """Whether an update is due before the next tick: a quiet publisher's requests are being
        finished (an update each part), enough accesses wait, or the first accesses after a stand-still
        of a tick or more (the stream's first, the first after a replay's wait or the quiet second) are
        ready: handed out at once, not up to a tick or `flush_accesses` later (a flood's first figure
        waited 7 requests, 0.14 s). Those left after an update (waiting for the stream's shape to be
        decided) do not make another until more come."""
        pending = self.tracker.pending
        return (
            self.tracker.flushing
            or pending >= self.flush_accesses
            or (pending > self._pending_left and now - self._handed_out_at >= self.idle_tick)
        )

    def _quiet_at(self) -> float | None:
        """When the next publisher with requests still open has been quiet for the tracker's quiet
        seconds (monotonic; None: none). The tracker finishes its requests at the update after that:
        it is made then, not at the next tick, so the last requests of a stream count that much
        sooner. Each such moment once (a gap's replay still waited for defers the finish to its end,
        which makes an update of its own)."""
        due = [
            p.last_batch_now + self.tracker.quiet_wait(p) + _QUIET_MARGIN_S
            for p in self.tracker.publishers
            if not p.flushed and p.last_batch_now is not None
        ]
        later = [t for t in due if t > self._quiet_seen]
        return min(later) if later else None

    def _wait_for(self, now: float, next_tick: float, quiet: float | None) -> float:
        """Seconds to wait: until the next tick, a replay's deadline or a publisher falling quiet."""
        if self.tracker.unapplied or self.tracker.flushing:
            return 0.0  # batches decided and not applied yet, or requests being finished: work first
        wait = max(0.0, next_tick - now)
        for deadline in (self.tracker.replay_deadline, quiet):
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - now))
        return wait

    def _wait(self, wait: float) -> None:
        """Until something is queued, a replay answers, or `wait` seconds pass; then read the replies."""
        receiver, poller = self._receiver, self._poller
        assert receiver is not None and poller is not None
        asking = any(stream.dealer is not None for stream in self._streams)
        if not receiver.waiting() and not self.tracker.unapplied and not self.tracker.flushing:
            # a reply is looked for every _REPLAY_LOOK_S; else only an arrival or the tick wakes this
            if not (asking and poller.poll(0)):
                receiver.arrival.wait(min(wait, _REPLAY_LOOK_S) if asking else wait)
            receiver.arrival.clear()  # what came meanwhile is seen by waiting() next time
        ready = dict(poller.poll(0)) if asking else {}
        for stream in self._streams:
            if stream.dealer is not None and stream.dealer in ready:
                self._read_replay(stream)

    def _count_unread(self) -> int:
        """Messages still waiting: queued or in the sockets, read (not decoded) and counted, for a
        bounded time; those the receiver dropped are told the tracker first (they are shed)."""
        assert self._receiver is not None
        self._receiver.stop()
        now = self.clock.monotonic()
        for stream in self._streams:
            self._shed_all(stream, self._receiver.take_stale(stream, now, math.inf, 0), now)
        return self._receiver.count_unread(now + _UNREAD_COUNT_S)

    def _shed_stale(self) -> None:
        """Shed what the receiver dropped and what waited more than SHED_AFTER_S: decoding it now
        would analyse the past."""
        assert self._receiver is not None
        now = self.clock.monotonic()
        for stream in self._streams:
            self._shed_all(stream, self._receiver.take_stale(stream, now, SHED_AFTER_S, SHED_MIN_QUEUED), now)

    def _shed_all(self, stream: EndpointStream, messages: list[tuple[Frames, int]], now: float) -> None:
        for frames, size in messages:
            self._shed(stream, frames, size, now)

    def _shed(self, stream: EndpointStream, frames: Frames, size: int, now: float) -> None:
        """One message dropped undecoded: counted, and its number told to the tracker (no replay)."""
        stream.shed += 1
        stream.shed_bytes += size
        self._carry_out(stream, self.tracker.shed(stream.index, frames, now, self.clock.wall()))

    def _decode_round(self) -> None:
        """Decode the queued messages, one per endpoint in turn, for at most DECODE_SLICE_S (or until
        enough accesses for an update, or a replay's deadline). Batches the tracker has decided and not
        applied (those a replay held, released together) are applied first, one per turn: so that
        updates come between them, and nothing newer is decoded meanwhile."""
        self._shed_stale()
        end = self.clock.monotonic() + DECODE_SLICE_S
        busy = list(self._streams)
        while busy:
            if not self.tracker.apply_next(self.clock.wall()):
                busy = [stream for stream in busy if self._decode_one(stream)]
            now = self.clock.monotonic()
            deadline = self.tracker.replay_deadline
            if (
                now >= end
                or self.tracker.pending >= self.flush_accesses
                or (deadline is not None and now >= deadline)  # give the replay up now (tick)
            ):
                break
        for stream in self._streams:
            stream.behind = bool(stream.queue)
        self.behind = any(stream.behind for stream in self._streams)

    def _decode_one(self, stream: EndpointStream) -> bool:
        """Decode the stream's next message (after counting shed what was dropped before it); False
        when none was queued."""
        assert self._receiver is not None
        dropped, message = self._receiver.take(stream)
        now = self.clock.monotonic()
        self._shed_all(stream, dropped, now)
        if message is None:
            return False
        at = self.clock.wall()
        self.received += 1
        self.last_data_at = stream.last_data_at = at
        self._carry_out(stream, self.tracker.published(stream.index, message[0], now, at))
        return True

    def _read_replay(self, stream: EndpointStream) -> None:
        while stream.dealer is not None:
            try:
                frames = stream.dealer.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._carry_out(
                stream,
                self.tracker.replay_reply(stream.index, frames, self.clock.monotonic(), self.clock.wall()),
            )

    def _carry_out(self, stream: EndpointStream, steps: list[ReplayStep]) -> None:
        """Do what the tracker asks of the replay socket."""
        todo = deque(steps)
        while todo:
            step = todo.popleft()
            if isinstance(step, DropReplayConnection):
                self._close_dealer(stream)  # late replies must not be taken for the next replay's
            elif isinstance(step, AskReplay) and not self._ask_replay(stream, step.start):
                todo.extend(
                    self.tracker.replay_unsent(stream.index, self.clock.monotonic(), self.clock.wall())
                )

    def _ask_replay(self, stream: EndpointStream, start: int) -> bool:
        assert self._ctx is not None and self._poller is not None and stream.replay_address is not None
        try:
            if stream.dealer is None:
                stream.dealer = self._ctx.socket(zmq.DEALER)
                stream.dealer.setsockopt(zmq.LINGER, 0)
                stream.dealer.connect(stream.replay_address)
                self._poller.register(stream.dealer, zmq.POLLIN)
            stream.dealer.send_multipart([b"", start.to_bytes(8, "big")], zmq.NOBLOCK)
        except zmq.ZMQError:
            return False
        return True

    # ----------------------------------------------------------------- updates
    def _update(self, final: bool = False) -> SourceUpdate:
        now = self.clock.wall()
        return dataclasses.replace(self.tracker.take(now, final=final), health=self.health(now))

    def health(self, now: float | None = None) -> SourceHealth:
        now = self.clock.wall() if now is None else now
        streams = self._streams
        n_connected = sum(s.connected for s in streams)
        errors = [s.error for s in streams if s.error]
        if errors:
            state = "down: " + "; ".join(errors)
        elif streams and n_connected == len(streams):
            state = "connected" if self.received else "connected, waiting for data"
        elif n_connected:
            state = f"partly connected: {n_connected} of {len(streams)} endpoints"
        elif any(s.ever_connected for s in streams):
            state = "down: disconnected, reconnecting"
        elif self._opened_at is not None and self.clock.monotonic() - self._opened_at >= NO_PUBLISHER_AFTER_S:
            state = self.no_publisher_state()
        else:
            state = "connecting"
        parts = kv_event_health(self.tracker, now)
        details = parts.details
        backlog = self.backlog()
        if backlog:
            details += (("backlog", backlog),)
        held = sum(p.sequence.held for p in self.tracker.publishers) + self.tracker.unapplied_batches
        counts = parts.counts + (
            ("backlog_batches", held),
            ("backlog_accesses", self.tracker.pending),
            ("batches_shed", sum(stream.shed for stream in streams)),
        )
        return SourceHealth(
            source=self.name,
            kind=self.kind,
            connected=bool(streams) and n_connected == len(streams),
            state=state,
            last_data_at=self.last_data_at,
            received=self.received,
            accesses=self.tracker.accesses,
            rejected=self.rejects.summary(),
            notes=parts.notes
            + (
                (
                    f"{plural(self.unread_at_stop, 'message')} still waiting in the socket when kvset "
                    "stopped: not analysed",
                )
                if self.unread_at_stop
                else ()
            )
            + self._shed_notes(),
            details=details,
            counts=counts,
            reports_hits=parts.reports_hits,
            hits_reconstructed=parts.hits_reconstructed,
        )

    def no_publisher_state(self) -> str:
        silent = [s.address for s in self._streams if not s.ever_connected]
        where = silent[0] + (f" (and {len(silent) - 1} more)" if len(silent) > 1 else "")
        return f"no publisher answered on {where}: is the engine started with --kv-events-config?"

    def backlog(self) -> str:
        """What is waiting and not analysed yet, in words ("" when nothing is)."""
        parts = []
        if self.behind:
            parts.append("messages waiting in the socket: the source is not keeping up")
        for stream in self._streams:
            if stream.behind or stream.shed:
                parts.append(self._stream_backlog(stream))
        if self.unread_at_stop:
            parts.append(f"{plural(self.unread_at_stop, 'message')} unread at stop")
        held = sum(p.sequence.held for p in self.tracker.publishers)
        if held:
            parts.append(f"{plural(held, 'batch', 'batches')} held for a replay or a sequence check")
        if released := self.tracker.unapplied_batches:
            parts.append(f"{plural(released, 'batch', 'batches')} released, being analysed")
        if self.tracker.pending:
            parts.append(f"{plural(self.tracker.pending, 'access', 'accesses')} not yet handed over")
        return "; ".join(parts)

    def _shed_notes(self) -> tuple[str, ...]:
        shed = sum(stream.shed for stream in self._streams)
        if not shed:
            return ()
        size = format_bytes(sum(stream.shed_bytes for stream in self._streams))
        return (
            f"{plural(shed, 'message')} ({size}) shed unread: the publisher outran decoding and analysis, so "
            f"the oldest waiting were dropped (backlog bound {format_bytes(self.backlog_share)} per endpoint, "
            f"or {SHED_AFTER_S:g} s of waiting); their events are missing from the curve, counted as shed "
            "batches, not asked again",
        )

    def _stream_backlog(self, stream: EndpointStream) -> str:
        label = self.tracker.publishers[stream.index].label
        said = f"{label} behind: {plural(len(stream.queue), 'message')} ({format_bytes(stream.queued_bytes)}) queued"
        if stream.shed:
            said += (
                f", {plural(stream.shed, 'message')} ({format_bytes(stream.shed_bytes)}) shed past "
                f"its {format_bytes(self.backlog_share)} of backlog or {SHED_AFTER_S:g} s of waiting"
            )
        return said
