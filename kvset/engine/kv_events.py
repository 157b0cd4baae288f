"""Decoding of the KV-cache events vLLM and SGLang publish over ZMQ.

A message has three frames: topic, an 8-byte big-endian sequence number, and a msgpack
payload `[ts, events, data_parallel_rank]` (the rank is absent before vLLM added it, and
newer publishers may send the batch as a map `{ts, events, data_parallel_rank}`).

Two event layouts exist on the wire:
- maps with a `"type"` key (vLLM >= 0.24): `{"type": "BlockStored", "block_hashes": [...], ...}`;
- tagged arrays (vLLM <= 0.23, SGLang): `["BlockStored", block_hashes, parent_block_hash,
  token_ids, block_size, lora_id, medium, ...]`, fields in declaration order, trailing
  defaults omitted.

Block hashes arrive as unsigned 64-bit ints (vLLM), signed 64-bit ints (SGLang) or raw
digests (vLLM with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0). All become uint64 keys: signed
values by two's complement, digests folded as vLLM folds them (last 8 bytes, big-endian), so
the same block gets the same key whichever form its engine published.

A BlockStored may also say whom it is for (kvset.engine.kv_event_principals attributes the accesses):
vLLM 0.33's `lora_name`, `session_id` and `extra_keys` (the cache salt in the first block's entry),
SGLang's `cache_salt`, `session_id` and `lora_name`.

Nothing here raises on bad input: every malformed message, payload or event is counted in a
RejectCounter with its reason, and the rest of the batch is kept. Integers are held to the ranges
an engine can send (a block of at most 2**20 tokens, fewer than 2**31 KV cache groups and ranks),
so that no value overflows the int64 arrays of a batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from kvset.rejects import RejectCounter

if TYPE_CHECKING:
    from typing_extensions import TypeIs


# Event kinds in KvEventBatch.kinds.
BLOCK_STORED = 1
BLOCK_REMOVED = 2
ALL_BLOCKS_CLEARED = 3
KIND_NAMES = {
    BLOCK_STORED: "BlockStored",
    BLOCK_REMOVED: "BlockRemoved",
    ALL_BLOCKS_CLEARED: "AllBlocksCleared",
}
_KIND_BY_NAME = {name: kind for kind, name in KIND_NAMES.items()}

SEQ_BYTES = 8
END_SEQ = b"\xff" * SEQ_BYTES  # the replay end marker: -1 as a signed 64-bit big-endian int

_UINT64_MASK = (1 << 64) - 1
_INT64_MIN = -(1 << 63)
MAX_BLOCK_SIZE = 1 << 20  # tokens per block; engines use 1..a few thousand
MAX_INDEX = (1 << 31) - 1  # group_idx, data-parallel rank

# Field order of the tagged-array layout; the map layout uses the same names.
STORED_FIELDS = (
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
    "kv_cache_spec_kind",
    "kv_cache_spec_sliding_window",
    "locality",
    "ownership",
    "session_id",
)
REMOVED_FIELDS = ("block_hashes", "medium", "group_idx")
RANK_FIELDS = ("data_parallel_rank", "attn_dp_rank", "dp_rank")
MAX_PRINCIPAL_CHARS = 256  # a longer salt, session id or LoRA name is cut (labels are cut shorter still)
NO_PRINCIPAL: tuple[str | None, str | None, str | None] = (None, None, None)

_decoder = msgspec.msgpack.Decoder()


@dataclass(frozen=True, eq=False)
class KvEventBatch:
    """One published batch, as flat arrays (one row per event; keys of all events concatenated).

    Event i's block keys are keys[key_offsets[i]:key_offsets[i + 1]].
    """

    ts: float
    rank: int | None
    kinds: np.ndarray  # uint8: BLOCK_STORED | BLOCK_REMOVED | ALL_BLOCKS_CLEARED
    key_offsets: np.ndarray  # int64, len(kinds) + 1
    keys: np.ndarray  # uint64
    block_sizes: np.ndarray  # int64, 0 where the event has none
    token_counts: np.ndarray  # int64, len(token_ids); -1 where the event carries none
    group_idx: np.ndarray  # int64, -1 where absent
    parents: np.ndarray  # uint64 parent block key (0 where none)
    has_parent: np.ndarray  # bool
    media: tuple[str | None, ...]
    spec_kinds: tuple[str | None, ...]  # BlockStored's kv_cache_spec_kind, e.g. "full_attention"
    sliding_windows: np.ndarray  # int64: BlockStored's kv_cache_spec_sliding_window (tokens), 0 where none
    layout: str  # "map" or "array" (of its first good event; "" when it has none)
    signed_hashes: int = 0  # events with a negative block hash: signed 64-bit hashes, SGLang's form
    # per event, whom a BlockStored says it is for: (cache salt, session id, LoRA name), each None
    # where the event does not say (principal_fields); () when no event of the batch says any
    principals: tuple[tuple[str | None, str | None, str | None], ...] = ()

    def __len__(self) -> int:
        return len(self.kinds)

    def event_keys(self, i: int) -> np.ndarray:
        return self.keys[self.key_offsets[i] : self.key_offsets[i + 1]]


class _BadEvent(ValueError):
    """An event that cannot be used; its message is the rejection reason."""


def _is_int(value: object) -> TypeIs[int]:
    return type(value) is int  # bool is excluded on purpose


def hash_to_key(value: object) -> int:
    """One block hash (int of either sign, or a digest) as an unsigned 64-bit key."""
    if _is_int(value):
        if not _INT64_MIN <= value <= _UINT64_MASK:
            raise _BadEvent("block hash outside 64 bits")
        return value & _UINT64_MASK
    if isinstance(value, bytes):
        if not value:
            raise _BadEvent("empty block hash digest")
        return int.from_bytes(value[-8:], "big")
    raise _BadEvent("block hash is neither an integer nor bytes")


def hashes_to_keys(values: object) -> np.ndarray:
    """A list of block hashes as uint64 keys, vectorized for the common all-int and all-digest cases."""
    if not isinstance(values, list):
        raise _BadEvent("block_hashes is not a list")
    if not values:
        return np.empty(0, dtype=np.uint64)
    types = set(map(type, values))
    if types == {int}:
        try:
            return np.array(values, dtype=np.uint64)
        except OverflowError:
            pass
        try:  # SGLang publishes signed 64-bit hashes
            return np.array(values, dtype=np.int64).view(np.uint64)
        except OverflowError:
            pass
    elif types == {bytes}:
        width = len(values[0])
        if width >= 8 and all(len(v) == width for v in values):
            raw = np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), width)
            return np.ascontiguousarray(raw[:, width - 8 :]).view(">u8").ravel().astype(np.uint64)
    # Mixed forms, or values out of range: one at a time, with the exact reason on failure.
    return np.array([hash_to_key(v) for v in values], dtype=np.uint64)


def _has_negative(values: list[Any]) -> bool:
    """Whether a list of hashes already read as keys holds a negative integer (an engine that
    publishes signed hashes: SGLang)."""
    try:
        return bool(values) and _is_int(values[0]) and min(values) < 0
    except TypeError:  # mixed ints and digests
        return any(_is_int(v) and v < 0 for v in values)


def _optional_text(fields: dict[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _BadEvent(f"{name} is not a string")
    return value[:MAX_PRINCIPAL_CHARS] or None


def _salt_of(fields: dict[str, Any], lora_name: str | None) -> str | None:
    """The request's cache salt: SGLang's `cache_salt` (or `metadata.cache_salt`), else vLLM's, the
    string of the first block's `extra_keys` entry after the LoRA name. vLLM publishes that entry
    untagged, in the order it hashes it: the LoRA name when the request has one, `(mm_identifier,
    offset)` pairs, the salt, prompt-embedding digests (bytes); only a request's first block has the
    salt, so only a store that starts a chain (no parent) can carry it."""
    metadata = fields.get("metadata")
    if "cache_salt" in fields or isinstance(metadata, dict):
        where = fields if "cache_salt" in fields else metadata
        assert isinstance(where, dict)
        return _optional_text(where, "cache_salt")
    extra = fields.get("extra_keys")
    if extra is None or fields.get("parent_block_hash") is not None:
        return None
    if not isinstance(extra, list):
        raise _BadEvent("extra_keys is not a list")
    first = extra[0] if extra else None
    if first is None:
        return None
    if not isinstance(first, list):
        raise _BadEvent("an extra_keys entry is not a list")
    texts = [key for key in first if isinstance(key, str)]
    if lora_name is not None and texts and texts[0] == lora_name:
        texts = texts[1:]
    return (texts[0][:MAX_PRINCIPAL_CHARS] or None) if texts else None


def principal_fields(fields: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(cache salt, session id, LoRA name) of one BlockStored; None where it does not say."""
    lora = _optional_text(fields, "lora_name")
    return _salt_of(fields, lora), _optional_text(fields, "session_id"), lora


def _optional_int(fields: dict[str, Any], name: str, minimum: int, maximum: int) -> int | None:
    value = fields.get(name)
    if value is None:
        return None
    if not _is_int(value) or not minimum <= value <= maximum:
        raise _BadEvent(f"{name} is not an integer in {minimum}..{maximum}")
    return value


class _BatchBuilder:
    """Collects decoded events into flat arrays."""

    def __init__(self) -> None:
        self.kinds: list[int] = []
        self.keys: list[np.ndarray] = []
        self.block_sizes: list[int] = []
        self.token_counts: list[int] = []
        self.group_idx: list[int] = []
        self.parents: list[int] = []
        self.has_parent: list[bool] = []
        self.media: list[str | None] = []
        self.spec_kinds: list[str | None] = []
        self.signed_hashes = 0
        self.sliding_windows: list[int] = []
        self.principals: list[tuple[str | None, str | None, str | None]] = []

    def add(self, kind: int, fields: dict[str, Any]) -> None:
        # Every check comes before the first append, so a rejected event leaves no trace.
        spec_kind, window, principal = None, 0, NO_PRINCIPAL
        if kind == ALL_BLOCKS_CLEARED:
            keys = np.empty(0, dtype=np.uint64)
            block_size, token_count, group, medium, parent = 0, -1, -1, None, None
            negative = False
        else:
            if "block_hashes" not in fields:
                raise _BadEvent("event without block_hashes")
            keys = hashes_to_keys(fields["block_hashes"])
            negative = _has_negative(fields["block_hashes"])
            medium = fields.get("medium")
            if medium is not None and not isinstance(medium, str):
                raise _BadEvent("medium is not a string")
            given_group = _optional_int(fields, "group_idx", 0, MAX_INDEX)
            group = -1 if given_group is None else given_group
            block_size, token_count, parent = 0, -1, None
            if kind == BLOCK_STORED:
                block_size = _optional_int(fields, "block_size", 1, MAX_BLOCK_SIZE) or 0
                raw_kind = fields.get("kv_cache_spec_kind")
                spec_kind = raw_kind[:40] if isinstance(raw_kind, str) else None
                window = _optional_int(fields, "kv_cache_spec_sliding_window", 1, MAX_INDEX) or 0
                token_ids = fields.get("token_ids")
                if token_ids is not None:
                    if not isinstance(token_ids, list):
                        raise _BadEvent("token_ids is not a list")
                    token_count = len(token_ids)
                raw_parent = fields.get("parent_block_hash")
                parent = None if raw_parent is None else hash_to_key(raw_parent)
                principal = principal_fields(fields)
        self.kinds.append(kind)
        self.keys.append(keys)
        self.block_sizes.append(block_size)
        self.token_counts.append(token_count)
        self.group_idx.append(group)
        self.parents.append(0 if parent is None else parent)
        self.has_parent.append(parent is not None)
        self.media.append(medium)
        self.spec_kinds.append(spec_kind)
        self.signed_hashes += negative
        self.sliding_windows.append(window)
        self.principals.append(principal)

    def build(self, ts: float, rank: int | None, layout: str) -> KvEventBatch:
        offsets = np.zeros(len(self.kinds) + 1, dtype=np.int64)
        if self.keys:
            np.cumsum([len(k) for k in self.keys], out=offsets[1:])
            keys = np.concatenate(self.keys)
        else:
            keys = np.empty(0, dtype=np.uint64)
        return KvEventBatch(
            ts=ts,
            rank=rank,
            kinds=np.array(self.kinds, dtype=np.uint8),
            key_offsets=offsets,
            keys=keys,
            block_sizes=np.array(self.block_sizes, dtype=np.int64),
            token_counts=np.array(self.token_counts, dtype=np.int64),
            group_idx=np.array(self.group_idx, dtype=np.int64),
            parents=np.array(self.parents, dtype=np.uint64),
            has_parent=np.array(self.has_parent, dtype=bool),
            media=tuple(self.media),
            spec_kinds=tuple(self.spec_kinds),
            sliding_windows=np.array(self.sliding_windows, dtype=np.int64),
            layout=layout,
            signed_hashes=self.signed_hashes,
            principals=tuple(self.principals) if any(p != NO_PRINCIPAL for p in self.principals) else (),
        )


def _event_fields(event: object) -> tuple[str, dict[str, Any], str]:
    """(type name, fields by name, layout) of one event in either layout."""
    if isinstance(event, dict):
        name = event.get("type")
        if not isinstance(name, str):
            raise _BadEvent("event map without a 'type' string")
        return name, event, "map"
    if isinstance(event, list) and event and isinstance(event[0], str):
        name = event[0]
        names = STORED_FIELDS if name == "BlockStored" else REMOVED_FIELDS if name == "BlockRemoved" else ()
        return name, dict(zip(names, event[1:], strict=False)), "array"
    raise _BadEvent("event is neither a map with 'type' nor a tagged array")


def _split_batch(obj: object) -> tuple[object, object, object]:
    """(ts, events, rank) from the array form or the map form of a batch."""
    if isinstance(obj, list):
        if len(obj) < 2:
            raise _BadEvent("not [ts, events, rank]")
        return obj[0], obj[1], obj[2] if len(obj) > 2 else None
    if isinstance(obj, dict):
        if "ts" not in obj or "events" not in obj:
            raise _BadEvent("map without ts and events")
        rank = next((obj[k] for k in RANK_FIELDS if k in obj), None)
        return obj["ts"], obj["events"], rank
    raise _BadEvent("not [ts, events, rank]")


def decode_payload(payload: bytes, rejects: RejectCounter, where: str = "") -> KvEventBatch | None:
    """Decode one msgpack batch; None (and a counted rejection) if the payload is unusable.

    A bad event inside a good batch is rejected on its own; the other events are kept.
    """
    prefix = f"{where}: " if where else ""
    try:
        obj = _decoder.decode(payload)
    except msgspec.DecodeError as exc:
        reason = "payload: truncated msgpack" if "truncated" in str(exc) else "payload: not msgpack"
        rejects.reject(reason, f"{prefix}{len(payload)} bytes: {exc}")
        return None
    except (RecursionError, OverflowError, ValueError, TypeError, MemoryError) as exc:
        # e.g. thousands of nested arrays: msgspec gives up on the depth
        rejects.reject(f"payload: undecodable ({type(exc).__name__})", f"{prefix}{len(payload)} bytes")
        return None
    try:
        return _decode_batch(obj, rejects, prefix, len(payload))
    except (RecursionError, OverflowError, ValueError, TypeError) as exc:
        # A value this decoder does not expect; the checks above are meant to make this unreachable.
        rejects.reject(f"payload: undecodable ({type(exc).__name__})", f"{prefix}{len(payload)} bytes")
        return None


def _decode_batch(obj: object, rejects: RejectCounter, prefix: str, size: int) -> KvEventBatch | None:
    try:
        ts, events, rank = _split_batch(obj)
        if not (_is_int(ts) or isinstance(ts, float)) or not math.isfinite(ts):
            raise _BadEvent("ts is not a number")
        if not isinstance(events, list):
            raise _BadEvent("events is not a list")
        if rank is not None and not (_is_int(rank) and 0 <= rank <= MAX_INDEX):
            raise _BadEvent(f"rank is not an integer in 0..{MAX_INDEX}")
    except _BadEvent as exc:
        rejects.reject(f"payload: {exc}", f"{prefix}{type(obj).__name__} of {size} bytes")
        return None

    builder = _BatchBuilder()
    layout = ""
    for i, event in enumerate(events):
        try:
            name, fields, layout_of_event = _event_fields(event)
            kind = _KIND_BY_NAME.get(name)
            if kind is None:
                rejects.reject("event: unknown type", f"{prefix}event {i}: type {name[:40]!r}")
                continue
            builder.add(kind, fields)
            layout = layout or layout_of_event
        except _BadEvent as exc:
            rejects.reject(f"event: {exc}", f"{prefix}event {i}")
        except (RecursionError, OverflowError, ValueError, TypeError) as exc:
            rejects.reject(f"event: undecodable ({type(exc).__name__})", f"{prefix}event {i}")
    return builder.build(float(ts), rank, layout)


def decode_seq(frame: bytes) -> int | None:
    return int.from_bytes(frame, "big") if len(frame) == SEQ_BYTES else None


def decode_message(
    frames: Sequence[bytes], rejects: RejectCounter, where: str = ""
) -> tuple[int | None, KvEventBatch | None]:
    """(sequence number, batch) of a published message [topic, seq, payload].

    The sequence is None when the frames are unusable; the batch is None when the payload is.
    """
    prefix = f"{where}: " if where else ""
    if len(frames) != 3:
        rejects.reject("message: not 3 frames (topic, seq, payload)", f"{prefix}{len(frames)} frames")
        return None, None
    seq = decode_seq(frames[1])
    if seq is None:
        rejects.reject("message: sequence frame is not 8 bytes", f"{prefix}{len(frames[1])} bytes")
        return None, None
    where_seq = f"{where} seq {seq}" if where else f"seq {seq}"
    return seq, decode_payload(frames[2], rejects, where_seq)


def split_replay_reply(frames: Sequence[bytes]) -> tuple[bytes, bytes]:
    """(seq frame, payload) of one reply on the replay DEALER socket.

    vLLM >= 0.3x sends ["", topic, seq, payload]; older publishers (and SGLang) send
    ["", seq, payload]. The end marker has seq END_SEQ and an empty payload. Raises ValueError
    on anything else.
    """
    if len(frames) == 4 and frames[0] == b"":
        return frames[2], frames[3]
    if len(frames) == 3 and frames[0] == b"":
        return frames[1], frames[2]
    raise ValueError(f"replay reply with {len(frames)} frames")
