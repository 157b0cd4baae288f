"""Recording live accesses as a Mooncake-style trace with block sizes, and `kvset record`."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from kvset.cli import record as record_command
from kvset.formats.record import TraceRecorder
from kvset.types import AccessBatch
from tests.support.vllm_publisher import FakeVllmPublisher

U64 = (1 << 64) - 1


def replay_lines(lines: list[dict]) -> tuple[list[int], list[int], list[int]]:
    """What a reader following the documented format sees: keys, tokens per access, request starts."""
    keys: list[int] = []
    tokens: list[int] = []
    starts: list[int] = []
    for line in lines:
        ids, size, total = line["hash_ids"], line["block_size"], line["input_length"]
        assert len(ids) == -(-total // size)  # Mooncake's rule, with this file's block size
        starts.append(len(keys))
        keys += ids
        per_block = line.get("block_tokens") or [size] * (len(ids) - 1) + [total - size * (len(ids) - 1)]
        assert sum(per_block) == total
        tokens += per_block
    return keys, tokens, starts


def read_jsonl(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines()]


def test_recorded_trace_replays_the_exact_access_stream() -> None:
    batches = [
        AccessBatch(
            keys=np.array([U64, 2, 3, 4, 5], dtype=np.uint64),
            tokens=np.array([16, 16, 16, 16, 4]),
            request_starts=np.array([0, 3]),
            timestamps=np.array([1000.0, 1000.0, 1000.0, 1000.25, 1000.25]),
            block_size=16,
        ),
        # A single partial block keeps the engine's block size, not its own token count.
        AccessBatch(
            keys=np.array([6], dtype=np.uint64),
            tokens=np.array([5]),
            request_starts=np.array([0]),
            timestamps=999.9,
            block_size=16,
        ),
        # No tokens and no request boundaries: one request of block_tokens-sized blocks.
        AccessBatch(keys=np.array([7, 8], dtype=np.uint64), timestamps=1001.0, block_size=16),
    ]
    out = io.BytesIO()
    recorder = TraceRecorder(out)
    written = [recorder.write(b) for b in batches]
    recorder.close()
    assert written == [2, 1, 1]
    lines = read_jsonl(out.getvalue())
    assert [line["timestamp"] for line in lines] == [0, 250, 250, 1000]  # ms, never decreasing
    assert [line["block_size"] for line in lines] == [16, 16, 16, 16]
    assert lines[1]["input_length"] == 20 and lines[2]["input_length"] == 5
    assert all(line["output_length"] == 0 and "block_tokens" not in line for line in lines)
    keys, tokens, starts = replay_lines(lines)
    assert keys == [U64, 2, 3, 4, 5, 6, 7, 8]
    assert tokens == [16, 16, 16, 16, 4, 5, 16, 16]
    assert starts == [0, 3, 5, 6]
    assert (recorder.requests, recorder.accesses, recorder.tokens) == (4, 8, 105)
    assert recorder.first_timestamp == 1000.0


def test_irregular_blocks_are_written_explicitly(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl.gz"
    with TraceRecorder(path) as recorder:
        recorder.write(
            AccessBatch(
                keys=np.array([1, 2, 3], dtype=np.uint64),
                tokens=np.array([8, 16, 16]),
                request_starts=np.array([0]),
                timestamps=5.0,
            )
        )
    lines = read_jsonl(gzip.decompress(path.read_bytes()))
    assert lines[0]["block_tokens"] == [8, 16, 16] and lines[0]["block_size"] == 16
    assert replay_lines(lines)[1] == [8, 16, 16]


def test_recorder_needs_a_block_size_from_somewhere() -> None:
    with pytest.raises(ValueError):
        TraceRecorder(io.BytesIO()).write(AccessBatch(keys=np.array([1], dtype=np.uint64)))
    recorder = TraceRecorder(io.BytesIO(), block_size=512)
    recorder.write(AccessBatch(keys=np.array([1], dtype=np.uint64)), arrival=3.0)
    assert recorder.tokens == 512 and recorder.first_timestamp == 3.0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kvset")
    record_command.register(parser.add_subparsers())
    return parser.parse_args(argv)


def test_kvset_record_saves_what_the_engine_published(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "incident.jsonl"
    with FakeVllmPublisher() as fake:
        args = parse(
            [
                "record",
                "--events",
                fake.endpoint,
                "--replay-endpoint",
                fake.replay_endpoint,
                "--out",
                str(out),
                "--seconds",
                "1.0",
                "--quiet",
            ]
        )
        result: list[int] = []
        thread = threading.Thread(target=lambda: result.append(args.func(args)))
        thread.start()
        fake.wait_for_subscriber()
        fake.publish([fake.stored([10, 11], token_ids=list(range(32)))], ts=50.0)
        fake.publish([fake.stored([12], parent=11, token_ids=list(range(7)))], ts=50.5, deliver=False)
        fake.publish([fake.removed([10]), fake.stored([10])], ts=51.0)
        thread.join(timeout=10)
    assert result == [0]
    lines = read_jsonl(out.read_bytes())
    keys, tokens, starts = replay_lines(lines)
    # 12 chains onto 11: one request of three blocks; each request stamped with its (estimated) finish
    assert keys == [10, 11, 12, 10] and tokens == [16, 16, 7, 16] and starts == [0, 3]
    assert [line["timestamp"] for line in lines] == [0, 0]
    err = capsys.readouterr().err
    assert "recorded 2 requests, 4 block accesses (55 tokens)" in err
    assert "1 recovered by replay, 0 lost" in err
    assert "re-stores after removal: 1" in err


def test_kvset_record_with_nothing_arriving_fails_visibly(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with FakeVllmPublisher(replay=False) as fake:
        args = parse(
            ["record", "--events", fake.endpoint, "--out", str(tmp_path / "t.jsonl"), "--seconds", "0.3"]
        )
        assert args.func(args) == 1
        assert args.func(args) == 1  # the same command again: no empty file left to refuse ("exists")
    err = capsys.readouterr().err
    assert err.count("nothing recorded") == 2 and "exists" not in err and not (tmp_path / "t.jsonl").exists()
    # where it records, said on start, then one line: nothing recorded
    assert [line.split(" ")[:2] for line in err.splitlines()] == [
        ["recording", "into"],
        ["kvset", "record:"],
    ] * 2
    bad = parse(["record", "--events", "tcp://h:9-1", "--out", str(tmp_path / "u.jsonl")])
    assert bad.func(bad) == 2


def test_recorded_trace_reads_back_with_read_trace(tmp_path: Path) -> None:
    """The core's own reader replays a recording exactly: keys, tokens, request boundaries, block size."""
    from kvset.formats import read_trace
    from kvset.formats.record import TraceRecorder
    from kvset.types import AccessBatch

    out = tmp_path / "rec.jsonl"
    rec = TraceRecorder(out)
    keys = np.array([2**64 - 1, 5, 7, 5, 9, 11], dtype=np.uint64)
    rec.write(AccessBatch(keys[:3], request_starts=np.array([0, 2]), timestamps=10.0, block_size=16))
    rec.write(
        AccessBatch(
            keys[3:],
            tokens=np.array([16, 16, 3]),
            request_starts=np.array([0]),
            timestamps=10.5,
            block_size=16,
        )
    )
    rec.close()
    trace = read_trace(out)
    assert trace.keys.tolist() == keys.tolist()
    assert trace.tokens.tolist() == [16, 16, 16, 16, 16, 3]
    assert trace.request_starts.tolist() == [0, 2, 3]
    assert trace.block_size == 16
    assert trace.rejects.total == 0 and trace.warnings.total == 0
    assert trace.request_timestamps.tolist() == pytest.approx([0.0, 0.0, 0.5])
