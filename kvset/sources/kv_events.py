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

Hybrid models store each request's blocks once per KV cache group, often under the same hashes.
Only one group is counted: the one given with --group-idx, else the group that says it is full
attention (kv_cache_spec_kind), else the first group seen; each (rank, group) has its own
resident set, so one group's blocks never look like hits in another.

Whether the engine reports its hits is decided from a sustained signal: enough stores of
blocks that are already resident (HITS_MIN_STORES, and HITS_MIN_SHARE of all stores). After
events were lost, the blocks resident then may have been evicted unseen, so their next store is
not taken as a hit.

Sequence gaps, and payloads that arrive unreadable in sequence, are recovered from the
publisher's replay socket (DEALER -> ROUTER, vLLM's protocol) with a bounded wait; whatever
cannot be recovered is counted and shown. No message can stop the source: an error while
handling one is a counted rejection.
Nothing here blocks: sockets are polled with a timeout and an update is yielded at least
every `idle_tick` seconds.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

from kvset.engine.kv_events import (
    ALL_BLOCKS_CLEARED,
    BLOCK_REMOVED,
    BLOCK_STORED,
    END_SEQ,
    MAX_BLOCK_SIZE,
    KvEventBatch,
    decode_message,
    decode_payload,
    decode_seq,
    split_replay_reply,
)
from kvset.engine.resident_set import ResidentBlocks
from kvset.rejects import RejectCounter
from kvset.sources.base import IDLE_TICK, Source
from kvset.types import AccessBatch, EngineReading, SourceHealth, SourceUpdate, TimelineEvent

ALL_MEDIA = ("all", "any", "*")
DEFAULT_MEDIUM = "GPU"  # what events without a medium field (older vLLM, SGLang) describe
# "Hits reported" needs this many stores of resident blocks, and this share of all stores: one
# stray duplicate (a lost BlockRemoved, a second KV cache group) must not decide it.
HITS_MIN_STORES = 10
HITS_MIN_SHARE = 0.01
# kv_cache_spec_kind values of groups whose blocks hold a shared prefix's full KV state.
FULL_ATTENTION_KINDS = frozenset({"full_attention", "mla_attention", "sink_full_attention"})
NO_GROUP = -1  # events without group_idx (older vLLM, SGLang): always counted
HITS_REPORTED_NOTE = "hits reported: the curve is the exact LRU curve of the engine's accesses"
MISSES_ONLY_NOTE = (
    "engine reports misses only (stored blocks are not already resident, or too rarely to tell): the "
    "curve is the LRU curve of the engine's misses, its hits are invisible. Fix: vLLM >= 0.26, send "
    'requests with vllm_xargs: {"kv_cache_report_mode": "full"}'
)
EVENTS_HELP = (
    "KV events (--events): every block the engine stores is one access, one BlockStored one request. "
    "Engines publish stores of newly computed blocks only by default, i.e. their misses: hits are "
    "invisible, and the curve is then the LRU curve of the engine's misses (roughly what a second "
    "cache tier behind the engine would see), not of all its accesses. vLLM >= 0.26 also publishes "
    'the hit blocks of requests sent with vllm_xargs: {"kv_cache_report_mode": "full"}; then the '
    "curve is the exact LRU curve of the engine's accesses. The status line says which case is seen "
    f"(at least {HITS_MIN_STORES} stores of blocks that are already resident, and at least "
    f"{HITS_MIN_SHARE:.0%} of all stores, mean hits are reported). BlockRemoved events give the engine's "
    "own resident blocks, evictions and re-stores after removal (misses a larger cache would have hit). "
    "Hybrid models publish one copy of each block per KV cache group: one group is counted (--group-idx, "
    "else the full-attention group when the events say which it is, else the first group seen)."
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
    elif token_count > 0 and token_count % n_blocks == 0 and token_count // n_blocks <= MAX_BLOCK_SIZE:
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
    # True: asked again for one batch that arrived in sequence but unreadable (already rejected once)
    unreadable: bool = False
    got: dict[int, bytes] = field(default_factory=dict)


@dataclass
class _Stream:
    """One publisher endpoint: its sockets, its sequence state and its engine's resident sets."""

    address: str
    replay_address: str | None
    sub: zmq.Socket
    monitor: zmq.Socket | None
    groups: dict[int, ResidentBlocks] = field(default_factory=dict)  # by KV cache group (NO_GROUP)
    dealer: zmq.Socket | None = None
    connected: bool = False
    ever_connected: bool = False
    expected: int | None = None  # next sequence number
    first_seq: int | None = None
    replay: _Replay | None = None
    held: deque = field(default_factory=deque)  # (seq, batch) waiting for a replay to finish
    # False once a batch asked again came back just as unreadable: the publisher itself sends such
    # bytes, and asking again for each would make it resend its replay buffer every time.
    retry_unreadable: bool = True
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
        # KV cache groups: the one counted (given, or chosen on the first stores) and the others.
        self._group_in_use: int | None = group_idx
        self._groups_seen: set[int] = set()
        self._group_kinds: dict[int, str] = {}  # kv_cache_spec_kind by group, where the events say
        self._ignored_group_events = 0
        self._ignored_group_blocks = 0
        self._ignored_media: Counter[str] = Counter()
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
            stream = _Stream(address, replay_address, sub, monitor)
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
            try:
                seq, batch = decode_message(frames, self.rejects, stream.address)
                if seq is not None:
                    if stream.replay is not None:
                        stream.held.append((seq, batch))
                    else:
                        self._sequence(stream, seq, batch)
            except Exception as exc:  # noqa: BLE001 - no message may stop the source
                self._handling_failed(stream, exc, stream.address)
            if self._pending >= self.flush_accesses:
                return

    def _handling_failed(self, stream: _Stream, exc: Exception, where: str) -> None:
        """A message whose handling raised: counted, and what it may have changed is not trusted."""
        self.rejects.reject(f"undecodable message: {type(exc).__name__}", f"{where}: {exc}")
        self._events_lost(stream)

    def _events_lost(self, stream: _Stream) -> None:
        for blocks in stream.groups.values():
            blocks.mark_uncertain()

    # ----------------------------------------------------------------- sequence numbers
    def _sequence(self, stream: _Stream, seq: int, batch: KvEventBatch | None) -> None:
        """Place one published batch in its stream's sequence: accept, recover a gap, or reset."""
        if stream.expected is None:
            stream.first_seq = stream.expected = seq
        if seq == stream.expected:
            if batch is not None:
                self._accept(stream, seq, batch)
            elif stream.replay_address is not None and stream.retry_unreadable:
                # Cut short on the way: the engine's replay buffer still holds it whole.
                self.gaps += 1
                self.missing += 1
                self._start_replay(stream, seq, seq + 1, unreadable=True)
            else:
                stream.expected = seq + 1  # its number is used; its events are gone
                self._events_lost(stream)
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
            for blocks in stream.groups.values():
                blocks.clear()
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
            self._events_lost(stream)
            self._accept(stream, seq, batch)
            return
        stream.held.appendleft((seq, batch))
        self._start_replay(stream, stream.expected, seq)

    def _start_replay(self, stream: _Stream, start: int, stop: int, unreadable: bool = False) -> None:
        assert self._ctx is not None and self._poller is not None and stream.replay_address is not None
        stream.replay = _Replay(start, stop, time.monotonic() + self.replay_timeout, unreadable)
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
        # A batch that was unreadable when published has been rejected once already.
        rejects = RejectCounter() if replay.unreadable else self.rejects
        recovered = 0
        for seq in sorted(replay.got):
            where = f"{stream.replay_address} seq {seq}"
            try:
                batch = decode_payload(replay.got[seq], rejects, where)
                if batch is not None:
                    self._accept(stream, seq, batch)
                    recovered += 1
            except Exception as exc:  # noqa: BLE001 - no message may stop the source
                self._handling_failed(stream, exc, where)
        missing = replay.stop - replay.start
        self.recovered += recovered
        self.lost += missing - recovered
        if recovered < missing:
            self._events_lost(stream)
        stream.expected = replay.stop
        why = " (replay timed out)" if timed_out and recovered < missing else ""
        if replay.unreadable:
            outcome = "recovered by replay" if recovered else f"lost{why}"
            if replay.got and not recovered:
                stream.retry_unreadable = False
                outcome += " (its replayed copy is unreadable too: such batches are not asked for again)"
            text = f"{self._label(stream)}: seq {replay.start} unreadable: {outcome}"
        else:
            text = (
                f"{self._label(stream)}: {missing} batches missing (seq {replay.start}..{replay.stop - 1}): "
                f"{recovered} recovered by replay, {missing - recovered} lost{why}"
            )
        self._timeline.append(TimelineEvent(time.time(), "sequence-gap", text))
        while stream.held and stream.replay is None:
            seq, held_batch = stream.held.popleft()
            try:
                self._sequence(stream, seq, held_batch)
            except Exception as exc:  # noqa: BLE001 - no message may stop the source
                self._handling_failed(stream, exc, f"{stream.address} seq {seq}")

    # ----------------------------------------------------------------- events
    def _medium_selected(self, medium: str | None) -> bool:
        return self.medium is None or (medium or DEFAULT_MEDIUM).upper() == self.medium

    def _blocks(self, stream: _Stream, group: int) -> ResidentBlocks:
        blocks = stream.groups.get(group)
        if blocks is None:
            blocks = stream.groups[group] = ResidentBlocks(self.removed_memory)
        return blocks

    def _counted_sets(self, stream: _Stream) -> list[ResidentBlocks]:
        """The resident sets whose blocks are accesses: events without a group, and the group in use."""
        return [b for g, b in stream.groups.items() if g == NO_GROUP or g == self._group_in_use]

    def _group_name(self, group: int) -> str:
        kind = self._group_kinds.get(group)
        return f"group {group}" + (f" ({kind})" if kind else "")

    def _choose_group(self, stream: _Stream, batch: KvEventBatch) -> None:
        """Without --group-idx: pick the counted KV cache group from a batch's stores.

        The full-attention group when the events name the kinds, else the first group seen. A
        group already in use that the events call something else (sliding window, Mamba) gives way
        to a full-attention group that shows up later.
        """
        candidates: list[int] = []
        for i in range(len(batch)):
            group = int(batch.group_idx[i])
            if group < 0 or batch.kinds[i] != BLOCK_STORED or not self._medium_selected(batch.media[i]):
                continue
            kind = batch.spec_kinds[i]
            if kind is not None:
                self._group_kinds[group] = kind
            candidates.append(group)
        if not candidates:
            return
        full = next((g for g in candidates if self._group_kinds.get(g) in FULL_ATTENTION_KINDS), None)
        current = self._group_in_use
        if current is None:
            self._group_in_use = candidates[0] if full is None else full
            return
        current_kind = self._group_kinds.get(current)
        if full is not None and current_kind is not None and current_kind not in FULL_ATTENTION_KINDS:
            self._group_in_use = full
            self._timeline.append(
                TimelineEvent(
                    time.time(),
                    "kv-cache-group",
                    f"{self._label(stream)}: counting KV cache {self._group_name(full)} from now on "
                    f"instead of {self._group_name(current)} (the accesses so far came from group {current})",
                )
            )

    def _accept(self, stream: _Stream, seq: int, batch: KvEventBatch) -> None:
        stream.expected = seq + 1
        stream.batches += 1
        if batch.rank is not None:
            stream.rank = batch.rank
        if self.group_idx is None:
            self._choose_group(stream, batch)
        for i in range(len(batch)):
            kind = int(batch.kinds[i])
            if kind == ALL_BLOCKS_CLEARED:
                self.clears += 1
                for blocks in stream.groups.values():
                    blocks.clear()
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
            keys = batch.event_keys(i)
            counted = group == NO_GROUP or group == self._group_in_use
            if group >= 0:
                self._groups_seen.add(group)
                if not counted and self._group_in_use is not None:  # (None: a removal before any store)
                    self._ignored_group_events += 1
                    if kind == BLOCK_STORED:
                        self._ignored_group_blocks += len(keys)
                    if self.group_idx is not None:
                        continue  # the user chose a group: the others are not even tracked
            # Every group keeps its own resident set, so that a later switch finds it right.
            blocks = self._blocks(stream, group)
            if kind == BLOCK_REMOVED:
                blocks.remove(keys)
            elif kind == BLOCK_STORED and len(keys):
                blocks.store(keys)
                if not counted:
                    continue
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
            resident_blocks=self._counted_total(lambda b: len(b)),
            evictions_total=self.evictions_total,
            restores_after_removal=self._counted_total(lambda b: b.restores_after_removal),
            label="kv events",
        )

    def _counted_total(
        self, count: Callable[[ResidentBlocks], int], streams: list[_Stream] | None = None
    ) -> int:
        return sum(
            count(b) for s in (self._streams if streams is None else streams) for b in self._counted_sets(s)
        )

    @property
    def evictions_total(self) -> int:
        return self._counted_total(lambda b: b.evictions_total)

    def _hit_evidence(self) -> tuple[int, int]:
        """(stores of blocks known to be resident, all stores) of the counted groups."""
        return (
            self._counted_total(lambda b: b.stores_of_resident),
            self._counted_total(lambda b: b.stored_total),
        )

    @property
    def hits_reported(self) -> bool:
        """Whether the engine's stores include its hits: a sustained share of stores of resident blocks."""
        resident, stored = self._hit_evidence()
        return resident >= HITS_MIN_STORES and resident >= HITS_MIN_SHARE * stored

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

    def _group_facts(self) -> tuple[str, str] | None:
        """(note, detail) about KV cache groups, when there is more than one to choose from."""
        if self._group_in_use is None or (self.group_idx is None and len(self._groups_seen) < 2):
            return None
        others = sorted(self._groups_seen - {self._group_in_use})
        of = ("group " if len(others) == 1 else "groups ") + ", ".join(map(str, others))
        if self.group_idx is not None:
            why = "--group-idx"
        else:
            why = self._group_kinds.get(self._group_in_use) or "first seen"
        detail = f"{self._group_in_use} ({why})"
        if others:
            events, blocks = self._ignored_group_events, self._ignored_group_blocks
            detail += f"; ignored: {events} events, {blocks} stored blocks of {of}"
        note = ""
        if self.group_idx is None:
            note = (
                f"several KV cache groups: counting group {self._group_in_use} only; choose with --group-idx "
                f"({self._ignored_group_blocks} stored blocks of {of} ignored)"
            )
        return note, detail

    def _hit_reporting(self) -> str:
        resident, stored = self._hit_evidence()
        if self.hits_reported:
            return f"hits reported ({resident} stores of resident blocks of {stored} stores)"
        if resident:
            of = f" of {stored} stores" if resident >= HITS_MIN_STORES else ""
            return f"misses only so far ({resident} stores of resident blocks{of}: too few to tell)"
        return "misses only so far" if stored else "unknown (no stores yet)"

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
        stored = self._counted_total(lambda b: b.stored_total)
        hits_reported = self.hits_reported
        group_facts = self._group_facts()

        notes: list[str] = []
        if hits_reported:
            notes.append(HITS_REPORTED_NOTE)
        elif stored:
            notes.append(MISSES_ONLY_NOTE)
        if self.lost:
            why = "" if any(self.replay_endpoints) else "; give --replay-endpoint to recover gaps"
            notes.append(
                f"{self.lost} event batches lost in sequence gaps: their accesses are missing from the curve{why}"
            )
        if group_facts is not None and group_facts[0]:
            notes.append(group_facts[0])
        if self._ignored_media and not stored:
            seen = ", ".join(f"{m} ({n} events)" for m, n in self._ignored_media.most_common())
            notes.append(f"no {self.medium} events yet; other media seen: {seen}; see --medium")

        details: list[tuple[str, str]] = []
        for stream in streams:
            label = self._label(stream) + ("" if stream.rank is None else f" {stream.address}")
            seq = "-" if stream.expected is None else str(stream.expected - 1)
            resident = self._counted_total(lambda b: len(b), [stream])
            evictions = self._counted_total(lambda b: b.evictions_total, [stream])
            details.append(
                (
                    label,
                    f"{stream.batches} batches, {stream.accesses} accesses, {resident} resident blocks, "
                    f"{evictions} evictions, last seq {seq}"
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
            ("re-stores after removal", str(self._counted_total(lambda b: b.restores_after_removal)))
        )
        details.append(("hit reporting", self._hit_reporting()))
        unsure = self._counted_total(lambda b: b.stores_of_uncertain)
        if unsure:
            details.append(
                (
                    "stores after lost events",
                    f"{unsure} stores of blocks whose eviction may have been lost: not taken as hits",
                )
            )
        ignored = ", ".join(f"{m} {n} events" for m, n in self._ignored_media.most_common())
        details.append(("medium", (self.medium or "all") + (f"; ignored: {ignored}" if ignored else "")))
        if group_facts is not None:
            details.append(("KV cache group", group_facts[1]))
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
            reports_hits=hits_reported,
        )
