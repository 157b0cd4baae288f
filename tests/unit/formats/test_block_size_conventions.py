"""A hash-id trace's block size and how it counts blocks, told from its lines (kvset.formats.block_size).

Two conventions: a hash for a trailing partial block (Mooncake: len(hash_ids) == ceil(L / b)) and
full blocks only (WEKA's Claude Code traces: len(hash_ids) == L // b). The reader finds both, says
which (StreamUnits.convention), refuses a read no size explains, and reads the whole file and the
stream alike.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from kvset.formats import TraceError, read_trace
from kvset.formats.block_size import MIN_REQUESTS, NoBlockSizeFits, check_block_size, settle
from kvset.formats.stream import TraceStream
from kvset.units import CEIL, FLOOR
from tests.support.paths import MOONCAKE_TRACE
from tests.support.weka_trace import WEKA_BLOCK_SIZE, weka_style_lines, write_weka_style_trace


def write(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def streamed(path, **kwargs):
    stream = TraceStream(path, **kwargs)
    batches = list(stream)
    return stream, np.concatenate([b.keys for b in batches]), np.concatenate([b.tokens for b in batches])


def test_the_check_finds_each_convention_at_its_size():
    rng = np.random.default_rng(2)
    lengths = rng.integers(65, 100_000, 500)
    ceil = check_block_size(lengths, -(-lengths // 64), 512)
    floor = check_block_size(lengths, lengths // 64, 512)
    assert (ceil.best, ceil.best_convention, ceil.best_fit) == (64, CEIL, 1.0)
    assert (floor.best, floor.best_convention, floor.best_fit) == (64, FLOOR, 1.0)
    assert ceil.wrong and floor.wrong and ceil.fit < 0.01 and floor.fit < 0.01
    # at the right size the check says which convention the lines keep
    assert check_block_size(lengths, lengths // 64, 64).convention == FLOOR
    assert check_block_size(lengths, -(-lengths // 64), 64).convention == CEIL
    # lengths that are whole blocks keep both rules: the formats' own (CEIL) is kept
    whole = check_block_size(lengths * 64, lengths, 64)
    assert (whole.convention, whole.fit, whole.wrong) == (CEIL, 1.0, False)


def test_settle_infers_refuses_or_keeps_what_was_given():
    lengths = np.arange(1000, 1000 + 100 * 37, 37)
    floor = check_block_size(lengths, lengths // 64, 512)
    inferred = settle(floor, given=False)
    assert (inferred.block_size, inferred.convention, inferred.inferred) == (64, FLOOR, True)
    assert "full blocks only" in inferred.note and "64 fits 100.0%" in inferred.note
    with pytest.raises(NoBlockSizeFits, match="give --block-size 64"):
        settle(floor, given=True)  # --block-size 512 given: the fix names the size that fits
    junk = check_block_size(lengths, np.full(len(lengths), 3), 512)
    with pytest.raises(NoBlockSizeFits, match=r"no block size fits this trace.*give --block-size N"):
        settle(junk, given=False)
    kept = settle(
        junk, given=True
    )  # the user said what the trace is: read with it, and say how badly it fits
    assert (kept.block_size, kept.inferred) == (512, False) and kept.note.startswith("block size doubtful")
    few = check_block_size(lengths[: MIN_REQUESTS - 1], lengths[: MIN_REQUESTS - 1] // 64, 512)
    assert settle(few, given=False).block_size == 512  # too few requests to read with another size


@pytest.mark.parametrize("given", [None, WEKA_BLOCK_SIZE])
def test_a_weka_style_trace_is_read_at_64_full_blocks_only(tmp_path, given):
    lines = weka_style_lines()
    path = write(tmp_path / "weka.jsonl", lines)
    trace = read_trace(path, block_size=given)
    assert trace.units.block_size == 64 and trace.units.convention == FLOOR
    assert trace.units.block_size_from == ("flag" if given else "inferred")
    assert not trace.warnings and not any("doubtful" in n for n in trace.notes)
    assert not any("check --block-size" in n for n in trace.notes)
    # full blocks only: every access covers 64 tokens, none a partial last block
    assert set(trace.tokens.tolist()) == {64}
    per_request = np.add.reduceat(trace.tokens.astype(np.int64), trace.request_starts)
    by_time = sorted(lines, key=lambda x: x["timestamp"])
    assert per_request.tolist() == [64 * (x["input_length"] // 64) for x in by_time]
    # the stream reads it the same, from its first requests on
    stream, keys, tokens = streamed(path, block_size=given)
    assert stream.units == trace.units and keys.tolist() == trace.keys.tolist()
    assert tokens.tolist() == trace.tokens.tolist() and not stream.warnings


def test_the_report_says_full_blocks_only():
    lines = weka_style_lines(sessions=4, turns=15, seed=3)
    trace = read_trace(_bytes(lines))
    assert trace.units.describe() == "64 tokens per block (inferred from the trace; full blocks only)"


def test_requests_that_break_the_settled_rule_are_counted_against_it(tmp_path):
    lines = weka_style_lines(seed=1)
    lines[5]["hash_ids"] = lines[5]["hash_ids"] + [9]  # one id too many for full blocks only
    trace = read_trace(write(tmp_path / "t.jsonl", lines))
    (warning,) = trace.warnings.summary()
    assert warning.count == 1 and warning.reason == "hash_ids count is not input_length // 64; request kept"
    stream, *_ = streamed(tmp_path / "t.jsonl")
    assert [(w.reason, w.count) for w in stream.warnings.summary()] == [(warning.reason, 1)]


def test_the_mooncake_sample_keeps_its_own_size_and_convention():
    trace = read_trace(MOONCAKE_TRACE)
    assert (trace.units.block_size, trace.units.block_size_from, trace.units.convention) == (
        512,
        "format",
        CEIL,
    )


def test_a_trace_no_size_explains_is_refused_with_the_fix(tmp_path):
    rng = np.random.default_rng(5)
    lines = [
        {"timestamp": i, "input_length": int(rng.integers(1, 100_000)), "hash_ids": [1, 2, 3]}
        for i in range(100)
    ]
    path = write(tmp_path / "t.jsonl", lines)
    for read in (lambda: read_trace(path), lambda: streamed(path), lambda: streamed(path, exact=False)):
        with pytest.raises(
            TraceError, match=r"no block size fits this trace: 512 tokens per block fits .*--block-size N"
        ):
            read()
    given = read_trace(path, block_size=512)  # what the user says it is
    assert given.block_size == 512 and any(n.startswith("block size doubtful") for n in given.notes)


def _bytes(lines):
    return io.BytesIO("".join(json.dumps(x) + "\n" for x in lines).encode())


def test_write_weka_style_trace_writes_what_it_makes(tmp_path):
    path = write_weka_style_trace(tmp_path / "w.jsonl", sessions=2, turns=3)
    assert [json.loads(x) for x in path.read_text().splitlines()] == weka_style_lines(sessions=2, turns=3)
