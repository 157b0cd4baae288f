"""Mooncake trace JSONL: the real FAST'25 sample and hand-written lines with known keys and tokens."""

import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvset.formats import TraceError, read_trace
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "traces" / "mooncake_fast25_synthetic_trace.jsonl"


def jsonl(*objs) -> io.BytesIO:
    return io.BytesIO("".join(json.dumps(o) + "\n" for o in objs).encode())


def test_real_mooncake_sample_counts():
    trace = read_trace(FIXTURE)
    assert trace.format == "mooncake"
    assert trace.block_size == 512
    assert trace.requests == 3993
    assert trace.accesses == 121877
    assert len(np.unique(trace.keys)) == 43924
    assert trace.lines == 3993
    assert not trace.rejects and not trace.warnings
    assert trace.keys.dtype == np.uint64 and trace.tokens.dtype == np.int32
    assert trace.request_starts.dtype == np.int64 and trace.request_timestamps.dtype == np.float64


def test_real_mooncake_sample_matches_a_plain_json_reading():
    # An independent reading with the standard library: keys in file order (the file is sorted),
    # token totals = input_length per request, timestamps in seconds.
    records = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    trace = read_trace(FIXTURE)
    assert trace.keys.tolist() == [h for r in records for h in r["hash_ids"]]
    starts = np.append(trace.request_starts, trace.accesses)
    per_request_tokens = np.add.reduceat(trace.tokens.astype(np.int64), trace.request_starts)
    assert per_request_tokens.tolist() == [r["input_length"] for r in records]
    assert np.diff(starts).tolist() == [len(r["hash_ids"]) for r in records]
    assert trace.request_timestamps.tolist() == [r["timestamp"] / 1000 for r in records]


def test_hand_written_mooncake_keys_tokens_and_seconds():
    trace = read_trace(
        jsonl(
            {"timestamp": 1500, "input_length": 1100, "output_length": 7, "hash_ids": [5, 6, 7]},
            {"timestamp": 2000, "input_length": 512, "output_length": 1, "hash_ids": [5]},
            {"timestamp": 2250, "input_length": 1, "output_length": 1, "hash_ids": [2**64 - 1]},
        )
    )
    assert trace.format == "mooncake"
    assert trace.keys.tolist() == [5, 6, 7, 5, 2**64 - 1]
    assert trace.tokens.tolist() == [512, 512, 76, 512, 1]  # 1100 - 2 * 512 = 76
    assert trace.request_starts.tolist() == [0, 3, 4]
    assert trace.request_timestamps.tolist() == [1.5, 2.0, 2.25]
    assert trace.access_timestamps().tolist() == [1.5, 1.5, 1.5, 2.0, 2.25]


def test_block_size_override_changes_tokens_per_block():
    trace = read_trace(
        jsonl({"timestamp": 0, "input_length": 100, "output_length": 1, "hash_ids": [1, 2]}), block_size=64
    )
    assert trace.block_size == 64
    assert trace.tokens.tolist() == [64, 36]


def test_hash_count_mismatch_is_a_visible_warning_and_the_request_is_kept():
    data = jsonl(
        {"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]},  # needs 2
        {"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [2, 3, 4]},  # needs 1
    )
    trace = read_trace(data)
    assert trace.requests == 2 and trace.keys.tolist() == [1, 2, 3, 4]
    # tokens never exceed input_length nor n * 512: the spare hash ids cover no token
    assert trace.tokens.tolist() == [512, 10, 0, 0]
    (warning,) = trace.warnings.summary()
    assert warning.count == 2
    assert warning.examples == (
        "line 1: 1 hash_ids for input_length 600",
        "line 2: 3 hash_ids for input_length 10",
    )
    assert any("request kept" in note and "line 1" in note for note in trace.notes)
    assert not trace.rejects
    data.seek(0)
    with pytest.raises(TraceError, match="line 1: 1 hash_ids for input_length 600"):
        read_trace(data, strict=True)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ({"timestamp": 0, "input_length": 5, "hash_ids": [1, -2]}, "negative hash_ids[]"),
        ({"timestamp": 0, "input_length": 5, "hash_ids": [1, 2.5]}, "wrong type (hash_ids[])"),
        ({"timestamp": 0, "input_length": 5, "hash_ids": ["a"]}, "wrong type (hash_ids[])"),
        ({"timestamp": 0, "input_length": 5, "hash_ids": [True]}, "wrong type (hash_ids[])"),
        ({"timestamp": 0, "input_length": 5, "hash_ids": [2**64]}, "hash id above 2^64-1"),
        ({"timestamp": 0, "input_length": 5, "hash_ids": []}, "empty hash_ids"),
        ({"timestamp": 0, "input_length": 5, "hash_ids": None}, "wrong type (hash_ids)"),
        ({"timestamp": 0, "hash_ids": [1]}, "missing field `input_length`"),
        ({"timestamp": "noon", "input_length": 5, "hash_ids": [1]}, "wrong type (timestamp)"),
        ({"timestamp": 0, "input_length": -5, "hash_ids": [1]}, "negative input_length"),
    ],
)
def test_bad_hash_ids_are_rejected_with_a_reason_and_the_rest_is_kept(line, reason):
    good = {"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [9]}
    trace = read_trace(jsonl(good, line, good), format="mooncake")
    assert trace.keys.tolist() == [9, 9]
    assert trace.request_lines.tolist() == [1, 3]
    (rejection,) = trace.rejects.summary()
    assert (rejection.reason, rejection.count) == (reason, 1)
    assert rejection.examples[0].startswith("line 2: ")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**9),  # timestamp, ms
            st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=40),
            st.integers(1, 512),  # tokens in the last block
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 7),
)
def test_random_mooncake_file_round_trips_its_hash_ids(requests, chunk_lines):
    lines = [
        {"timestamp": ts, "input_length": 512 * (len(ids) - 1) + last, "output_length": 3, "hash_ids": ids}
        for ts, ids, last in requests
    ]
    trace = read_trace(jsonl(*lines), chunk_lines=chunk_lines)
    assert not trace.rejects and not trace.warnings
    order = sorted(range(len(lines)), key=lambda i: lines[i]["timestamp"])  # Python's sort is stable
    assert trace.keys.tolist() == [h for i in order for h in lines[i]["hash_ids"]]
    assert trace.request_timestamps.tolist() == [lines[i]["timestamp"] / 1000 for i in order]
    assert (trace.request_lines - 1).tolist() == order
    sums = np.add.reduceat(trace.tokens.astype(np.int64), trace.request_starts)
    assert sums.tolist() == [lines[i]["input_length"] for i in order]


def _trace_with_block_size(tmp_path, block: int, n: int = 200, seed: int = 3):
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        length = int(rng.integers(block + 1, 40 * block))
        ids = [int(x) for x in rng.integers(0, 500, size=-(-length // block))]
        lines.append({"timestamp": i, "input_length": length, "output_length": 1, "hash_ids": ids})
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path, lines


def test_a_trace_made_with_another_block_size_is_read_with_the_one_its_lines_keep(tmp_path):
    path, lines = _trace_with_block_size(tmp_path, 64)
    trace = read_trace(path)
    assert trace.block_size == 64
    assert trace.warnings.total == 0
    per_request = np.add.reduceat(trace.tokens.astype(np.int64), trace.request_starts)
    assert per_request.tolist() == [x["input_length"] for x in lines]
    assert any("block size inferred" in note and "64" in note for note in trace.notes)
    given = read_trace(path, block_size=64)
    assert given.tokens.tolist() == trace.tokens.tolist()


def test_a_given_block_size_the_lines_break_is_refused_with_the_fix(tmp_path):
    path, _ = _trace_with_block_size(tmp_path, 64)
    with pytest.raises(TraceError, match="give --block-size 64"):
        read_trace(path, block_size=512)


def test_lines_that_fit_no_block_size_are_refused_with_the_fix(tmp_path):
    rng = np.random.default_rng(5)
    lines = [
        {"timestamp": i, "input_length": int(rng.integers(1, 100_000)), "hash_ids": [1, 2, 3]}
        for i in range(100)
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(TraceError, match="no block size fits this trace.*give --block-size N"):
        read_trace(path)
