"""Trace lines' tenant, session and lora fields: each access carries its request's principal ids,
the same whichever path read the line (the byte scanner declines lines with these fields, msgspec
reads them), read whole or as a stream, sorted by time or not."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvset.formats import read_trace
from kvset.formats.stream import TraceStream
from kvset.types import PRINCIPAL_LEVELS

LINES = [
    {
        "timestamp": 3,
        "input_length": 1024,
        "output_length": 1,
        "hash_ids": [1, 2],
        "tenant": "acme",
        "session": "s1",
    },
    {"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [1], "lora": "sql-adapter"},
    {"timestamp": 2, "input_length": 1536, "output_length": 1, "hash_ids": [5, 6, 7]},  # names no one
    {"timestamp": 4, "input_length": 1024, "output_length": 1, "hash_ids": [1, 9], "tenant": "b\u00e9ta\n"},
]
# by time: line 2, line 3, line 1, line 4; per access, (tenant, session, adapter)
EXPECTED = (
    [("", "", "sql-adapter")] + [("", "", "")] * 3 + [("acme", "s1", "")] * 2 + [("b\u00e9ta\n", "", "")] * 2
)


def named(batches) -> list[tuple[str, ...]]:
    out = []
    for b in batches:
        assert b.principals is not None and b.principals.shape == (len(b), len(PRINCIPAL_LEVELS))
        for row in b.principals:
            out.append(tuple("" if p == 0 else b.principal_names.name(int(p)) for p in row))
    return out


@pytest.fixture
def trace_path(tmp_path):
    path = tmp_path / "principals.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    return str(path)


@pytest.mark.parametrize("byte_scanner", [True, False])
def test_read_whole_carries_each_requests_principals(trace_path, byte_scanner):
    trace = read_trace(trace_path, byte_scanner=byte_scanner)
    batches = list(trace.batches(max_accesses=3))
    assert np.concatenate([b.keys for b in batches]).tolist() == [1, 5, 6, 7, 1, 2, 1, 9]
    assert named(batches) == EXPECTED


def test_a_stream_carries_the_same_principals(trace_path):
    # out of time order: the stream either reorders or reads whole; the principals move with requests
    batches = list(TraceStream(trace_path))
    assert named(batches) == EXPECTED


def test_lines_the_byte_scanner_reads_mix_with_lines_that_name_principals(tmp_path):
    plain = {"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [8]}
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        "".join(json.dumps(x) + "\n" for x in [plain] * 200 + [LINES[0]] + [{**plain, "timestamp": 5}])
    )
    for byte_scanner in (True, False):
        trace = read_trace(str(path), byte_scanner=byte_scanner)
        got = named(trace.batches())
        assert got == [("", "", "")] * 200 + [("acme", "s1", "")] * 2 + [("", "", "")]


def test_a_trace_naming_no_principal_carries_none(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text(
        json.dumps({"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [8]}) + "\n"
    )
    (batch,) = read_trace(str(path)).batches()
    assert batch.principals is None


def test_token_lines_carry_principals_too(tmp_path):
    path = tmp_path / "tokens.jsonl"
    path.write_text(
        json.dumps({"timestamp": 0, "token_ids": list(range(32)), "tenant": "t1", "lora": "a"})
        + "\n"
        + json.dumps({"timestamp": 1, "token_ids": list(range(16)), "session": "x"})
        + "\n"
    )
    trace = read_trace(str(path), block_size=16)
    assert named(trace.batches()) == [("t1", "", "a")] * 2 + [("", "x", "")]
