"""Live block accesses from an engine's KV-cache events over ZMQ (vLLM, SGLang).

One SUB socket per endpoint (one per data-parallel rank: each rank has its own sequence
numbers and its own cache), merged into one access stream in arrival order.

Meaning of the events:
- every block of a BlockStored (of the selected medium and KV cache group) is an access, in
  list order; one BlockStored is one request; its tokens per block come from block_size and
  token_ids; its timestamp is the batch's ts;
- BlockRemoved is the engine's own eviction: it drives the engine's resident set, its churn
  and the re-stores after removal (misses a larger cache would have hit);
- AllBlocksCleared and a sequence number going backwards (engine restart) reset that rank's
  resident set and become timeline events.

Sequence gaps are recovered from the publisher's replay socket (DEALER -> ROUTER, vLLM's
protocol) with a bounded wait; whatever cannot be recovered is counted and shown.
Nothing here blocks: sockets are polled with a timeout and an update is yielded at least
every `idle_tick` seconds.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

from kvset.engine.kv_events import (
    ALL_BLOCKS_CLEARED,
    BLOCK_REMOVED,
    BLOCK_STORED,
    END_SEQ,
    KvEventBatch,
    decode_message,
    decode_payload,
    decode_seq,
    split_replay_reply,
)
from kvset.engine.resident_set import ResidentBlocks
from kvset.rejects import RejectCounter
from kvset.sources.base import (
    IDLE_TICK,
    AccessBatch,
    EngineReading,
    Source,
    SourceHealth,
    SourceUpdate,
    TimelineEvent,
)

ALL_MEDIA = ("all", "any", "*")
DEFAULT_MEDIUM = "GPU"  # what events without a medium field (older vLLM, SGLang) describe
HITS_REPORTED_NOTE = "hits reported: the curve is the exact LRU curve of the engine's accesses"
MISSES_ONLY_NOTE = (
    "engine reports misses only (no stored block was ever already resident): the curve is the LRU "
    "curve of the engine's misses, its hits are invisible. Fix: vLLM >= 0.26, send requests with "
    'vllm_xargs: {"kv_cache_report_mode": "full"}'
)
EVENTS_HELP = (
    "KV events (--events): every block the engine stores is one access, one BlockStored one request. "
    "Engines publish stores of newly computed blocks only by default, i.e. their misses: hits are "
    "invisible, and the curve is then the LRU curve of the engine's misses (roughly what a second "
    "cache tier behind the engine would see), not of all its accesses. vLLM >= 0.26 also publishes "
    'the hit blocks of requests sent with vllm_xargs: {"kv_cache_report_mode": "full"}; then the '
    "curve is the exact LRU curve of the engine's accesses. The status line says which case is seen "
    "(a store of a block that is already resident means hits are reported). BlockRemoved events give "
    "the engine's own resident blocks, evictions and re-stores after removal (misses a larger cache "
    "would have hit)."
)
_MONITORED = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
_MAX_MESSAGES_PER_POLL = 2000
_RATE_WINDOW_S = 10.0

_RANGE = re.compile(r"^(?P<base>.*):(?P<lo>\d+)-(?P<hi>\d+)$")
_PORT = re.compile(r"^(?P<base>.*):(?P<port>\d+)$")


def expand_endpoints(spec: str, max_endpoints: int = 256) -> list[str]:
    """`tcp://host:5557-5560` -> one endpoint per port (one per data-parallel rank)."""
    spec = spec.strip()
    match = _RANGE.match(spec)
    if not match:
        return [spec]
    lo, hi = int(match["lo"]), int(match["hi"])
    if not 0 < lo <= hi <= 65535:
        raise ValueError(f"bad port range in {spec!r}")
    if hi - lo + 1 > max_endpoints:
        raise ValueError(f"port range in {spec!r} names more than {max_endpoints} endpoints")
    return [f"{match['base']}:{port}" for port in range(lo, hi + 1)]


def offset_port(endpoint: str, offset: int) -> str:
    """The endpoint of data-parallel rank `offset`: vLLM and SGLang publish rank r on port + r."""
    match = _PORT.match(endpoint)
    if not match:
        raise ValueError(f"cannot offset the port of {endpoint!r}")
    return f"{match['base']}:{int(match['port']) + offset}"


def connect_address(endpoint: str) -> str:
    """A valid ZMQ address to connect to, or ValueError.

    `host:port` means tcp; the engine's bind form `tcp://*:5557` means this host.
    """
    endpoint = endpoint.strip()
    if "://" not in endpoint:
        endpoint = "tcp://" + endpoint
    endpoint = re.sub(r"^tcp://(\*|0\.0\.0\.0):", "tcp://127.0.0.1:", endpoint)
    scheme, _, rest = endpoint.partition("://")
    if scheme not in ("tcp", "ipc", "inproc") or not rest:
        raise ValueError(f"bad endpoint {endpoint!r}: expected tcp://HOST:PORT (or ipc://PATH)")
    if scheme == "tcp":
        match = _PORT.match(rest)
        if not match or not match["base"] or not 0 < int(match["port"]) <= 65535:
            raise ValueError(f"bad endpoint {endpoint!r}: expected tcp://HOST:PORT")
    return endpoint


def pair_replay_endpoints(endpoints: list[str], replay_endpoints: Iterable[str] | None) -> list[str | None]:
    """One replay endpoint per publisher endpoint (a single one is offset by rank, as vLLM does)."""
    replays = [e for spec in (replay_endpoints or []) for e in expand_endpoints(spec)]
    if not replays:
        return [None] * len(endpoints)
    if len(replays) == len(endpoints):
        return list(replays)
    if len(replays) == 1:
        return [offset_port(replays[0], rank) for rank in range(len(endpoints))]
    raise ValueError(f"{len(replays)} replay endpoints for {len(endpoints)} event endpoints")


def block_tokens(n_blocks: int, block_size: int, token_count: int, fallback: int) -> np.ndarray:
    """Tokens each stored block covers: block_size each, a shorter last block if token_ids say so."""
    if block_size > 0:
        size = block_size
    elif token_count > 0 and token_count % n_blocks == 0:
        size = token_count // n_blocks
    else:
        size = fallback
    tokens = np.full(n_blocks, size, dtype=np.int64)
    if block_size > 0 and token_count > 0:
        last = token_count - (n_blocks - 1) * size
        if 0 < last < size:
            tokens[-1] = last
    return tokens


@dataclass
class _Replay:
    start: int  # first missing sequence number
    stop: int  # the sequence number that revealed the gap (exclusive)
    deadline: float
    got: dict[int, bytes] = field(default_factory=dict)


@dataclass
class _Stream:
    """One publisher endpoint: its sockets, its sequence state and its engine's resident set."""

    address: str
    replay_address: str | None
    sub: zmq.Socket
    monitor: zmq.Socket | None
    blocks: ResidentBlocks
    dealer: zmq.Socket | None = None
    connected: bool = False
    ever_connected: bool = False
    expected: int | None = None  # next sequence number
    first_seq: int | None = None
    replay: _Replay | None = None
    held: deque = field(default_factory=deque)  # (seq, batch) waiting for a replay to finish
    rank: int | None = None
    batches: int = 0
    accesses: int = 0
    last_data_at: float | None = None
    error: str | None = None


class KvEventsSource(Source):
    kind = "events"

    def __init__(
        self,
        endpoints: list[str],
        replay_endpoints: list[str] | None = None,
        topic: str = "",
        medium: str = DEFAULT_MEDIUM,
        group_idx: int | None = None,
        block_tokens: int = 16,
        replay_timeout: float = 1.0,
        idle_tick: float = IDLE_TICK,
        flush_accesses: int = 65536,
        removed_memory: int = 2_000_000,
    ) -> None:
        expanded = [e for spec in endpoints for e in expand_endpoints(spec)]
        if not expanded:
            raise ValueError("no event endpoint given")
        if block_tokens <= 0:
            raise ValueError("block_tokens must be positive")
        self.endpoints = [connect_address(e) for e in expanded]
        self.replay_endpoints = [
            None if r is None else connect_address(r)
            for r in pair_replay_endpoints(expanded, replay_endpoints)
        ]
        self.topic = topic
        self.medium = None if medium.lower() in ALL_MEDIA else medium.upper()
        self.group_idx = group_idx
        self.fallback_block_tokens = block_tokens
        self.replay_timeout = replay_timeout
        self.idle_tick = idle_tick
        self.flush_accesses = flush_accesses
        self.removed_memory = removed_memory
        extra = f" (+{len(self.endpoints) - 1})" if len(self.endpoints) > 1 else ""
        self.name = f"events {self.endpoints[0]}{extra}"

        self.rejects = RejectCounter()
        self._ctx: zmq.Context | None = None
        self._poller: zmq.Poller | None = None
        self._streams: list[_Stream] = []
        self._closed = False
        # Accesses not yet handed out.
        self._keys: list[np.ndarray] = []
        self._tokens: list[np.ndarray] = []
        self._times: list[np.ndarray] = []
        self._pending = 0
        self._timeline: list[TimelineEvent] = []
        # Totals for health.
        self.received = 0
        self.accesses = 0
        self.gaps = 0
        self.missing = 0
        self.recovered = 0
        self.lost = 0
        self.resets = 0
        self.clears = 0
        self.last_data_at: float | None = None
        self.block_size: int | None = None
        self._block_sizes_seen: set[int] = set()
        self._groups_seen: set[int] = set()
        self._ignored_media: Counter[str] = Counter()
        self._ignored_groups = 0
        self._eviction_samples: deque[tuple[float, int]] = deque()

    # ----------------------------------------------------------------- sockets
    def _open(self) -> None:
        self._ctx = zmq.Context()
        self._poller = zmq.Poller()
        for address, replay_address in zip(self.endpoints, self.replay_endpoints, strict=True):
            sub = self._ctx.socket(zmq.SUB)
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.RCVHWM, 100_000)  # vLLM's own publisher HWM
            sub.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
            sub.setsockopt(zmq.SUBSCRIBE, self.topic.encode())
            try:
                monitor = sub.get_monitor_socket(_MONITORED)
            except zmq.ZMQError:  # monitoring unsupported: connection state is inferred from data
                monitor = None
            stream = _Stream(address, replay_address, sub, monitor, ResidentBlocks(self.removed_memory))
            try:
                sub.connect(address)
            except zmq.ZMQError as exc:  # e.g. an address libzmq cannot parse: shown, not raised
                stream.error = f"cannot connect to {address}: {exc}"
            self._poller.register(sub, zmq.POLLIN)
            if monitor is not None:
                self._poller.register(monitor, zmq.POLLIN)
            self._streams.append(stream)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for stream in self._streams:
            if stream.monitor is not None:
                with contextlib.suppress(zmq.ZMQError):
                    stream.sub.disable_monitor()
                stream.monitor.close(linger=0)
            self._close_dealer(stream)
            stream.sub.close(linger=0)
        if self._ctx is not None:
            self._ctx.term()

    def _close_dealer(self, stream: _Stream) -> None:
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
        try:
            next_tick = time.monotonic()
            while not stop.is_set():
                now = time.monotonic()
                wait = max(0.0, next_tick - now)
                deadlines = [s.replay.deadline for s in self._streams if s.replay is not None]
                if deadlines:
                    wait = min(wait, max(0.0, min(deadlines) - now))
                ready = dict(self._poller.poll(int(wait * 1000)))
                for stream in self._streams:
                    if stream.monitor is not None and stream.monitor in ready:
                        self._read_monitor(stream)
                    if stream.dealer is not None and stream.dealer in ready:
                        self._read_replay(stream)
                    if stream.sub in ready:
                        self._read_published(stream)
                now = time.monotonic()
                for stream in self._streams:
                    if stream.replay is not None and now >= stream.replay.deadline:
                        self._finish_replay(stream, timed_out=True)
                if now >= next_tick or self._pending >= self.flush_accesses:
                    yield self._update()
                    next_tick = time.monotonic() + self.idle_tick
        finally:
            self.close()

    def _read_monitor(self, stream: _Stream) -> None:
        assert stream.monitor is not None
        while True:
            try:
                event = recv_monitor_message(stream.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            except zmq.ZMQError:
                return
            if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                stream.connected = stream.ever_connected = True
            elif event["event"] == zmq.EVENT_DISCONNECTED:
                stream.connected = False

    def _read_published(self, stream: _Stream) -> None:
        for _ in range(_MAX_MESSAGES_PER_POLL):
            try:
                frames = stream.sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            now = time.time()
            self.received += 1
            self.last_data_at = stream.last_data_at = now
            stream.connected = stream.ever_connected = True
            seq, batch = decode_message(frames, self.rejects, stream.address)
            if seq is None:
                continue
            if stream.replay is not None:
                stream.held.append((seq, batch))
            else:
                self._sequence(stream, seq, batch)
            if self._pending >= self.flush_accesses:
                return

    # ----------------------------------------------------------------- sequence numbers
    def _sequence(self, stream: _Stream, seq: int, batch: KvEventBatch | None) -> None:
        """Place one published batch in its stream's sequence: accept, recover a gap, or reset."""
        if stream.expected is None:
            stream.first_seq = seq
            self._accept(stream, seq, batch)
            return
        if seq == stream.expected:
            self._accept(stream, seq, batch)  # a bad payload in sequence still uses its number
            return
        if batch is None:
            return  # an unreadable payload out of sequence: its number is not trusted
        if seq < stream.expected:
            self.resets += 1
            self._timeline.append(
                TimelineEvent(
                    time.time(),
                    "engine-reset",
                    f"{self._label(stream)}: sequence went back from {stream.expected - 1} to {seq}: "
                    "engine restarted; its resident set was reset",
                )
            )
            stream.blocks.clear()
            stream.expected = 0
            if seq == 0:
                self._accept(stream, seq, batch)
                return
        missing = seq - stream.expected
        self.gaps += 1
        self.missing += missing
        if stream.replay_address is None:
            self.lost += missing
            self._timeline.append(
                TimelineEvent(
                    time.time(),
                    "sequence-gap",
                    f"{self._label(stream)}: {missing} batches lost (seq {stream.expected}..{seq - 1}); "
                    "no replay endpoint",
                )
            )
            self._accept(stream, seq, batch)
            return
        stream.held.appendleft((seq, batch))
        self._start_replay(stream, stream.expected, seq)

    def _start_replay(self, stream: _Stream, start: int, stop: int) -> None:
        assert self._ctx is not None and self._poller is not None and stream.replay_address is not None
        stream.replay = _Replay(start, stop, time.monotonic() + self.replay_timeout)
        if stream.dealer is None:
            stream.dealer = self._ctx.socket(zmq.DEALER)
            stream.dealer.setsockopt(zmq.LINGER, 0)
            stream.dealer.connect(stream.replay_address)
            self._poller.register(stream.dealer, zmq.POLLIN)
        try:
            stream.dealer.send_multipart([b"", start.to_bytes(8, "big")], zmq.NOBLOCK)
        except zmq.ZMQError:
            self._finish_replay(stream, timed_out=True)

    def _read_replay(self, stream: _Stream) -> None:
        assert stream.dealer is not None
        while stream.dealer is not None:
            try:
                frames = stream.dealer.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            replay = stream.replay
            if replay is None:
                continue  # a late reply to a replay we gave up on
            try:
                seq_frame, payload = split_replay_reply(frames)
            except ValueError as exc:
                self.rejects.reject("replay: malformed reply", f"{stream.replay_address}: {exc}")
                continue
            if seq_frame == END_SEQ:
                self._finish_replay(stream, timed_out=False)
                continue
            seq = decode_seq(seq_frame)
            if seq is None:
                self.rejects.reject("replay: sequence frame is not 8 bytes", str(stream.replay_address))
            elif replay.start <= seq < replay.stop:
                replay.got.setdefault(seq, payload)

    def _finish_replay(self, stream: _Stream, timed_out: bool) -> None:
        replay = stream.replay
        assert replay is not None
        stream.replay = None
        if timed_out:
            self._close_dealer(stream)  # late replies must not be taken for the next replay's
        for seq in sorted(replay.got):
            where = f"{stream.replay_address} seq {seq}"
            self._accept(stream, seq, decode_payload(replay.got[seq], self.rejects, where))
        missing = replay.stop - replay.start
        recovered = len(replay.got)
        self.recovered += recovered
        self.lost += missing - recovered
        stream.expected = replay.stop
        why = " (replay timed out)" if timed_out and recovered < missing else ""
        self._timeline.append(
            TimelineEvent(
                time.time(),
                "sequence-gap",
                f"{self._label(stream)}: {missing} batches missing (seq {replay.start}..{replay.stop - 1}): "
                f"{recovered} recovered by replay, {missing - recovered} lost{why}",
            )
        )
        while stream.held and stream.replay is None:
            seq, batch = stream.held.popleft()
            self._sequence(stream, seq, batch)

    # ----------------------------------------------------------------- events
    def _medium_selected(self, medium: str | None) -> bool:
        return self.medium is None or (medium or DEFAULT_MEDIUM).upper() == self.medium

    def _accept(self, stream: _Stream, seq: int, batch: KvEventBatch | None) -> None:
        stream.expected = seq + 1
        if batch is None:
            return
        stream.batches += 1
        if batch.rank is not None:
            stream.rank = batch.rank
        for i in range(len(batch)):
            kind = int(batch.kinds[i])
            if kind == ALL_BLOCKS_CLEARED:
                self.clears += 1
                stream.blocks.clear()
                self._timeline.append(
                    TimelineEvent(
                        time.time(),
                        "all-blocks-cleared",
                        f"{self._label(stream)}: engine cleared all cached blocks; its resident set was reset",
                    )
                )
                continue
            medium = batch.media[i]
            if not self._medium_selected(medium):
                self._ignored_media[(medium or DEFAULT_MEDIUM).upper()] += 1
                continue
            group = int(batch.group_idx[i])
            if group >= 0:
                if self.group_idx is not None and group != self.group_idx:
                    self._ignored_groups += 1
                    continue
                self._groups_seen.add(group)
            keys = batch.event_keys(i)
            if kind == BLOCK_REMOVED:
                stream.blocks.remove(keys)
            elif kind == BLOCK_STORED and len(keys):
                stream.blocks.store(keys)
                size = int(batch.block_sizes[i])
                if size > 0:
                    self.block_size = size
                    self._block_sizes_seen.add(size)
                tokens = block_tokens(len(keys), size, int(batch.token_counts[i]), self.fallback_block_tokens)
                self._keys.append(keys)
                self._tokens.append(tokens)
                self._times.append(np.full(len(keys), batch.ts))
                self._pending += len(keys)
                stream.accesses += len(keys)
                self.accesses += len(keys)

    # ----------------------------------------------------------------- updates
    def _label(self, stream: _Stream) -> str:
        return f"rank {stream.rank}" if stream.rank is not None else stream.address

    def _take_accesses(self) -> AccessBatch | None:
        if not self._keys:
            return None
        lengths = np.array([len(k) for k in self._keys], dtype=np.int64)
        starts = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        batch = AccessBatch(
            keys=np.concatenate(self._keys),
            tokens=np.concatenate(self._tokens),
            request_starts=starts,
            timestamps=np.concatenate(self._times),
            block_tokens=self.block_size if len(self._block_sizes_seen) == 1 else None,
        )
        self._keys, self._tokens, self._times, self._pending = [], [], [], 0
        return batch

    def _engine_reading(self, now: float) -> EngineReading | None:
        if not any(s.batches for s in self._streams):
            return None
        return EngineReading(
            at=now,
            block_size=self.block_size,
            resident_blocks=sum(len(s.blocks) for s in self._streams),
            evictions_total=self.evictions_total,
            restores_after_removal=sum(s.blocks.restores_after_removal for s in self._streams),
            label="kv events",
        )

    @property
    def evictions_total(self) -> int:
        return sum(s.blocks.evictions_total for s in self._streams)

    @property
    def hits_reported(self) -> bool:
        return any(s.blocks.stores_of_resident for s in self._streams)

    def _eviction_rate(self, now: float) -> float:
        samples = self._eviction_samples
        samples.append((now, self.evictions_total))
        while len(samples) > 2 and now - samples[1][0] >= _RATE_WINDOW_S:
            samples.popleft()
        (t0, e0), (t1, e1) = samples[0], samples[-1]
        return (e1 - e0) / (t1 - t0) if t1 > t0 else 0.0

    def _update(self) -> SourceUpdate:
        now = time.time()
        events, self._timeline = tuple(self._timeline), []
        return SourceUpdate(
            accesses=self._take_accesses(),
            health=self.health(now),
            engine=self._engine_reading(now),
            events=events,
        )

    def health(self, now: float | None = None) -> SourceHealth:
        now = time.time() if now is None else now
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
        else:
            state = "connecting"
        stored = sum(s.blocks.stored_total for s in streams)
        stores_of_resident = sum(s.blocks.stores_of_resident for s in streams)

        notes: list[str] = []
        if stores_of_resident:
            notes.append(HITS_REPORTED_NOTE)
        elif stored:
            notes.append(MISSES_ONLY_NOTE)
        if self.lost:
            why = "" if any(self.replay_endpoints) else "; give --replay-endpoint to recover gaps"
            notes.append(
                f"{self.lost} event batches lost in sequence gaps: their accesses are missing from the curve{why}"
            )
        if self.group_idx is None and len(self._groups_seen) > 1:
            groups = ", ".join(map(str, sorted(self._groups_seen)))
            notes.append(
                f"events from {len(self._groups_seen)} KV cache groups ({groups}) are merged; "
                "use --group-idx to keep the full-attention group only"
            )
        if self._ignored_media and not stored:
            seen = ", ".join(f"{m} ({n} events)" for m, n in self._ignored_media.most_common())
            notes.append(f"no {self.medium} events yet; other media seen: {seen}; see --medium")

        details: list[tuple[str, str]] = []
        for stream in streams:
            blocks = stream.blocks
            label = self._label(stream) + ("" if stream.rank is None else f" {stream.address}")
            seq = "-" if stream.expected is None else str(stream.expected - 1)
            details.append(
                (
                    label,
                    f"{stream.batches} batches, {stream.accesses} accesses, {len(blocks)} resident blocks, "
                    f"{blocks.evictions_total} evictions, last seq {seq}"
                    + ("" if not stream.first_seq else f" (joined at seq {stream.first_seq})"),
                )
            )
        pending = sum(s.replay.stop - s.replay.start for s in streams if s.replay is not None)
        details.append(
            (
                "sequence gaps",
                f"{self.gaps} gaps, {self.missing} batches missing: {self.recovered} recovered by replay, "
                f"{self.lost} lost" + (f", {pending} being replayed" if pending else ""),
            )
        )
        details.append(("evictions", f"{self.evictions_total} total, {self._eviction_rate(now):.1f}/s"))
        details.append(
            ("re-stores after removal", str(sum(s.blocks.restores_after_removal for s in streams)))
        )
        details.append(
            (
                "hit reporting",
                f"hits reported ({stores_of_resident} stores of resident blocks)"
                if stores_of_resident
                else ("misses only so far" if stored else "unknown (no stores yet)"),
            )
        )
        ignored = ", ".join(f"{m} {n} events" for m, n in self._ignored_media.most_common())
        details.append(("medium", (self.medium or "all") + (f"; ignored: {ignored}" if ignored else "")))
        if self.group_idx is not None:
            details.append(
                ("KV cache group", f"{self.group_idx}; {self._ignored_groups} events of other groups ignored")
            )
        if self.block_size is not None:
            details.append(("block size", f"{self.block_size} tokens"))
        if self.resets or self.clears:
            details.append(("resets", f"{self.resets} engine restarts, {self.clears} AllBlocksCleared"))

        return SourceHealth(
            source=self.name,
            kind=self.kind,
            connected=bool(streams) and n_connected == len(streams),
            state=state,
            last_data_at=self.last_data_at,
            received=self.received,
            accesses=self.accesses,
            rejected=self.rejects.summary(),
            notes=tuple(notes),
            details=tuple(details),
        )
