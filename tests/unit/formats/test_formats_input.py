"""Reading mechanics shared by every format: detection, gzip, stdin, ordering, bad input, batches."""

import gzip
import io
import json
import sys
import types

import numpy as np
import pytest

from kvset.formats import TraceError, TraceLineParser, detect_format, read_trace


def moon(ts, ids, input_length=None):
    return {
        "timestamp": ts,
        "input_length": input_length or 512 * len(ids),
        "output_length": 1,
        "hash_ids": ids,
    }


def raw(*objs) -> bytes:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs).encode()


class ReadOnly:
    """A byte stream with nothing but read(): no peek, no seek, no name (like some pipes)."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._inner.read(n)


def test_detect_format():
    assert (
        detect_format({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}) == "mooncake"
    )
    assert detect_format({"chat_id": 1, "parent_chat_id": -1, "hash_ids": [1]}) == "bailian"
    assert detect_format({"token_ids": [1, 2]}) == "tokens"
    assert detect_format({"prompt_token_ids": [1, 2]}) == "tokens"
    assert detect_format({"timestamp": 0, "input_length": 5}) is None
    assert detect_format([1, 2]) is None
    assert detect_format("hash_ids") is None


def test_detection_skips_bad_lines_and_counts_them():
    data = raw("garbage", {"hello": 1}, "[1, 2]", moon(0, [4]), moon(1, [5]))
    trace = read_trace(io.BytesIO(data))
    assert trace.format == "mooncake"
    assert trace.keys.tolist() == [4, 5]
    assert trace.request_lines.tolist() == [4, 5]
    assert "format mooncake detected from line 4" in trace.notes
    got = {r.reason: r.examples for r in trace.rejects.summary()}
    assert got["unrecognised object (no hash_ids, token_ids or prompt_token_ids)"] == (
        "line 2: no hash_ids, token_ids or prompt_token_ids",
    )
    assert got["not a JSON object"] == ("line 3: expected an object, got list",)
    assert got["not JSON"][0].startswith("line 1: not JSON")


def test_explicit_format_overrides_detection_and_says_when_it_disagrees():
    data = raw(moon(2000, [1, 2], 1000))
    as_bailian = read_trace(io.BytesIO(data), format="bailian")
    assert as_bailian.format == "bailian" and as_bailian.block_size == 16
    assert as_bailian.request_timestamps.tolist() == [2000.0]  # read as seconds, as asked
    assert "format bailian (given)" in as_bailian.notes
    assert "the first request looks like mooncake, read as bailian as requested" in as_bailian.notes
    as_moon = read_trace(io.BytesIO(data), format="mooncake")
    assert not any("looks like" in n for n in as_moon.notes)
    with pytest.raises(ValueError, match="unknown trace format"):
        read_trace(io.BytesIO(data), format="csv")


def test_gzip_by_content_from_path_and_from_streams(tmp_path):
    data = raw(moon(0, [1, 2]), moon(5, [3]))
    plain = read_trace(io.BytesIO(data))
    packed = gzip.compress(data)
    path = tmp_path / "trace.jsonl.gz"
    path.write_bytes(packed)
    misnamed = tmp_path / "trace.jsonl"  # gzip without the .gz name is still recognised
    misnamed.write_bytes(packed)
    for source in (path, str(misnamed), io.BytesIO(packed), ReadOnly(packed)):
        trace = read_trace(source)
        assert trace.keys.tolist() == plain.keys.tolist() == [1, 2, 3]
        assert trace.request_timestamps.tolist() == [0.0, 0.005]


def test_stdin_dash_reads_bytes_and_gzip(monkeypatch):
    for payload in (raw(moon(0, [7])), gzip.compress(raw(moon(0, [7])))):
        monkeypatch.setattr(
            sys, "stdin", types.SimpleNamespace(buffer=io.BufferedReader(io.BytesIO(payload)))
        )
        trace = read_trace("-")
        assert trace.keys.tolist() == [7]


def test_stream_without_peek_and_text_stream_with_buffer():
    assert read_trace(ReadOnly(raw(moon(0, [8])))).keys.tolist() == [8]
    text = io.TextIOWrapper(io.BytesIO(raw(moon(0, [9]))))
    assert read_trace(text).keys.tolist() == [9]
    with pytest.raises(TraceError, match="binary"):
        read_trace(io.StringIO(json.dumps(moon(0, [9]))))


def test_unsorted_timestamps_are_sorted_stably():
    lines = [moon(300, [30, 31]), moon(100, [10]), moon(300, [32]), moon(100, [11, 12, 13]), moon(200, [20])]
    trace = read_trace(io.BytesIO(raw(*lines)), chunk_lines=2)
    assert trace.request_timestamps.tolist() == [0.1, 0.1, 0.2, 0.3, 0.3]
    assert trace.request_lines.tolist() == [2, 4, 5, 1, 3]  # equal times keep line order
    assert trace.keys.tolist() == [10, 11, 12, 13, 20, 30, 31, 32]
    assert trace.request_starts.tolist() == [0, 1, 4, 5, 7]
    assert trace.tokens.tolist() == [512] * 8
    assert "requests were not in timestamp order; sorted by timestamp (stable)" in trace.notes


def test_missing_timestamp_takes_the_previous_requests_time():
    lines = [
        {"input_length": 512, "hash_ids": [1]},
        moon(2000, [2]),
        {"input_length": 512, "hash_ids": [3]},
        moon(1000, [4]),
    ]
    trace = read_trace(io.BytesIO(raw(*lines)))
    # line 1 takes the first known time (2 s), line 3 its predecessor's (2 s); line 4 sorts first
    assert trace.keys.tolist() == [4, 1, 2, 3]
    assert trace.request_timestamps.tolist() == [1.0, 2.0, 2.0, 2.0]
    assert any("2 requests had no timestamp" in n for n in trace.notes)


def test_malformed_lines_are_counted_with_line_numbers_and_blank_lines_skipped():
    data = raw(moon(0, [1]), "", "{not json", "   ", moon(1, [2]), '{"timestamp": 1, "hash_ids": [3]}', "\r")
    trace = read_trace(io.BytesIO(data))
    assert trace.keys.tolist() == [1, 2]
    assert trace.lines == 7
    assert trace.rejects.total == 2
    got = {r.reason: r.examples for r in trace.rejects.summary()}
    assert got["not JSON"][0].startswith("line 3: not JSON")
    assert got["missing field `input_length`"] == ("line 6: Object missing required field `input_length`",)
    assert "line 3" in trace.rejects.describe()


def test_crlf_and_byte_order_mark_are_accepted():
    data = (
        b"\xef\xbb\xbf"
        + json.dumps(moon(0, [1])).encode()
        + b"\r\n"
        + json.dumps(moon(1, [2])).encode()
        + b"\r\n"
    )
    trace = read_trace(io.BytesIO(data))
    assert trace.keys.tolist() == [1, 2] and not trace.rejects


def test_strict_mode_raises_on_the_first_bad_line():
    data = raw(moon(0, [1]), "", moon(1, [-3]), "{not json")
    with pytest.raises(TraceError, match=r"^line 3: Expected `int` >= 0"):
        read_trace(io.BytesIO(data), strict=True)
    assert read_trace(io.BytesIO(raw(moon(0, [1]), "")), strict=True).keys.tolist() == [1]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "the input is empty"),
        (b"\n\n  \n", "no line is a request"),
        (raw("nope", {"a": 1}), "1 rejected: not JSON"),
        (raw({"timestamp": 0, "input_length": 5, "hash_ids": []}), "empty hash_ids"),
    ],
)
def test_no_valid_request_is_a_trace_error(data, why):
    with pytest.raises(TraceError, match="no valid request") as info:
        read_trace(io.BytesIO(data))
    assert why in str(info.value)


def test_unreadable_path_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path / "missing.jsonl")
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path)


def test_truncated_gzip_keeps_what_was_read_and_says_where_it_ended():
    body = raw(*[moon(i, [i]) for i in range(2000)])
    packed = gzip.compress(body)
    cut = packed[: len(packed) // 2]
    trace = read_trace(io.BytesIO(cut), chunk_lines=100)
    assert 0 < trace.requests < 2000
    assert trace.keys.tolist() == list(range(trace.requests))
    (rejection,) = trace.rejects.summary()
    assert rejection.reason == "input ends early (truncated or corrupt data)"
    assert rejection.examples[0].startswith("line ")
    with pytest.raises(TraceError, match="input ends here"):
        read_trace(io.BytesIO(cut), strict=True)


def test_batches_hold_whole_requests_with_per_access_times():
    lines = [moon(1000 * i, list(range(10 * i, 10 * i + n))) for i, n in enumerate([3, 1, 4, 1, 5])]
    trace = read_trace(io.BytesIO(raw(*lines)))
    batches = list(trace.batches(max_accesses=4))
    assert [len(b) for b in batches] == [4, 4, 1, 5]  # 3+1 | 4 | 1 | 5 (longer than the limit, alone)
    assert np.array_equal(np.concatenate([b.keys for b in batches]), trace.keys)
    assert [b.request_starts.tolist() for b in batches] == [[0, 3], [0], [0], [0]]
    assert batches[0].timestamps.tolist() == [0.0, 0.0, 0.0, 1.0]
    assert np.array_equal(np.concatenate([b.timestamps for b in batches]), trace.access_timestamps())
    assert all(b.block_size == 512 and len(b.tokens) == len(b.keys) for b in batches)
    assert len(list(trace.batches())) == 1


def test_line_parser_is_incremental_and_detects_on_the_first_valid_line():
    parser = TraceLineParser(None)
    first = parser.feed_lines([b"oops\n", b"\n"], first_lineno=1)
    assert first.requests == 0 and parser.format is None
    second = parser.feed_lines(
        raw(moon(5000, [1, 2]), moon(1000, [3])).splitlines(keepends=True), first_lineno=3
    )
    assert parser.format == "mooncake" and parser.block_size == 512
    assert second.keys.tolist() == [1, 2, 3]
    assert second.request_timestamps.tolist() == [5.0, 1.0]  # line order, not sorted
    assert second.request_lines.tolist() == [3, 4]
    third = parser.feed_lines([json.dumps(moon(6000, [4], 100)).encode()], first_lineno=5)
    assert third.tokens.tolist() == [100]
    assert parser.rejects.total == 1 and parser.rejects.summary()[0].examples[0].startswith("line 1:")


def test_bad_parameters_are_value_errors():
    with pytest.raises(ValueError, match="block size"):
        TraceLineParser(None, block_size=0)
    with pytest.raises(ValueError, match="hash algorithm"):
        TraceLineParser("tokens", hash_algo="md5")


def test_timestamps_out_of_range_are_rejected_with_their_line(tmp_path):
    from kvset.formats import read_trace

    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"timestamp": 1, "input_length": 512, "hash_ids": [1]}\n'
        '{"timestamp": 1e300, "input_length": 512, "hash_ids": [2]}\n'
        '{"timestamp": 2, "input_length": 512, "hash_ids": [3]}\n'
    )
    trace = read_trace(path)
    assert trace.keys.tolist() == [1, 3]
    assert "line 2" in trace.rejects.describe() and "timestamp out of range" in trace.rejects.describe()


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"input_length": 1 << 63}, "input_length"),
        ({"block_size": 1 << 63}, "block_size"),
        ({"block_size": 16, "block_tokens": [1 << 31]}, "block_tokens"),
        ({"input_length": -1}, "input_length"),
    ],
)
def test_out_of_range_numbers_reject_their_line_and_the_rest_is_read(tmp_path, bad, field):
    path = tmp_path / "t.jsonl"
    lines = [moon(1, [1]), {**moon(2, [2]), **bad}, moon(3, [3])]
    path.write_bytes(raw(*lines))
    trace = read_trace(path)
    assert trace.keys.tolist() == [1, 3]
    assert trace.rejects.total == 1
    described = trace.rejects.describe()
    assert "line 2" in described and field in described
