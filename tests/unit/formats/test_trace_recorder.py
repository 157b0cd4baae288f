"""kvset record's file writer: what it writes can always be read back, and it never destroys a file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from kvset.formats import read_trace
from kvset.formats.record import RecordTargetError, TraceRecorder, check_record_target
from kvset.types import AccessBatch


def batch(keys, ts) -> AccessBatch:
    keys = np.asarray(keys, dtype=np.uint64)
    return AccessBatch(
        keys, tokens=np.full(len(keys), 16), request_starts=np.array([0]), timestamps=ts, block_size=16
    )


def test_an_absurd_timestamp_mid_stream_is_clamped_and_everything_reads_back(tmp_path: Path):
    out = tmp_path / "t.jsonl"
    with TraceRecorder(out) as rec:
        rec.write(batch([1, 2], 100.0))
        rec.write(batch([3], 1e300))
        rec.write(batch([4], float("nan")))
        rec.write(batch([5, 6], 101.5))
    assert rec.clamped == 2
    trace = read_trace(out)
    assert trace.rejects.total == 0
    assert trace.keys.tolist() == [1, 2, 3, 4, 5, 6]
    assert trace.request_timestamps.tolist() == [0.0, 0.0, 0.0, 1.5]


def test_an_existing_file_is_refused_unless_overwrite_and_then_replaced_whole(tmp_path: Path):
    out = tmp_path / "t.jsonl"
    out.write_text("precious\n")
    with pytest.raises(RecordTargetError, match="exists: give --force"):
        TraceRecorder(out)
    assert out.read_text() == "precious\n"
    rec = TraceRecorder(out, overwrite=True)
    rec.write(batch([7], 1.0))
    assert out.read_text() == "precious\n"  # nothing replaced until the recording is finished
    rec.close()
    assert read_trace(out).keys.tolist() == [7]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n")
    link = tmp_path / "t.jsonl"
    link.symlink_to(victim)
    with TraceRecorder(link, overwrite=True) as rec:
        rec.write(batch([1], 1.0))
    assert victim.read_text() == "not yours\n"
    assert not link.is_symlink() and read_trace(link).keys.tolist() == [1]


def test_gzip_recordings_are_finished_on_close(tmp_path: Path):
    out = tmp_path / "t.jsonl.gz"
    with TraceRecorder(out) as rec:
        rec.write(batch([1, 2, 3], 1.0))
    assert read_trace(out).keys.tolist() == [1, 2, 3]
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_targets_that_must_not_be_written_get_one_line_reasons(tmp_path: Path):
    trace = tmp_path / "in.jsonl"
    trace.write_text("{}\n")
    with pytest.raises(RecordTargetError, match="onto the input"):
        check_record_target(trace, inputs=[trace], overwrite=True)
    with pytest.raises(RecordTargetError, match="does not exist") as missing:
        check_record_target(tmp_path / "no" / "such" / "t.jsonl")
    assert "\n" not in str(missing.value)
    with pytest.raises(RecordTargetError, match="is a folder"):
        check_record_target(tmp_path)
    assert check_record_target(tmp_path / "new.jsonl") == tmp_path / "new.jsonl"


def test_an_empty_recording_never_replaces_a_file_even_with_overwrite(tmp_path: Path):
    out = tmp_path / "t.jsonl"
    out.write_text("precious\n")
    TraceRecorder(out, overwrite=True).close()  # nothing arrived
    assert out.read_text() == "precious\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]
    fresh = tmp_path / "new.jsonl.gz"
    TraceRecorder(fresh).close()
    assert not fresh.exists()  # nor is an empty file created, that the next run would stop at
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]


class _FullDisk:
    """A file that takes `room` bytes, then fails as a full disk does (ENOSPC)."""

    def __init__(self, inner, room: int) -> None:
        self.inner, self.room = inner, room

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(28, "No space left on device")
        self.room -= len(data)
        return self.inner.write(data)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_a_full_disk_discards_the_recording_and_leaves_the_old_file_untouched(
    tmp_path: Path, monkeypatch, name
):
    import kvset.formats.record as record

    real_fdopen = os.fdopen
    monkeypatch.setattr(record.os, "fdopen", lambda fd, mode: _FullDisk(real_fdopen(fd, mode), 300))
    out = tmp_path / name
    out.write_bytes(b"a good recording\n")
    rec = TraceRecorder(out, overwrite=True)
    rng = np.random.default_rng(1)
    for t in range(20):  # incompressible keys: gzip too fills the disk before its close
        rec.write(batch(rng.integers(0, 1 << 60, 50).tolist(), float(t)))
    rec.close()
    assert rec.failure is not None and "No space left on device" in rec.failure and str(out) in rec.failure
    if name == "t.jsonl":  # the batches after the failed write are counted, not written
        assert rec.unrecorded >= 50 * 19
    assert out.read_bytes() == b"a good recording\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no .part left behind


KILLED_RECORDER = """
import sys, time
import numpy as np
from kvset.formats.record import TraceRecorder
from kvset.types import AccessBatch

rec = TraceRecorder(sys.argv[1])
rec.checkpoint_seconds = 0.05
for t in range(20):
    keys = np.arange(t * 10, t * 10 + 10, dtype=np.uint64)
    rec.write(AccessBatch(keys, tokens=np.full(10, 16), request_starts=np.array([0]), timestamps=float(t), block_size=16))
    time.sleep(0.01)
time.sleep(0.1)  # past a checkpoint: the 20 batches are in the file
rec.write(AccessBatch(np.arange(500, 510, dtype=np.uint64), tokens=np.full(10, 16), request_starts=np.array([0]), timestamps=30.0, block_size=16))
print(rec.partial_path, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_a_recording_killed_outright_is_readable_up_to_its_last_checkpoint(tmp_path: Path, name):
    import signal
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_RECORDER, str(tmp_path / name)], stdout=subprocess.PIPE, text=True
    )
    try:
        part = Path(child.stdout.readline().strip())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert part.parent == tmp_path and part.name.startswith(f".{name}.") and not (tmp_path / name).exists()
    trace = read_trace(part)
    assert trace.keys.tolist()[:200] == list(range(200))  # every batch before the last checkpoint
    assert trace.rejects.total <= 1  # at most the member or line the kill cut


def test_a_batch_given_after_the_close_is_counted_not_written(tmp_path: Path):
    out = tmp_path / "t.jsonl"
    rec = TraceRecorder(out)
    rec.write(batch([1, 2], 1.0))
    rec.close()
    assert rec.write(batch([3, 4, 5], 2.0)) == 0 and rec.unrecorded == 3  # no ValueError
    assert read_trace(out).keys.tolist() == [1, 2]
