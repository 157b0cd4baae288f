"""Token-id JSONL: block keys exactly as vLLM's prefix cache hashes them (fixture test vector)."""

import io
import json

import numpy as np
import pytest

from kvset.formats import read_trace
from kvset.formats.vllm_hash import block_keys
from tests.support.paths import FIXTURES

CAPTURE = FIXTURES / "vllm_kv_events" / "vllm0330_tcp_capture.json"


def jsonl(*objs) -> io.BytesIO:
    return io.BytesIO("".join(json.dumps(o) + "\n" for o in objs).encode())


@pytest.mark.parametrize("field", ["token_ids", "prompt_token_ids"])
def test_token_ids_1000_to_1031_give_the_keys_vllm_published(field):
    expected = json.loads(CAPTURE.read_text())["prompt_a_block_hashes_external_int"]
    assert expected == [7322446309363477352, 17027874615116373601]
    trace = read_trace(jsonl({"timestamp": 4.5, field: list(range(1000, 1032))}))
    assert trace.format == "tokens"
    assert trace.block_size == 16
    assert trace.keys.tolist() == expected
    assert trace.tokens.tolist() == [16, 16]
    assert trace.request_timestamps.tolist() == [4.5]


def test_partial_tail_is_not_an_access_and_keys_chain_across_requests():
    prompt = list(range(1000, 1032))
    trace = read_trace(
        jsonl({"timestamp": 0, "token_ids": prompt + [1, 2, 3]}, {"timestamp": 1, "token_ids": prompt[:16]})
    )
    first, second = 7322446309363477352, 17027874615116373601
    assert trace.keys.tolist() == [first, second, first]  # the 3-token tail is not a full block
    assert trace.request_starts.tolist() == [0, 2]


def test_block_size_hash_algorithm_and_seed_are_passed_to_vllm_hashing():
    prompt = list(range(64))
    line = {"token_ids": prompt}
    for kwargs in ({"block_size": 32}, {"hash_algo": "sha256_cbor"}, {"python_hash_seed": "0"}):
        trace = read_trace(jsonl(line), **kwargs)
        expected = block_keys(
            prompt,
            kwargs.get("block_size", 16),
            kwargs.get("hash_algo", "sha256"),
            kwargs.get("python_hash_seed"),
        )
        assert np.array_equal(trace.keys, expected)
        assert trace.block_size == kwargs.get("block_size", 16)
    assert not np.array_equal(
        read_trace(jsonl(line), hash_algo="sha256_cbor").keys, read_trace(jsonl(line)).keys
    )


def test_missing_timestamps_keep_line_order():
    prompt = list(range(16))
    trace = read_trace(jsonl({"token_ids": prompt}, {"token_ids": [5] * 16}, {"token_ids": [6] * 16}))
    assert trace.request_timestamps.tolist() == [0.0, 0.0, 0.0]
    assert trace.request_lines.tolist() == [1, 2, 3]
    assert any("3 requests had no timestamp" in n for n in trace.notes)


def test_short_or_empty_prompts_are_counted_not_silently_dropped():
    trace = read_trace(
        jsonl(
            {"token_ids": list(range(16))},
            {"token_ids": list(range(15))},
            {"token_ids": []},
            {"timestamp": 3},
        )
    )
    assert trace.requests == 1
    reasons = {r.reason: r.examples for r in trace.rejects.summary()}
    assert reasons == {
        "prompt shorter than one block of 16 tokens (no full block to hash)": ("line 2: 15 tokens",),
        "empty token_ids": ("line 3: empty token list",),
        "missing field `token_ids`": ("line 4: no token_ids or prompt_token_ids",),
    }


def test_negative_token_id_is_rejected():
    trace = read_trace(jsonl({"token_ids": list(range(16))}, {"token_ids": [-1] + list(range(15))}))
    assert trace.requests == 1
    assert [r.reason for r in trace.rejects.summary()] == ["negative token_ids[]"]
