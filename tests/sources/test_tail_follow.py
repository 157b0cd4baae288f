"""FileTailer: whole-file reads, following, rotation, truncation, late files, partial lines."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from kvset.sources.tail import FileTailer
from tests.support.fake_clock import FakeClock


def drain(t: FileTailer, calls: int = 50) -> tuple[list[tuple[int, bytes]], list[str]]:
    """Call read until it returns nothing new (or the file is finished)."""
    lines: list[tuple[int, bytes]] = []
    kinds: list[str] = []
    idle = 0
    for _ in range(calls):
        r = t.read()
        lines += r.lines
        kinds += [e.kind for e in r.events]
        if r.finished:
            break
        idle = idle + 1 if not (r.lines or r.events or r.bytes_read) else 0
        if idle >= 2:
            break
    return lines, kinds


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_whole_file_numbers_lines_and_keeps_an_unterminated_last_line(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"one\r\ntwo\n\nfour")
    t = FileTailer(p, follow=False)
    lines, kinds = drain(t)
    assert lines == [(1, b"one"), (2, b"two"), (3, b""), (4, b"four")]
    assert kinds == []
    assert t.finished


def test_whole_gzip_file(tmp_path: Path) -> None:
    p = tmp_path / "a.log.gz"
    with gzip.open(p, "wb") as f:
        f.write(b"".join(b"line %d\n" % i for i in range(1000)))
    lines, _ = drain(FileTailer(p, follow=False, max_bytes=1000), calls=100)
    assert [n for n, _ in lines] == list(range(1, 1001))
    assert lines[-1][1] == b"line 999"


def test_gzip_cannot_be_followed_and_a_missing_whole_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gzip"):
        FileTailer(tmp_path / "x.log.gz", follow=True)
    with pytest.raises(FileNotFoundError):
        FileTailer(tmp_path / "nope.log", follow=False)


def test_partial_line_is_held_until_its_newline(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"first\nsec")
    t = FileTailer(p, follow=True)
    assert t.read().lines == [(1, b"first")]
    assert t.read().lines == []
    append(p, b"ond half")
    assert t.read().lines == []
    append(p, b"\nthird\n")
    assert t.read().lines == [(2, b"second half"), (3, b"third")]


def test_bounded_reads_split_a_backlog_over_calls(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"".join(b"%05d\n" % i for i in range(200)))
    t = FileTailer(p, follow=True, max_bytes=64)
    first = t.read()
    assert first.bytes_read <= 64 and len(first.lines) <= 11
    lines, _ = drain(t, calls=200)
    got = first.lines + lines
    assert [n for n, _ in got] == list(range(1, 201))
    assert got[-1][1] == b"00199"


def test_rename_rotation_drains_the_old_file_then_reads_the_new_one(tmp_path: Path) -> None:
    p = tmp_path / "engine.log"
    p.write_bytes(b"a1\na2\n")
    t = FileTailer(p, follow=True)
    assert [c for _, c in t.read().lines] == [b"a1", b"a2"]
    append(p, b"a3\na4-unterminated")  # written just before rotation
    os.rename(p, tmp_path / "engine.log.1")
    p.write_bytes(b"b1\nb2\n")
    lines, kinds = drain(t)
    assert lines == [(3, b"a3"), (4, b"a4-unterminated"), (1, b"b1"), (2, b"b2")]
    assert kinds == ["log-rotated"]
    assert t.rotations == 1


def test_rotation_by_rename_then_later_creation(tmp_path: Path) -> None:
    p = tmp_path / "engine.log"
    p.write_bytes(b"a1\n")
    t = FileTailer(p, follow=True)
    assert t.read().lines == [(1, b"a1")]
    os.rename(p, tmp_path / "engine.log.1")
    append(tmp_path / "engine.log.1", b"a2\n")  # the writer still holds the old file
    lines, kinds = drain(t)
    assert lines == [(2, b"a2")]
    assert kinds == ["log-missing"]
    p.write_bytes(b"b1\n")
    lines, kinds = drain(t)
    assert lines == [(1, b"b1")]
    assert kinds == ["log-rotated"]


def test_copytruncate_restarts_from_zero(tmp_path: Path) -> None:
    p = tmp_path / "engine.log"
    p.write_bytes(b"old line one\nold line two\n")
    t = FileTailer(p, follow=True)
    assert len(t.read().lines) == 2
    # logrotate copytruncate: copy away, truncate in place, the writer goes on from 0.
    with open(p, "r+b") as f:
        f.truncate(0)
    append(p, b"new\n")
    lines, kinds = drain(t)
    assert kinds == ["log-truncated"]
    assert lines == [(1, b"new")]
    assert t.truncations == 1


def test_a_file_that_appears_later(tmp_path: Path) -> None:
    p = tmp_path / "later.log"
    t = FileTailer(p, follow=True)
    r = t.read()
    assert r.waiting and r.lines == [] and r.events == []
    p.write_bytes(b"hello\n")
    lines, kinds = drain(t)
    assert kinds == ["log-appeared"]
    assert lines == [(1, b"hello")]


def test_over_long_line_is_skipped_and_reported(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"ok\n" + b"x" * 500 + b"\nafter\n")
    t = FileTailer(p, follow=True, max_bytes=64, max_line_bytes=100)
    lines, kinds = drain(t, calls=100)
    assert lines == [(1, b"ok"), (3, b"after")]
    assert kinds == ["line-too-long"]


def test_from_end_reads_only_new_lines(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"history\n" * 10)
    t = FileTailer(p, follow=True, from_end=True)
    assert t.read().lines == []
    append(p, b"fresh\n")
    assert t.read().lines == [(1, b"fresh")]


def test_read_with_timeout_waits_for_a_writer(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"")
    clock = FakeClock()
    t = FileTailer(p, follow=True, poll_interval=0.01, clock=clock.clock())
    clock.at(0.1, lambda: append(p, b"late\n"))  # the writer comes 0.1 s into the wait
    r = t.read(timeout=2.0)
    assert r.lines == [(1, b"late")]
    assert 0.1 <= clock.now <= 0.11 + 1e-9  # polled every 0.01 s: back at the first poll after the write
    assert clock.waits == [pytest.approx(0.01)] * len(clock.waits)
    start = clock.now
    assert t.read(timeout=0.1).lines == []
    assert clock.now - start == pytest.approx(0.1)  # nothing came: the whole timeout, no more


def test_unreadable_path_is_one_error_event_until_it_can_be_read(tmp_path: Path) -> None:
    p = tmp_path / "engine.log"
    p.mkdir()  # a directory where the log should be: open() fails on every poll
    t = FileTailer(p, follow=True)
    kinds = [e.kind for _ in range(5) for e in t.read().events]
    assert kinds == ["read-error"]
    p.rmdir()
    p.write_bytes(b"now a file\n")
    r = t.read()
    assert r.lines == [(1, b"now a file")]


def test_truncated_and_rewritten_between_two_polls_is_read_from_its_start(tmp_path: Path) -> None:
    p = tmp_path / "engine.log"
    p.write_bytes(b"old line one\nold line two\n")
    t = FileTailer(p, follow=True)
    assert len(t.read().lines) == 2
    # truncated and written past our read position before the next poll: the size never shrinks
    # below where we were, only the content tells
    with open(p, "r+b") as f:
        f.truncate(0)
        f.write(b"".join(b"rewritten %d\n" % i for i in range(1, 6)))
    lines, kinds = drain(t)
    assert kinds == ["log-truncated"]
    assert lines == [(i, b"rewritten %d" % i) for i in range(1, 6)]
    assert t.truncations == 1


def test_plain_appends_are_not_taken_for_a_rewrite(tmp_path: Path) -> None:
    p = tmp_path / "engine.log"
    p.write_bytes(b"a\n")
    t = FileTailer(p, follow=True)
    seen = [line for _, line in t.read().lines]
    for i in range(30):
        append(p, b"line %d\n" % i)
        seen += [line for _, line in t.read().lines]
    assert seen == [b"a"] + [b"line %d" % i for i in range(30)]
    assert t.truncations == 0
