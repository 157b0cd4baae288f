"""Byte ranges cut anywhere give every line to exactly one partition; a worker's partition analysed
alone and merged in order is the one-process analysis of the file."""

import gzip
import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.core.partial_stack_merge import merge, merge_all
from kvset.distributed.partitions import Partition, PartitionError, open_partition, plan_partitions
from kvset.distributed.result import MergedAnalysis, distributed_result, merged_summary
from kvset.distributed.worker import ReadConfig, analyze_partition
from kvset.figures.base import ANALYZE
from kvset.formats.stream import TraceStream
from kvset.offline import InputSummary, analysis_snapshot, analyze_batches
from kvset.report import snapshot_json
from kvset.snapshot.builder import SnapshotConfig
from tests.support.paths import MOONCAKE_TRACE


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"x")), max_size=30),
    st.booleans(),
    st.lists(st.integers(0, 400), max_size=8),
)
def test_every_line_in_exactly_one_byte_range(tmp_path_factory, lines, trailing_newline, cuts):
    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    path = tmp_path_factory.mktemp("ranges") / "t.jsonl"
    path.write_bytes(data)
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    starts = [0, *(i + 1 for i, byte in enumerate(data) if byte == ord("\n") and i + 1 < len(data))]
    got = b""
    for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        reader, size = open_partition(Partition(k, str(path), lo, hi))
        with reader:
            part = reader.read()
        # the lines that begin in [lo, hi), by their start offsets
        first = next((s for s in starts if s >= lo), len(data))
        after = next((s for s in starts if s >= hi), len(data))
        assert part == data[first:after] and len(part) == size
        got += part
    assert got == data


def test_plan_of_one_file_folder_and_files(tmp_path):
    parts, how = plan_partitions([str(MOONCAKE_TRACE)], 4)
    assert [p.index for p in parts] == [0, 1, 2, 3] and parts[-1].end == MOONCAKE_TRACE.stat().st_size
    assert "byte ranges" in how
    for name in ("b.jsonl", "a.jsonl", ".hidden"):
        (tmp_path / name).write_text("{}\n")
    parts, how = plan_partitions([str(tmp_path)], 4)
    assert [p.path.rsplit("/", 1)[1] for p in parts] == ["a.jsonl", "b.jsonl"] and "2 files" in how
    gz = tmp_path / "one.jsonl.gz"
    gz.write_bytes(gzip.compress(b"{}\n"))
    with pytest.raises(PartitionError, match="gzip-compressed"):
        plan_partitions([str(gz)], 2)
    assert plan_partitions([str(gz)], 1)[0] == [Partition(0, str(gz))]  # whole, it reads as any file
    with pytest.raises(PartitionError, match="no such file"):
        plan_partitions([str(tmp_path / "nope")], 2)
    with pytest.raises(PartitionError, match="stdin"):
        plan_partitions(["-"], 2)


def _one_process(path, order="forward"):
    return analyze_batches(
        TraceStream(str(path)), InputSummary(name=str(path), format="", units=None), 1 << 22, order
    )


@pytest.mark.parametrize("partitions,order", [(2, "forward"), (7, "reverse"), (64, "forward")])
def test_byte_ranges_of_the_real_trace_merge_to_the_one_process_curve(partitions, order):
    whole = _one_process(MOONCAKE_TRACE, order)
    parts, _ = plan_partitions([str(MOONCAKE_TRACE)], partitions)
    config = ReadConfig(horizon=1 << 22, order=order)
    states = [analyze_partition(p, config) for p in parts]
    assert sum(s.extra["requests"] for s in states) == whole.input.requests
    assert sum(s.extra["lines"] for s in states) == whole.input.lines
    merged = states[0]
    for s in states[1:]:
        merged = merge(merged, s)
    c, m = whole.curve, merged.curve()
    assert np.array_equal(m.block_hits, c.block_hits) and np.array_equal(m.token_hits, c.token_hits)
    assert (merged.first_time, merged.beyond_horizon) == (whole.analyzer.first_time, 0)
    # and its time slots, read as the analyzer: every window and slot of both rings
    read, alone = MergedAnalysis(merged, order, whole.analyzer.units), whole.analyzer
    assert (read.first_time_at, read.last_time_at, read.late_accesses) == (
        alone.first_time_at,
        alone.last_time_at,
        alone.late_accesses,
    )
    for window in (60.0, 300.0, 3600.0):
        w, v = alone.curve(window=window), read.curve(window=window)
        assert np.array_equal(w.block_hits, v.block_hits) and np.array_equal(w.token_hits, v.token_hits)
        assert (w.accesses, w.tokens) == (v.accesses, v.tokens)
    for coarse in (False, True):
        s, t = alone.slot_series(10**6, coarse), read.slot_series(10**6, coarse)
        assert s.end_slot == t.end_slot and s.accesses.sum() > 0
        for name in ("counts", "requests", "blocks", "tokens"):
            assert np.array_equal(getattr(s, name), getattr(t, name)), name


@pytest.mark.parametrize("partitions,horizon", [(1, 1 << 22), (7, 1 << 22), (7, 700)])
def test_a_root_without_its_stack_reads_as_the_same_json(partitions, horizon):
    """The driver's tree ends in a merge that keeps no stack (one partition: the partition's stack
    dropped); the report's JSON is the one of the same merges keeping it, below and past the horizon."""
    parts, how = plan_partitions([str(MOONCAKE_TRACE)], partitions)
    config = ReadConfig(horizon=horizon)
    states = [analyze_partition(p, config) for p in parts]
    root = analyze_partition(parts[0], config, root=True) if partitions == 1 else merge_all(states, root=True)

    def report(state):
        result = distributed_result("t", state, [s.extra for s in states], "forward", how, 1.0)
        out = snapshot_json(analysis_snapshot(result, SnapshotConfig(command=ANALYZE)))
        del out["taken_at"]
        return out

    kept = merge_all(states)
    assert len(root.stack) == 0 and len(kept.stack) > 0 and (kept.distinct > horizon) == (horizon == 700)
    assert report(root) == report(kept)


def test_a_partition_without_requests_is_empty_and_rejections_are_counted(tmp_path):
    path = tmp_path / "t.jsonl"
    good = json.dumps({"timestamp": 1, "input_length": 32, "output_length": 1, "hash_ids": [1, 2]})
    path.write_text("not json\n" * 3 + good + "\n" + good + "\n")
    config = ReadConfig(horizon=100, format="mooncake", block_size=16)
    first = analyze_partition(Partition(0, str(path), 0, 10), config)
    assert (
        first.extra["requests"] == 0 and first.extra["rejects"].total == 2 and first.accesses == 0
    )  # lines at bytes 0 and 9
    rest = analyze_partition(Partition(1, str(path), 10, path.stat().st_size), config)
    assert rest.extra["requests"] == 2 and rest.extra["rejects"].total == 1
    assert rest.curve().hits(2) == 2


def test_partitions_that_settle_other_units_are_refused(tmp_path):
    """Each partition settles its units on its own first requests; one that reads otherwise is named."""
    line = json.dumps({"timestamp": 1, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 3]})
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"  # b: only named
    a.write_text((line + "\n") * 60)
    config = ReadConfig(horizon=100, block_size=16)
    parts = [analyze_partition(Partition(0, str(a)), config).extra]
    other = dict(parts[0], partition=str(b), units=replace(parts[0]["units"], block_size=20))
    with pytest.raises(PartitionError, match="b.jsonl reads as mooncake with 20 tokens per block"):
        merged_summary("two", [parts[0], other])
    assert merged_summary("one", parts).units.block_size == 16
