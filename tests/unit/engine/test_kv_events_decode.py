"""Decoding KV-event messages: real vLLM 0.33 wire bytes, the older array layout, SGLang, bad input."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.engine.kv_event_publisher import block_tokens, event_block_size
from kvset.engine.kv_events import (
    ALL_BLOCKS_CLEARED,
    BLOCK_REMOVED,
    BLOCK_STORED,
    END_SEQ,
    KIND_NAMES,
    decode_message,
    decode_payload,
    split_replay_reply,
)
from kvset.engine.zmq_endpoints import connect_address, expand_endpoints, offset_port, pair_replay_endpoints
from kvset.rejects import RejectCounter
from tests.support import paths
from tests.support.vllm_publisher import FakeVllmPublisher

FIXTURES = paths.FIXTURES / "vllm_kv_events"
CAPTURE = json.loads((FIXTURES / "vllm0330_tcp_capture.json").read_text())
U64 = (1 << 64) - 1


def read_hex_frames(path: Path) -> list[bytes]:
    # One frame per line; the empty topic frame is an empty line.
    return [bytes.fromhex(line) for line in path.read_text().split("\n")[:3]]


def encode(obj: object) -> bytes:
    return msgspec.msgpack.encode(obj)


@pytest.mark.parametrize("index", range(4))
def test_real_vllm_wire_bytes_decode_like_the_capture(index: int) -> None:
    frames = read_hex_frames(FIXTURES / f"vllm0330_tcp_live_batch{index}.hex")
    expected = CAPTURE["live"][index]
    assert [f.hex() for f in frames] == expected["frames_hex"]
    rejects = RejectCounter()
    seq, batch = decode_message(frames, rejects)
    assert not rejects
    assert seq == expected["seq"]
    ts, events, rank = expected["payload_generic_msgpack"]
    assert batch is not None
    assert batch.ts == ts and batch.rank == rank and batch.layout == "map"
    assert [KIND_NAMES[int(k)] for k in batch.kinds] == [e["type"] for e in events]
    for i, event in enumerate(events):
        assert batch.event_keys(i).tolist() == event.get("block_hashes", [])
        if event["type"] == "BlockStored":
            assert batch.block_sizes[i] == event["block_size"]
            assert batch.token_counts[i] == len(event["token_ids"])
            assert batch.group_idx[i] == event["group_idx"]
            assert batch.media[i] == event["medium"]
            parent = event["parent_block_hash"]
            assert bool(batch.has_parent[i]) == (parent is not None)
            if parent is not None:
                assert int(batch.parents[i]) == parent


def test_first_stored_blocks_are_the_hashes_of_the_captured_prompt() -> None:
    frames = read_hex_frames(FIXTURES / "vllm0330_tcp_live_batch0.hex")
    _, batch = decode_message(frames, RejectCounter())
    assert batch is not None
    assert batch.event_keys(0).tolist() == CAPTURE["prompt_a_block_hashes_external_int"]
    # batch1's single block chains on batch0's first block.
    _, batch1 = decode_message(read_hex_frames(FIXTURES / "vllm0330_tcp_live_batch1.hex"), RejectCounter())
    assert batch1 is not None and int(batch1.parents[0]) == CAPTURE["prompt_a_block_hashes_external_int"][0]


def test_fake_publisher_encodes_the_fixture_batches_byte_for_byte() -> None:
    with FakeVllmPublisher() as fake:
        for message in CAPTURE["live"]:
            ts, events, _rank = message["payload_generic_msgpack"]
            built = []
            for e in events:
                if e["type"] == "BlockStored":
                    built.append(
                        fake.stored(
                            e["block_hashes"],
                            e["token_ids"],
                            e["block_size"],
                            e["parent_block_hash"],
                            e["medium"],
                            e["group_idx"],
                        )
                    )
                elif e["type"] == "BlockRemoved":
                    built.append(fake.removed(e["block_hashes"], e["medium"], e["group_idx"]))
                else:
                    built.append(fake.cleared())
            assert fake.encode_batch(built, ts).hex() == message["frames_hex"][2]


def test_replay_reply_frames_of_the_capture() -> None:
    replies = [[bytes.fromhex(f) for f in frames] for frames in CAPTURE["replay_from_seq1_frames_hex"]]
    seqs = []
    for frames in replies:
        seq_frame, payload = split_replay_reply(frames)
        if seq_frame == END_SEQ:
            assert payload == b""
            break
        seqs.append(int.from_bytes(seq_frame, "big"))
        assert payload.hex() == CAPTURE["live"][seqs[-1]]["frames_hex"][2]
    assert seqs == [1, 2, 3]
    assert split_replay_reply([b"", (7).to_bytes(8, "big"), b"x"]) == ((7).to_bytes(8, "big"), b"x")
    with pytest.raises(ValueError):
        split_replay_reply([b"x", b"", b"", b""])


def test_old_tagged_array_layout() -> None:
    # vLLM <= 0.23: [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
    payload = encode(
        [
            5.5,
            [
                ["BlockStored", [11, U64], None, list(range(32)), 16, None, "GPU"],
                ["BlockStored", [12], 11, list(range(16)), 16, None],  # before `medium` existed
                ["BlockRemoved", [11], "GPU"],
                ["BlockRemoved", [12]],
                ["AllBlocksCleared"],
            ],
            3,
        ]
    )
    rejects = RejectCounter()
    batch = decode_payload(payload, rejects)
    assert not rejects and batch is not None
    assert batch.layout == "array" and batch.rank == 3 and batch.ts == 5.5
    assert batch.kinds.tolist() == [
        BLOCK_STORED,
        BLOCK_STORED,
        BLOCK_REMOVED,
        BLOCK_REMOVED,
        ALL_BLOCKS_CLEARED,
    ]
    assert batch.event_keys(0).tolist() == [11, U64]
    assert batch.media == ("GPU", None, "GPU", None, None)
    assert batch.has_parent.tolist() == [False, True, False, False, False]
    assert batch.block_sizes.tolist()[:2] == [16, 16]
    assert batch.token_counts.tolist()[:2] == [32, 16]
    assert batch.group_idx.tolist() == [-1] * 5


def test_payload_without_rank_and_map_payload() -> None:
    # The first vLLM releases sent [ts, events]; a map-shaped batch is accepted too.
    a = decode_payload(encode([1.0, [["BlockStored", [1], None, [], 16, None]]]), RejectCounter())
    assert a is not None and a.rank is None and a.event_keys(0).tolist() == [1]
    b = decode_payload(
        encode({"ts": 2, "events": [{"type": "BlockRemoved", "block_hashes": [9]}], "data_parallel_rank": 1}),
        RejectCounter(),
    )
    assert b is not None and b.rank == 1 and b.ts == 2.0 and b.kinds.tolist() == [BLOCK_REMOVED]


def test_sglang_signed_hashes_map_to_the_same_keys_as_unsigned() -> None:
    unsigned = [0, 1, (1 << 63) - 1, 1 << 63, U64, 7322446309363477352, 17027874615116373601]
    signed = [h - (1 << 64) if h >= 1 << 63 else h for h in unsigned]
    assert min(signed) < 0
    sg = decode_payload(encode([1.0, [["BlockStored", signed, signed[0], [], 1, None]], 0]), RejectCounter())
    vl = decode_payload(
        encode([1.0, [["BlockStored", unsigned, unsigned[0], [], 1, None]], 0]), RejectCounter()
    )
    assert sg is not None and vl is not None
    assert sg.keys.dtype == np.uint64
    assert sg.keys.tolist() == unsigned == vl.keys.tolist()
    # A mixed list (an unsigned value above 2**63 next to a negative one) also maps consistently.
    mixed = decode_payload(encode([1.0, [["BlockRemoved", [U64, -1, 5]]]]), RejectCounter())
    assert mixed is not None and mixed.keys.tolist() == [U64, U64, 5]


def test_raw_digests_fold_like_vllm() -> None:
    digests = [bytes.fromhex(h) for h in CAPTURE["prompt_a_block_hashes_full_hex"]]
    batch = decode_payload(
        encode(
            [
                1.0,
                [
                    {
                        "type": "BlockStored",
                        "block_hashes": digests,
                        "parent_block_hash": digests[0],
                        "token_ids": list(range(32)),
                        "block_size": 16,
                    }
                ],
            ]
        ),
        RejectCounter(),
    )
    assert batch is not None
    assert batch.keys.tolist() == CAPTURE["prompt_a_block_hashes_external_int"]
    assert int(batch.parents[0]) == CAPTURE["prompt_a_block_hashes_external_int"][0]
    # Digests of unequal length take the one-at-a-time path and fold the same way.
    odd = [hashlib.sha256(b"a").digest(), hashlib.sha256(b"b").digest() + b"\x00\x00\x00\x01"]
    b2 = decode_payload(encode([1.0, [["BlockRemoved", odd]]]), RejectCounter())
    assert b2 is not None and b2.keys.tolist() == [int.from_bytes(d[-8:], "big") for d in odd]


def test_unknown_fields_ignored_and_optional_fields_missing() -> None:
    event = {
        "type": "BlockStored",
        "block_hashes": [5, 6],
        "token_ids": list(range(20)),
        "block_size": 16,
        "medium": "GPU",
        "kv_cache_spec_kind": "full_attention",
        "some_future_field": {"nested": [1, 2]},
    }  # no parent_block_hash, lora_id, lora_name, group_idx
    rejects = RejectCounter()
    batch = decode_payload(
        encode([1.0, [event, {"type": "AllBlocksCleared", "extra": 1}], 0, "extra"]), rejects
    )
    assert not rejects and batch is not None
    assert batch.event_keys(0).tolist() == [5, 6]
    assert not batch.has_parent[0] and batch.group_idx[0] == -1 and batch.token_counts[0] == 20
    assert batch.kinds.tolist() == [BLOCK_STORED, ALL_BLOCKS_CLEARED]


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\xc1\x00", "payload: not msgpack"),
        (b"garbage that is not msgpack at all", "payload: not msgpack"),
        (
            encode([1.0, [{"type": "BlockRemoved", "block_hashes": [1, 2, 3]}], 0])[:-6],
            "payload: truncated msgpack",
        ),
        (encode("a string"), "payload: not [ts, events, rank]"),
        (encode([1.0]), "payload: not [ts, events, rank]"),
        (encode(["soon", [], 0]), "payload: ts is not a number"),
        (encode([float("nan"), [], 0]), "payload: ts is not a number"),
        (encode([1.0, {"a": 1}, 0]), "payload: events is not a list"),
        (encode([1.0, [], -2]), "payload: rank is not an integer in 0..2147483647"),
        (encode({"events": []}), "payload: map without ts and events"),
    ],
)
def test_bad_payloads_are_counted_rejections(payload: bytes, reason: str) -> None:
    rejects = RejectCounter()
    assert decode_payload(payload, rejects, "tcp://x") is None
    assert [(r.reason, r.count) for r in rejects.summary()] == [(reason, 1)]
    assert rejects.summary()[0].examples[0].startswith("tcp://x: ")


def test_bad_events_are_rejected_one_by_one_and_the_rest_kept() -> None:
    events = [
        {"type": "BlockStored", "block_hashes": [1], "block_size": 16},
        {"type": "BlockUpdated", "block_hashes": [2]},
        {"type": "BlockStored", "block_hashes": "notalist"},
        {"type": "BlockStored", "block_hashes": [1.5]},
        {"type": "BlockStored", "block_hashes": [True]},
        {"type": "BlockStored", "block_hashes": [b""]},
        {"type": "BlockStored", "block_hashes": [3], "block_size": 0},
        {"type": "BlockStored", "block_hashes": [3], "token_ids": 7},
        {"type": "BlockStored", "block_hashes": [3], "medium": 1},
        {"type": "BlockRemoved", "block_hashes": [3], "group_idx": "x"},
        {"type": "BlockStored"},
        {"no_type": 1},
        42,
        [],
        ["BlockStored", [4], None, [], 16, None, "CPU"],
    ]
    rejects = RejectCounter()
    batch = decode_payload(encode([1.0, events, 0]), rejects)
    assert batch is not None
    assert batch.keys.tolist() == [1, 4]
    assert batch.media == (None, "CPU")
    assert rejects.total == len(events) - 2
    reasons = {r.reason: r.count for r in rejects.summary()}
    assert reasons["event: unknown type"] == 1
    assert reasons["event: block hash is neither an integer nor bytes"] == 2  # the float and the bool
    assert reasons["event: event is neither a map with 'type' nor a tagged array"] == 2  # 42 and []
    assert reasons["event: event map without a 'type' string"] == 1


def test_message_frames_are_checked() -> None:
    rejects = RejectCounter()
    assert decode_message([b"", (1).to_bytes(8, "big")], rejects) == (None, None)
    assert decode_message([b"", b"\x01", encode([1.0, [], 0])], rejects) == (None, None)
    seq, batch = decode_message([b"", (9).to_bytes(8, "big"), b"\xc1"], rejects)
    assert seq == 9 and batch is None  # the number is readable even when the payload is not
    assert {r.reason for r in rejects.summary()} == {
        "message: not 3 frames (topic, seq, payload)",
        "message: sequence frame is not 8 bytes",
        "payload: not msgpack",
    }


def test_endpoint_helpers() -> None:
    assert expand_endpoints("tcp://10.0.0.1:5557-5560") == [f"tcp://10.0.0.1:{p}" for p in range(5557, 5561)]
    assert expand_endpoints("tcp://h:5557") == ["tcp://h:5557"]
    assert expand_endpoints("ipc:///tmp/kv") == ["ipc:///tmp/kv"]
    with pytest.raises(ValueError):
        expand_endpoints("tcp://h:5560-5557")
    with pytest.raises(ValueError):
        expand_endpoints("tcp://h:1-60000")
    assert offset_port("tcp://h:5558", 2) == "tcp://h:5560"
    assert connect_address("tcp://*:5557") == "tcp://127.0.0.1:5557"
    assert connect_address("gpu-node-3:5557") == "tcp://gpu-node-3:5557"
    assert connect_address("ipc:///tmp/kv") == "ipc:///tmp/kv"
    for bad in ("tcp://h", "tcp://h:0", "tcp://h:70000", "udp://h:1", "tcp://:5557"):
        with pytest.raises(ValueError):
            connect_address(bad)
    eps = ["tcp://h:5557", "tcp://h:5558"]
    assert pair_replay_endpoints(eps, None) == [None, None]
    assert pair_replay_endpoints(eps, ["tcp://h:6000"]) == ["tcp://h:6000", "tcp://h:6001"]
    assert pair_replay_endpoints(eps, ["tcp://h:6000-6001"]) == ["tcp://h:6000", "tcp://h:6001"]
    with pytest.raises(ValueError):
        pair_replay_endpoints(eps + ["tcp://h:5559"], ["tcp://a:1", "tcp://a:2"])


def test_tokens_per_block() -> None:
    assert block_tokens(2, 16, 32).tolist() == [16, 16]
    assert block_tokens(2, 16, 20).tolist() == [16, 4]  # a shorter last block
    assert block_tokens(3, 16, -1).tolist() == [16, 16, 16]  # no token_ids
    assert block_tokens(4, 1, 4).tolist() == [1, 1, 1, 1]  # SGLang page size 1
    assert event_block_size(2, 16, 20) == 16  # the event's own block_size
    assert event_block_size(2, 0, 64) == 32  # no block_size: from token_ids
    assert event_block_size(2, 0, -1) is None  # neither: the event does not say


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1),
    st.sampled_from([1 << 20, (1 << 20) + 1, (1 << 31) - 1, 1 << 31, 1 << 63, (1 << 64) - 1]),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.binary(max_size=40),
    st.sampled_from(["BlockStored", "BlockRemoved", "AllBlocksCleared", "type", "block_hashes", "GPU"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "block_hashes",
                    "token_ids",
                    "block_size",
                    "medium",
                    "group_idx",
                    "parent_block_hash",
                    "kv_cache_spec_kind",
                    "data_parallel_rank",
                    "ts",
                    "events",
                    "x",
                ]
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(obj=_values)
def test_any_msgpack_structure_is_decoded_or_rejected_never_raised(obj: object) -> None:
    rejects = RejectCounter()
    batch = decode_payload(encode(obj), rejects)
    if batch is None:
        assert rejects.total == 1
    else:
        assert batch.keys.dtype == np.uint64 and len(batch.key_offsets) == len(batch) + 1


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_any_bytes_are_decoded_or_rejected_never_raised(data: bytes) -> None:
    rejects = RejectCounter()
    seq, batch = decode_message([b"", (5).to_bytes(8, "big"), data], rejects)
    assert seq == 5
    assert batch is not None or rejects.total == 1


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({"type": "BlockStored", "block_hashes": [3], "block_size": 1 << 63}, "event: block_size"),
        ({"type": "BlockStored", "block_hashes": [3], "block_size": (1 << 20) + 1}, "event: block_size"),
        ({"type": "BlockStored", "block_hashes": [3], "group_idx": 1 << 63}, "event: group_idx"),
        ({"type": "BlockStored", "block_hashes": [3], "group_idx": 1 << 31}, "event: group_idx"),
        ({"type": "BlockRemoved", "block_hashes": [3], "group_idx": U64}, "event: group_idx"),
        ({"type": "BlockRemoved", "block_hashes": [3], "group_idx": -1}, "event: group_idx"),
    ],
)
def test_integers_beyond_their_range_reject_the_event_not_the_batch(event: dict, reason: str) -> None:
    rejects = RejectCounter()
    good = {"type": "BlockStored", "block_hashes": [7], "block_size": 1 << 20, "group_idx": (1 << 31) - 1}
    batch = decode_payload(encode([1.0, [event, good], 0]), rejects)
    assert batch is not None
    assert batch.keys.tolist() == [7]
    assert batch.block_sizes.tolist() == [1 << 20] and batch.group_idx.tolist() == [(1 << 31) - 1]
    [rejection] = rejects.summary()
    assert rejection.reason.startswith(reason) and rejection.count == 1


def test_rank_beyond_its_range_rejects_the_payload() -> None:
    rejects = RejectCounter()
    assert decode_payload(encode([1.0, [], U64]), rejects) is None
    assert [r.reason for r in rejects.summary()] == ["payload: rank is not an integer in 0..2147483647"]


@pytest.mark.parametrize("depth", [200, 3000, 100_000])
def test_deeply_nested_payload_is_a_counted_rejection(depth: int) -> None:
    # A batch [ts, events, rank] whose events list holds one event nested `depth` arrays deep.
    payload = b"\x93" + encode(1.0) + b"\x91" + b"\x91" * depth + b"\x90" + encode(0)
    rejects = RejectCounter()
    batch = decode_payload(payload, rejects, "tcp://x")
    assert batch is None or len(batch) == 0
    assert rejects.total == 1
    if depth >= 3000:
        assert [r.reason for r in rejects.summary()] == ["payload: undecodable (RecursionError)"]


def test_token_ids_cannot_make_a_block_larger_than_a_block_can_be() -> None:
    # Without block_size the tokens per block come from token_ids: one block of 2**21 tokens is not believed.
    assert event_block_size(1, 0, 1 << 21) is None
    assert event_block_size(2, 0, (1 << 21) + 2) is None
    assert event_block_size(1, 0, 1 << 20) == 1 << 20


def test_spec_kind_is_decoded() -> None:
    events = [
        {"type": "BlockStored", "block_hashes": [1], "group_idx": 1, "kv_cache_spec_kind": "sliding_window"},
        {"type": "BlockStored", "block_hashes": [2], "kv_cache_spec_kind": 5},  # not a string: unknown
        {"type": "BlockRemoved", "block_hashes": [1], "group_idx": 1},
        ["BlockStored", [4], None, [], 16, None, "GPU"],
    ]
    rejects = RejectCounter()
    batch = decode_payload(encode([1.0, events, 0]), rejects)
    assert batch is not None and not rejects
    assert batch.spec_kinds == ("sliding_window", None, None, None)
