"""The streaming read (TraceStream, and `analyze_batches` running it on two threads) against read_trace.

A stream must hand the analyzer exactly read_trace's requests in read_trace's order, or say it
cannot and have the whole-file path read it; either way the analysis is the same.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import kvset.formats.byte_lines as byte_lines
from kvset.formats import TraceError, read_trace
from kvset.formats.stream import NeedsWholeTrace, TraceStream
from kvset.offline import InputSummary, analyze_batches


def write(path, objs) -> str:
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs))
    return str(path)


def moon(ts, ids, length=None) -> dict:
    line = {"input_length": 512 * len(ids) if length is None else length, "output_length": 1, "hash_ids": ids}
    return line if ts is None else {"timestamp": ts, **line}


def streamed(path, **kwargs):
    stream = TraceStream(path, **kwargs)
    batches = list(stream)
    keys = np.concatenate([b.keys for b in batches])
    tokens = np.concatenate([b.tokens for b in batches])
    times = np.concatenate([b.timestamps for b in batches])
    return stream, keys, tokens, times


def assert_stream_equals_read_trace(path, **kwargs):
    trace = read_trace(path, **kwargs)
    stream, keys, tokens, times = streamed(path, **kwargs)
    assert np.array_equal(keys, trace.keys) and np.array_equal(tokens, trace.tokens)
    assert np.array_equal(times, trace.access_timestamps())
    assert (stream.requests, stream.lines, stream.block_size, stream.format) == (
        trace.requests,
        trace.lines,
        trace.block_size,
        trace.format,
    )
    assert stream.rejects.summary() == trace.rejects.summary()
    assert stream.warnings.summary() == trace.warnings.summary()
    assert stream.notes == trace.notes


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(byte_lines, "CHUNK_BYTES", 2048)


def many(n=300, jitter=0, seed=0, length=None):
    rng = np.random.default_rng(seed)
    stamps = np.cumsum(rng.integers(0, 40, n)) + (rng.integers(-jitter, jitter + 1, n) if jitter else 0)
    return [moon(int(t), rng.integers(0, 500, int(rng.integers(1, 12))).tolist(), length) for t in stamps]


def test_a_sorted_trace_streams_as_read_trace_reads_it(tmp_path, small_chunks):
    objs = many()
    objs[7] = "not json"
    objs[40] = moon(None, [1, 2])
    assert_stream_equals_read_trace(write(tmp_path / "t.jsonl", objs))


def test_requests_out_of_order_inside_the_window_are_sorted_stably(tmp_path, small_chunks):
    path = write(tmp_path / "t.jsonl", many(jitter=30))
    assert_stream_equals_read_trace(path)
    stream, *_ = streamed(path)
    assert stream.sorted_in_window


def test_requests_out_of_order_beyond_the_window_need_the_whole_trace(tmp_path, small_chunks):
    objs = many()
    objs.append(moon(0, [1]))  # the last request is the earliest
    path = write(tmp_path / "t.jsonl", objs)
    with pytest.raises(NeedsWholeTrace, match="beyond the reorder window"):
        list(TraceStream(path))
    result = analyze_batches(TraceStream(path), InputSummary(path, "", None))
    trace = read_trace(path)
    whole = analyze_batches(trace.batches(), InputSummary(path, trace.format, trace.units))
    assert result.curve.block_hits.tolist() == whole.curve.block_hits.tolist()
    assert result.accesses == whole.accesses == trace.accesses
    assert any(
        n.startswith("read whole, not as a stream: requests out of timestamp order")
        for n in result.input.notes
    )
    assert result.input.requests == trace.requests and result.input.units.block_size == 512


def test_leading_requests_without_timestamps_wait_for_the_first_one(tmp_path, small_chunks):
    objs = [moon(None, [i]) for i in range(200)] + many(100)
    assert_stream_equals_read_trace(write(tmp_path / "t.jsonl", objs))
    assert_stream_equals_read_trace(write(tmp_path / "none.jsonl", [moon(None, [i]) for i in range(50)]))


def test_a_wrong_default_block_size_is_replaced_as_read_trace_replaces_it(tmp_path, small_chunks):
    rng = np.random.default_rng(1)
    objs = []
    for t in range(400):
        n = int(rng.integers(1, 30))
        objs.append(moon(t, list(range(t, t + n)), 64 * (n - 1) + int(rng.integers(1, 65))))
    objs[3]["input_length"] = 10_000  # one request that fits no block size: a warning
    path = write(tmp_path / "t.jsonl", objs)
    assert_stream_equals_read_trace(path)
    stream, *_ = streamed(path)
    assert stream.block_size == 64 and any("inferred" in n for n in stream.notes)
    with pytest.raises(TraceError, match="give --block-size 64"):
        list(TraceStream(path, block_size=512))


def test_a_block_size_the_first_lines_keep_but_the_trace_does_not_needs_the_whole_trace(
    tmp_path, small_chunks
):
    first = [moon(t, list(range(t, t + 3)), 64 * 2 + 5) for t in range(80)]  # 64 tokens a block
    rest = [moon(80 + t, list(range(t, t + 3)), 512 * 2 + 5) for t in range(400)]  # 512
    path = write(tmp_path / "t.jsonl", first + rest)
    with pytest.raises(NeedsWholeTrace, match="block size"):
        list(TraceStream(path))
    result = analyze_batches(TraceStream(path), InputSummary(path, "", None))
    assert result.input.units.block_size == read_trace(path).block_size == 512


def test_strict_mode_and_no_valid_request_raise_as_read_trace_does(tmp_path):
    bad = write(tmp_path / "bad.jsonl", [moon(1, [1]), "oops"])
    with pytest.raises(TraceError, match="line 2"):
        list(TraceStream(bad, strict=True))
    empty = write(tmp_path / "empty.jsonl", ["nothing here"])
    with pytest.raises(TraceError, match="no valid request") as streamed_error:
        list(TraceStream(empty))
    with pytest.raises(TraceError) as read_error:
        read_trace(empty)
    assert str(streamed_error.value) == str(read_error.value)


def test_token_id_traces_stream_through_the_msgspec_path(tmp_path):
    objs = [{"timestamp": i, "token_ids": list(range(i, i + 40))} for i in range(20)]
    assert_stream_equals_read_trace(write(tmp_path / "t.jsonl", objs))


def test_the_threaded_analysis_equals_the_whole_file_analysis(tmp_path, small_chunks):
    path = write(tmp_path / "t.jsonl", many(2000, jitter=5, seed=4))
    trace = read_trace(path)
    whole = analyze_batches(trace.batches(), InputSummary(path, trace.format, trace.units))
    streamed_result = analyze_batches(TraceStream(path), InputSummary(path, "", None))
    assert streamed_result.curve.block_hits.tolist() == whole.curve.block_hits.tolist()
    assert streamed_result.curve.token_hits.tolist() == whole.curve.token_hits.tolist()
    assert streamed_result.analyzer.counts.tolist() == whole.analyzer.counts.tolist()
    assert streamed_result.input.notes[:-1] == trace.notes
    assert streamed_result.input.notes[-1].startswith("read as a stream")
