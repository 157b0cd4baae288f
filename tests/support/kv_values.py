"""KV-event messages as plain values, in vLLM 0.33's map layout, for the pure engine tests."""

from __future__ import annotations

from typing import Any

import msgspec

from kvset.engine.kv_events import END_SEQ, KvEventBatch, decode_payload
from kvset.rejects import RejectCounter

END_OF_REPLAY = [b"", END_SEQ, b""]


def stored(
    hashes: list[int],
    block_size: int = 16,
    token_ids: list[int] | None = None,
    group_idx: int | None = 0,
    medium: str | None = "GPU",
    spec_kind: str | None = None,
    parent: int | None = None,
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "BlockStored",
        "block_hashes": hashes,
        "parent_block_hash": parent,
        "token_ids": list(range(block_size * len(hashes))) if token_ids is None else token_ids,
        "block_size": block_size,
        "lora_id": None,
        "medium": medium,
        "group_idx": group_idx,
    }
    if spec_kind is not None:
        event["kv_cache_spec_kind"] = spec_kind
    return event


def removed(hashes: list[int], group_idx: int | None = 0, medium: str | None = "GPU") -> dict[str, Any]:
    return {"type": "BlockRemoved", "block_hashes": hashes, "medium": medium, "group_idx": group_idx}


def cleared() -> dict[str, Any]:
    return {"type": "AllBlocksCleared"}


def payload(events: list[dict[str, Any]], ts: float = 1.0, rank: int = 0) -> bytes:
    return msgspec.msgpack.encode([ts, events, rank])


def message(seq: int, events: list[dict[str, Any]], ts: float = 1.0, rank: int = 0) -> list[bytes]:
    """A published message: [topic, seq, payload]."""
    return [b"", seq.to_bytes(8, "big"), payload(events, ts, rank)]


def sim_messages(batches: list[tuple[int, list[tuple]]]) -> list[list[bytes]]:
    """The frames of a simulated engine's batches (tests.support.vllm_engine_sim.SimEngine.run): one
    message per step, its events stored or removed, stamped 1 ms a step from 1000 s."""
    return [
        message(
            i,
            [stored(e[1], parent=e[2]) if e[0] == "stored" else removed(e[1]) for e in events],
            1000.0 + step / 1000,
        )
        for i, (step, events) in enumerate(batches)
    ]


def replayed(seq: int, events: list[dict[str, Any]], ts: float = 1.0) -> list[bytes]:
    """One reply of vLLM's replay socket, as the DEALER receives it: ["", topic, seq, payload]."""
    return [b"", b"", seq.to_bytes(8, "big"), payload(events, ts)]


def batch(events: list[dict[str, Any]], ts: float = 1.0, rank: int = 0) -> KvEventBatch:
    rejects = RejectCounter()
    decoded = decode_payload(payload(events, ts, rank), rejects)
    assert decoded is not None and not rejects
    return decoded
