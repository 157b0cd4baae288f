"""A fake engine KV-event publisher on 127.0.0.1, speaking vLLM's ZMQ protocol byte for byte.

Layouts:
- "vllm": vLLM 0.33 (the fixture): payload [ts, events, rank], events as maps with "type";
- "vllm-array": vLLM <= 0.23: events as tagged arrays [tag, fields...];
- "sglang": SGLang: tagged arrays, signed 64-bit hashes, payload [ts, events, attn_dp_rank].

It binds an XPUB socket (a PUB that also reports subscriptions, so a test can wait for its
subscriber instead of sleeping) and a ROUTER replay socket served by a background thread with
a replay buffer, like vLLM's ZmqEventPublisher. Tests can drop batches (sequence gaps), keep
them out of the replay buffer (unrecoverable), send truncated or garbage frames, silence the
replay socket, and restart (sequence back to 0, sockets re-bound on the same ports).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import msgspec
import zmq

END_SEQ = b"\xff" * 8
LAYOUTS = ("vllm", "vllm-array", "sglang")


class _BlockStored(msgspec.Struct, tag="BlockStored", tag_field="type", omit_defaults=True):
    """vLLM 0.33's field list: the header of an encoded map depends on the number of fields."""

    block_hashes: list[Any]
    parent_block_hash: Any
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[Any] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: Any = None
    ownership: Any = None
    session_id: Any = None
    lookahead_token_ids: list[int] | None = None


class _BlockRemoved(msgspec.Struct, tag="BlockRemoved", tag_field="type", omit_defaults=True):
    block_hashes: list[Any]
    medium: str | None
    group_idx: int | None = None
    locality: Any = None
    ownership: Any = None


class _AllBlocksCleared(msgspec.Struct, tag="AllBlocksCleared", tag_field="type", omit_defaults=True):
    pass


def _signed(value: Any) -> Any:
    """SGLang's form of a 64-bit hash: a signed int."""
    if isinstance(value, int) and value >= 1 << 63:
        return value - (1 << 64)
    return value


class FakeVllmPublisher:
    def __init__(
        self,
        layout: str = "vllm",
        rank: int = 0,
        topic: str = "",
        replay: bool = True,
        buffer_steps: int = 10_000,
        sndhwm: int = 100_000,
    ) -> None:
        """sndhwm: the PUB socket's high-water mark (vLLM's default); a small one makes ZMQ drop."""
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}")
        self.layout = layout
        self.rank = rank
        self.topic = topic.encode()
        self.replay_enabled = replay
        self.replay_silent = False  # True: swallow replay requests (a replay that times out)
        self.replay_requests: list[int] = []
        self.sndhwm = sndhwm
        self._buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer_steps)
        self._lock = threading.Lock()
        self._encoder = msgspec.msgpack.Encoder()
        self._ctx = zmq.Context()
        self._next_seq = 0
        self._pub: zmq.Socket | None = None
        self._router: zmq.Socket | None = None
        self._thread: threading.Thread | None = None
        self._running = threading.Event()
        self._pub_port = 0
        self._replay_port = 0
        self._bind()

    # ----------------------------------------------------------------- sockets
    def _bind_socket(self, kind: int, port: int) -> tuple[zmq.Socket, int]:
        sock = self._ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        if kind == zmq.XPUB:
            sock.setsockopt(zmq.XPUB_VERBOSE, 1)
            sock.setsockopt(zmq.SNDHWM, self.sndhwm)
        deadline = time.monotonic() + 5.0
        while True:
            try:
                if port:
                    sock.bind(f"tcp://127.0.0.1:{port}")
                    return sock, port
                sock.bind("tcp://127.0.0.1:*")
                return sock, int(sock.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1])
            except zmq.ZMQError:
                if time.monotonic() > deadline:  # the old listener of a restart is still closing
                    sock.close(linger=0)
                    raise
                time.sleep(0.02)

    def _bind(self) -> None:
        self._pub, self._pub_port = self._bind_socket(zmq.XPUB, self._pub_port)
        if self.replay_enabled:
            self._router, self._replay_port = self._bind_socket(zmq.ROUTER, self._replay_port)
            self._running.set()
            self._thread = threading.Thread(target=self._serve_replay, name="fake-replay", daemon=True)
            self._thread.start()

    def _unbind(self) -> None:
        self._running.clear()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._router is not None:
            self._router.close(linger=0)
            self._router = None
        if self._pub is not None:
            self._pub.close(linger=0)
            self._pub = None

    @property
    def endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self._pub_port}"

    @property
    def replay_endpoint(self) -> str:
        if not self.replay_enabled:
            raise RuntimeError("this publisher has no replay socket")
        return f"tcp://127.0.0.1:{self._replay_port}"

    def wait_for_subscriber(self, timeout: float = 5.0) -> None:
        """Block until a subscriber's subscription arrives (the ZMQ slow-joiner problem)."""
        assert self._pub is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._pub.poll(50):
                message = self._pub.recv()
                if message[:1] == b"\x01":
                    return
        raise TimeoutError("no subscriber within the timeout")

    def close(self) -> None:
        self._unbind()
        self._ctx.term()

    def __enter__(self) -> FakeVllmPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def restart(self) -> None:
        """Like an engine restart: sockets closed and re-bound on the same ports, sequence back to 0."""
        self._unbind()
        with self._lock:
            self._buffer.clear()
            self._next_seq = 0
        self._bind()

    # ----------------------------------------------------------------- events
    def stored(
        self,
        hashes: list[Any],
        token_ids: list[int] | None = None,
        block_size: int = 16,
        parent: Any = None,
        medium: str | None = "GPU",
        group_idx: int | None = 0,
        lora_id: int | None = None,
        spec_kind: str | None = None,
    ) -> Any:
        if token_ids is None:
            token_ids = list(range(block_size * len(hashes)))
        if self.layout == "vllm":
            return _BlockStored(
                hashes,
                parent,
                token_ids,
                block_size,
                lora_id,
                medium,
                None,
                group_idx=group_idx,
                kv_cache_spec_kind=spec_kind,
            )
        if self.layout == "vllm-array":
            return ["BlockStored", hashes, parent, token_ids, block_size, lora_id, medium]
        event_array = [
            "BlockStored",
            [_signed(h) for h in hashes],
            _signed(parent),
            token_ids,
            block_size,
            lora_id,
        ]
        return event_array + ([medium] if medium is not None else [])

    def removed(self, hashes: list[Any], medium: str | None = "GPU", group_idx: int | None = 0) -> Any:
        if self.layout == "vllm":
            return _BlockRemoved(hashes, medium, group_idx=group_idx)
        if self.layout == "vllm-array":
            return ["BlockRemoved", hashes, medium]
        return ["BlockRemoved", [_signed(h) for h in hashes]] + ([medium] if medium is not None else [])

    def cleared(self) -> Any:
        return _AllBlocksCleared() if self.layout == "vllm" else ["AllBlocksCleared"]

    def encode_batch(self, events: list[Any], ts: float) -> bytes:
        return self._encoder.encode([ts, events, self.rank])

    # ----------------------------------------------------------------- publishing
    def _next(self) -> int:
        with self._lock:
            seq = self._next_seq
            self._next_seq += 1
        return seq

    def send_frames(self, frames: list[bytes]) -> None:
        assert self._pub is not None
        self._pub.send_multipart(frames)

    def publish_payload(self, payload: bytes, deliver: bool = True, replayable: bool = True) -> int:
        """Send a payload under the next sequence number; optionally drop it or keep it from replay."""
        seq = self._next()
        if deliver:
            self.send_frames([self.topic, seq.to_bytes(8, "big"), payload])
        if replayable:
            with self._lock:
                self._buffer.append((seq, payload))
        return seq

    def publish(
        self, events: list[Any], ts: float | None = None, deliver: bool = True, replayable: bool = True
    ) -> int:
        payload = self.encode_batch(events, time.time() if ts is None else ts)
        return self.publish_payload(payload, deliver=deliver, replayable=replayable)

    def send_truncated(self, events: list[Any], ts: float = 1.0) -> int:
        """A batch whose payload was cut short in transit (its full form stays in the replay buffer)."""
        payload = self.encode_batch(events, ts)
        seq = self._next()
        self.send_frames([self.topic, seq.to_bytes(8, "big"), payload[: len(payload) // 2]])
        with self._lock:
            self._buffer.append((seq, payload))
        return seq

    # ----------------------------------------------------------------- replay
    def _serve_replay(self) -> None:
        router = self._router
        assert router is not None
        while self._running.is_set():
            if not router.poll(50):
                continue
            frames = router.recv_multipart()
            if len(frames) != 3 or self.replay_silent:
                continue
            client, _, start_bytes = frames
            start = int.from_bytes(start_bytes, "big")
            self.replay_requests.append(start)
            with self._lock:
                batches = [(seq, payload) for seq, payload in self._buffer if seq >= start]
            for seq, payload in batches:
                router.send_multipart(self._reply(client, seq.to_bytes(8, "big"), payload))
            router.send_multipart(self._reply(client, END_SEQ, b""))

    def _reply(self, client: bytes, seq: bytes, payload: bytes) -> list[bytes]:
        # vLLM 0.33 replies carry the topic (see the fixture); older publishers and SGLang do not.
        if self.layout == "vllm":
            return [client, b"", self.topic, seq, payload]
        return [client, b"", seq, payload]
