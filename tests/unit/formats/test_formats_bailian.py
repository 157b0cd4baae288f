"""Alibaba Bailian trace JSONL (qwen-bailian-usagetraces-anon): 16 tokens per block, timestamps in seconds."""

import io
import json

import pytest

from kvset.formats import read_trace


def jsonl(*objs) -> io.BytesIO:
    return io.BytesIO("".join(json.dumps(o) + "\n" for o in objs).encode())


def bailian(chat_id, parent, ts, input_length, hash_ids, turn=1):
    return {
        "chat_id": chat_id,
        "parent_chat_id": parent,
        "timestamp": ts,
        "input_length": input_length,
        "output_length": 20,
        "type": "text",
        "turn": turn,
        "hash_ids": hash_ids,
    }


def test_hand_written_bailian_is_detected_with_16_tokens_per_block():
    trace = read_trace(
        jsonl(
            bailian(159, -1, 61.114, 40, [1089, 1090, 1091]),
            bailian(160, 159, 62.5, 48, [1089, 1090, 6326], turn=2),
        )
    )
    assert trace.format == "bailian"
    assert trace.block_size == 16
    assert trace.keys.tolist() == [1089, 1090, 1091, 1089, 1090, 6326]
    assert trace.tokens.tolist() == [16, 16, 8, 16, 16, 16]  # 40 = 16 + 16 + 8
    assert trace.request_starts.tolist() == [0, 3]
    assert trace.request_timestamps.tolist() == [61.114, 62.5]  # already seconds
    assert any("format bailian detected from line 1" in n for n in trace.notes)


def test_bailian_hash_count_is_checked_against_16_token_blocks():
    trace = read_trace(jsonl(bailian(1, -1, 0.0, 33, [7, 8])))  # 33 tokens need 3 blocks
    assert trace.keys.tolist() == [7, 8]
    assert trace.tokens.tolist() == [16, 16]
    (warning,) = trace.warnings.summary()
    assert "ceil(input_length / 16)" in warning.reason
    assert warning.examples == ("line 1: 2 hash_ids for input_length 33",)


def test_bailian_line_without_hash_ids_is_rejected():
    good = bailian(1, -1, 0.0, 16, [7])
    bad = {k: v for k, v in good.items() if k != "hash_ids"}
    trace = read_trace(jsonl(good, bad), format="bailian")
    assert trace.requests == 1
    (rejection,) = trace.rejects.summary()
    assert rejection.reason == "missing field `hash_ids`"
    assert rejection.examples == ("line 2: Object missing required field `hash_ids`",)


@pytest.mark.parametrize("marker", ["chat_id", "parent_chat_id", "turn"])
def test_any_conversation_field_marks_bailian(marker):
    line = {"timestamp": 3, "input_length": 16, "hash_ids": [1], marker: 1}
    assert read_trace(jsonl(line)).format == "bailian"
