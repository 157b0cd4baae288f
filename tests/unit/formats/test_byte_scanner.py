"""The byte scanner against the msgspec line path: the same input must give the same trace.

Each input is read twice, with read_trace(byte_scanner=True) and with byte_scanner=False (every
line through msgspec, the reader as it was), and every field is compared: keys, tokens, request
starts, timestamps, line numbers, rejections (reasons, counts, examples), warnings and notes.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvset.formats import TraceError, read_trace
from kvset.formats.byte_input import INPUT_ENDS_EARLY
from kvset.formats.byte_lines import feed_bytes
from kvset.formats.trace_lines import TraceLineParser
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "traces" / "mooncake_fast25_synthetic_trace.jsonl"


def both(data: bytes, **kwargs):
    """(scanner's outcome, msgspec path's outcome): a Trace or the TraceError's text."""
    out = []
    for scanner in (True, False):
        try:
            out.append(read_trace(io.BytesIO(data), byte_scanner=scanner, **kwargs))
        except TraceError as e:
            out.append(str(e))
    return out


def assert_same(data: bytes, **kwargs) -> None:
    scanned, reference = both(data, **kwargs)
    if isinstance(reference, str) or isinstance(scanned, str):
        assert scanned == reference
        return
    for name in ("keys", "tokens", "request_starts", "request_timestamps", "request_lines"):
        a, b = getattr(scanned, name), getattr(reference, name)
        assert a.dtype == b.dtype, name
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name
    assert (scanned.format, scanned.block_size, scanned.lines) == (
        reference.format,
        reference.block_size,
        reference.lines,
    )
    # reasons, counts, examples; among reasons of equal count the order is not kept (the msgspec
    # path counted ids above 2^64-1 after the other reasons of its chunk)
    assert sorted(map(tuple, map(vars, scanned.rejects.summary()))) == sorted(
        map(tuple, map(vars, reference.rejects.summary()))
    )
    assert sorted(map(tuple, map(vars, scanned.warnings.summary()))) == sorted(
        map(tuple, map(vars, reference.warnings.summary()))
    )
    assert scanned.notes == reference.notes


def moon(ts, ids, length=None, **extra) -> dict:
    return {
        "timestamp": ts,
        "input_length": 512 * len(ids) if length is None else length,
        "output_length": 3,
        "hash_ids": ids,
        **extra,
    }


def lines(*objs, sep=(", ", ": ")) -> bytes:
    return "".join((o if isinstance(o, str) else json.dumps(o, separators=sep)) + "\n" for o in objs).encode()


def test_the_real_mooncake_sample_is_read_the_same():
    assert_same(FIXTURE.read_bytes())


def test_the_scanner_really_reads_the_common_lines():
    # no line of the sample goes to msgspec: feed_bytes calls feed_lines only for the first line
    parser = TraceLineParser(None)
    calls = []
    original = parser.feed_lines
    parser.feed_lines = lambda chunk, first: calls.append(len(chunk)) or original(chunk, first)
    parsed, lines_read = feed_bytes(parser, FIXTURE.read_bytes(), 1)
    assert calls == [1] and parsed.requests == 3993 and lines_read == 3993


ODD_LINES = [
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1], "extra": 1}',  # unknown field
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1]}   ',  # trailing spaces
    '{"timestamp":\t1, "input_length": 512, "hash_ids": [1]}',  # a tab
    '  {"timestamp": 1,"input_length":512,"hash_ids":[1 , 2]}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": []}',  # empty ids
    '{"timestamp": 1, "input_length": 512, "hash_ids": [18446744073709551615]}',  # 2^64 - 1
    '{"timestamp": 1, "input_length": 512, "hash_ids": [18446744073709551616]}',  # 2^64
    '{"timestamp": 1, "input_length": 512, "hash_ids": [99999999999999999999999]}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [7, 18446744073709551619]}',  # 20 digits, above
    '{"timestamp": 1, "input_length": 512, "hash_ids": [28446744073709551615, 7]}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [9999999999999999999, 10000000000000000000]}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1 ,2,  3 , 4  ]}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1,,2]}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [0, 00]}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [-1]}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [01]}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1.0]}',
    '{"timestamp": 1, "input_length": 2147483647, "hash_ids": [1]}',
    '{"timestamp": 1, "input_length": 2147483648, "hash_ids": [1]}',
    '{"timestamp": 1, "input_length": -5, "hash_ids": [1]}',
    '{"timestamp": 1, "input_length": 5.0, "hash_ids": [1]}',
    '{"timestamp": 1e300, "input_length": 512, "hash_ids": [1]}',
    '{"timestamp": 1e14, "input_length": 512, "hash_ids": [1]}',
    '{"timestamp": 100000000000001, "input_length": 512, "hash_ids": [1]}',
    '{"timestamp": -3.25e2, "input_length": 512, "hash_ids": [1]}',
    '{"timestamp": 0.1, "input_length": 512, "hash_ids": [1]}',
    '{"timestamp": 123456789.123456789, "input_length": 512, "hash_ids": [1]}',
    '{"timestamp": "27", "input_length": 512, "hash_ids": [1]}',  # RAGPulse's string timestamps
    '{"timestamp": null, "input_length": 512, "hash_ids": [1]}',
    '{"timestamp": true, "input_length": 512, "hash_ids": [1]}',
    '{"input_length": 512, "hash_ids": [1]}',  # no timestamp
    '{"timestamp": 1, "hash_ids": [1]}',  # no input_length
    '{"timestamp": 1, "input_length": 512}',
    '{"timestamp": 1, "input_length": 512, "input_length": 1024, "hash_ids": [1, 2]}',  # duplicate
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1]} {"timestamp": 2}',  # two objects
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1]',  # cut short
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1],}',
    '{"timestamp": 1, "input_length": 512, "hash_\\u0069ds": [1]}',  # escaped name
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1], "session_id": "a\\"b"}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1], "session_id": "caf\u00e9"}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": [1], "session_id": "1758081660427-xa8rbsd2uco1"}',
    '{"timestamp": 1, "input_length": 512, "hash_ids": {"sys_prompt": [1], "history": [2]}}',  # RAGPulse nested
    '{"timestamp": 1, "input_length": 512, "output_length": 1e999, "hash_ids": [1]}',
    '{"timestamp": 1, "input_length": 512, "output_length": 12345678901234567890123, "hash_ids": [1]}',
    '{"timestamp": 1, "input_length": 600, "hash_ids": [1]}',  # count mismatch: a warning
    "[1, 2, 3]",
    "not json",
    "",
    "   ",
    "\r",
    "null",
]


@pytest.mark.parametrize("odd", ODD_LINES)
def test_an_odd_line_among_good_ones_is_read_as_msgspec_reads_it(odd):
    good = [moon(1000 * i, [i, i + 1]) for i in range(5)]
    assert_same(lines(good[0], good[1], odd, good[2], odd, odd, good[3], good[4]))
    assert_same(lines(odd, good[0], good[1]))  # also before the format is known
    assert_same(lines(good[0], odd, good[1]), format="mooncake")
    assert_same(lines(good[0], odd), strict=True)


def test_every_odd_line_in_one_file_gives_the_same_counts_and_examples():
    good = [moon(7 * i, [i]) for i in range(len(ODD_LINES))]
    mixed = [x for pair in zip(good, ODD_LINES, strict=True) for x in pair]
    assert_same(lines(*mixed))
    assert_same(lines(*mixed).replace(b"\n", b"\r\n"))
    assert_same(b"\xef\xbb\xbf" + lines(*mixed))
    assert_same(gzip.compress(lines(*mixed)))


def test_bailian_and_flattened_ragpulse_lines():
    bailian = [
        {
            "chat_id": i,
            "parent_chat_id": i - 1 if i else -1,
            "timestamp": 61.114 + i,
            "input_length": 40,
            "output_length": 20,
            "type": "text",
            "turn": 1 + i,
            "hash_ids": [1089 + i, 1090, 1091],
        }
        for i in range(60)
    ]
    assert_same(lines(*bailian))
    ragpulse = [
        {
            "timestamp": 27 + i,
            "input_length": 3861,
            "output_length": 127,
            "hash_ids": [8325, 8326, i],
            "session_id": f"1758081660427-xa8rbsd2uco{i}",
        }
        for i in range(60)
    ]
    assert_same(lines(*ragpulse), block_size=2048)
    assert_same(lines(*ragpulse))  # the block size inferred from the lines, the same way


def test_lines_that_carry_their_block_size_as_kvset_record_writes_them():
    recorded = [moon(i, [i, i + 1], length=20, block_size=16) for i in range(30)]
    recorded[5]["block_tokens"] = [16, 4]
    assert_same(lines(*recorded))


def test_a_block_size_line_sets_the_block_of_the_lines_after_it():
    # The msgspec path took a line's block_size from its next chunk of 8,192 lines on; the byte
    # path takes it from the next line on, whatever the chunking.
    data = lines(
        moon(0, [1, 2], length=1000), moon(1, [3], length=16, block_size=16), moon(2, [4, 5], length=20)
    )
    trace = read_trace(io.BytesIO(data))
    assert trace.tokens.tolist() == [512, 488, 16, 16, 4]


def test_mismatches_past_the_kept_examples_are_counted_the_same():
    many = [moon(i, [i, i + 1], length=5) for i in range(40)]  # every line: 2 ids for 5 tokens
    assert_same(lines(*many))
    assert_same(lines(*many), block_size=512)
    assert_same(lines(*many), strict=True)


def test_unsorted_and_missing_timestamps():
    assert_same(lines(moon(None, [1]), moon(5, [2]), moon(None, [3]), moon(2, [4]), moon(2, [5])))


def test_a_long_file_across_many_chunks(monkeypatch):
    import kvset.formats.byte_lines as byte_lines

    monkeypatch.setattr(byte_lines, "CHUNK_BYTES", 4096)
    rng = np.random.default_rng(3)
    objs = [
        moon(int(t), rng.integers(0, 1 << 40, int(rng.integers(1, 300))).tolist())
        for t in np.cumsum(rng.integers(0, 5, 400))
    ]
    objs[100] = ODD_LINES[0]
    data = lines(*objs)
    assert_same(data)
    packed = gzip.compress(data)
    cut = packed[: len(packed) // 2]
    scanned, reference = both(cut)
    # truncated: each keeps every whole line that can be inflated, the odd line rejected as before,
    # and says where the input ends with a line number
    inflatable = zlib.decompressobj(wbits=31).decompress(cut)
    whole = inflatable[: inflatable.rindex(b"\n") + 1]
    for trace in (scanned, reference):
        assert np.array_equal(trace.keys, read_trace(io.BytesIO(whole)).keys)
        assert trace.lines == whole.count(b"\n")
        (rejection,) = [r for r in trace.rejects.summary() if r.reason == INPUT_ENDS_EARLY]
        assert rejection.examples[0].startswith(f"line {trace.lines + 1}: input ends here")


_ids = st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=40)
_stamp = st.one_of(
    st.none(),
    st.integers(-(10**12), 10**14),
    st.floats(-1e9, 1e12, allow_nan=False),
    st.decimals(-1000, 10**9, places=6).map(float),
)
_extra = st.dictionaries(
    st.sampled_from(["chat_id", "parent_chat_id", "turn", "type", "session_id", "output_length"]),
    st.one_of(st.integers(-(10**6), 10**9), st.text("abcXYZ-_0123", max_size=12)),
    max_size=3,
)
_line = st.builds(
    lambda ts, ids, length, extra, sep: json.dumps(
        {**({} if ts is False else {"timestamp": ts}), "input_length": length, "hash_ids": ids, **extra},
        separators=sep,
    ),
    st.one_of(st.just(False), _stamp),
    _ids,
    st.integers(0, 1 << 31),
    _extra,
    st.sampled_from([(", ", ": "), (",", ":"), (" , ", " : ")]),
)


@given(st.lists(_line, min_size=1, max_size=30), st.sampled_from([None, "mooncake", "bailian"]))
def test_random_valid_lines_read_the_same(objs, fmt):
    assert_same(lines(*objs), format=fmt)


def test_corrupt_gzip_data_is_a_counted_rejection_on_both_paths():
    data = lines(*[moon(i, list(range(i, i + 50))) for i in range(3000)])
    packed = bytearray(gzip.compress(data))
    packed[len(packed) // 2 : len(packed) // 2 + 64] = b"\xff" * 64  # a damaged deflate block
    for trace in both(bytes(packed)):
        reasons = {r.reason for r in trace.rejects.summary()}
        # lines inflated wrongly before the damage is found are rejected as what they are
        assert "input ends early (truncated or corrupt data)" in reasons
        assert 0 < trace.requests < 3000


@pytest.mark.parametrize("where", ["hash_ids", "extra"])
def test_a_line_nested_thousands_deep_is_one_counted_rejection_on_both_paths(where):
    deep = "[" * 3_000 + "]" * 3_000
    odd = (
        '{"timestamp": 3, "input_length": 512, "hash_ids": ' + deep + "}"
        if where == "hash_ids"
        else '{"timestamp": 3, "input_length": 512, "hash_ids": [9], "x": ' + deep + "}"
    )
    data = lines(moon(1, [1, 2]), moon(2, [1, 3]), odd, moon(4, [1, 2, 4]))
    for trace in both(data):
        assert not isinstance(trace, str), trace
        assert trace.keys.tolist() == [1, 2, 1, 3, 1, 2, 4]
        ((reason, count, examples),) = [(r.reason, r.count, r.examples) for r in trace.rejects.summary()]
        assert count == 1 and examples[0].startswith("line 3: ")
        # in hash_ids the schema refuses the first nested array; elsewhere the depth is what stops it
        assert reason == ("nested too deeply" if where == "extra" else "wrong type (hash_ids[])")
