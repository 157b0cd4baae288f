"""FileTailer on damaged input read whole: a cut or corrupt .gz, an unreadable path. Never an exception."""

from __future__ import annotations

import errno
import gzip
import os
from pathlib import Path

import pytest

from kvset.sources.tail import FileTailer, TailEvent

LINES = [f"line {i:05d} " + "x" * (i % 97) for i in range(4000)]
TEXT = ("\n".join(LINES) + "\n").encode()


def read_whole(path: Path, **kw) -> tuple[list[tuple[int, bytes]], list[TailEvent], int]:
    t = FileTailer(path, follow=False, **kw)
    lines: list[tuple[int, bytes]] = []
    events: list[TailEvent] = []
    for calls in range(1, 10_000):
        r = t.read()
        lines += r.lines
        events += r.events
        if r.finished:
            assert t.read().finished  # and stays finished
            return lines, events, calls
    raise AssertionError("the whole-file read never finished")


def test_a_gzip_cut_in_the_middle_keeps_the_lines_before_the_cut(tmp_path: Path) -> None:
    whole = gzip.compress(TEXT, mtime=0)
    p = tmp_path / "cut.log.gz"
    p.write_bytes(whole[: len(whole) // 2])
    lines, events, _ = read_whole(p)
    assert [e.kind for e in events] == ["read-error"]
    assert "input ends early" in events[0].text and str(p) in events[0].text
    assert [n for n, _ in lines] == list(range(1, len(lines) + 1))
    # every complete line before the cut, then the cut line itself (flushed as it was)
    full = [line.encode() for line in LINES]
    *complete, last = [b for _, b in lines]
    assert len(complete) > len(LINES) // 4
    assert complete == full[: len(complete)]
    assert full[len(complete)].startswith(last)


@pytest.mark.parametrize("max_bytes", [1 << 10, 4 << 20])
def test_the_cut_is_found_whatever_the_read_size(tmp_path: Path, max_bytes: int) -> None:
    whole = gzip.compress(TEXT, mtime=0)
    p = tmp_path / "cut.gz"
    p.write_bytes(whole[: len(whole) * 3 // 4])
    lines, events, _ = read_whole(p, max_bytes=max_bytes)
    assert len(lines) > len(LINES) // 2 and [e.kind for e in events] == ["read-error"]


def test_a_corrupt_gzip_stream_is_a_read_error(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(TEXT, mtime=0))
    mid = len(data) // 2
    data[mid : mid + 64] = bytes(64)  # zeroed sectors inside the deflate stream
    p = tmp_path / "zeroed.gz"
    p.write_bytes(bytes(data))
    lines, events, _ = read_whole(p)
    assert [e.kind for e in events] == ["read-error"]
    assert "gzip" in events[0].text
    full = [line.encode() for line in LINES]
    assert [b for _, b in lines][:10] == full[:10]


def test_a_plain_file_named_gz_and_trailing_garbage(tmp_path: Path) -> None:
    p = tmp_path / "plain.gz"
    p.write_bytes(TEXT)
    lines, events, _ = read_whole(p)
    assert lines == [] and [e.kind for e in events] == ["read-error"]
    q = tmp_path / "garbage.gz"
    q.write_bytes(gzip.compress(b"a\nb\n", mtime=0) + b"not gzip")
    lines, events, _ = read_whole(q)
    assert [b for _, b in lines] == [b"a", b"b"] and [e.kind for e in events] == ["read-error"]


def test_an_unreadable_path_read_whole_finishes_with_the_error(tmp_path: Path) -> None:
    # A directory passes the exists() check but cannot be read; the read used to wait forever.
    lines, events, calls = read_whole(tmp_path)
    assert lines == [] and [e.kind for e in events] == ["read-error"] and calls == 1
    if os.geteuid() != 0:  # root reads anything
        p = tmp_path / "secret.log"
        p.write_bytes(b"a\n")
        p.chmod(0)
        lines, events, _ = read_whole(p)
        assert lines == [] and [e.kind for e in events] == ["read-error"]


def test_a_read_failure_while_following_is_reported_and_reading_goes_on(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"one\n")
    t = FileTailer(p, follow=True)
    assert [b for _, b in t.read().lines] == [b"one"]
    real = t._fh

    class FailingDisk:
        def read(self, n: int) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

        def __getattr__(self, name: str):
            return getattr(real, name)

    t._fh = FailingDisk()
    r = t.read()
    assert [e.kind for e in r.events] == ["read-error"] and "Input/output error" in r.events[0].text
    assert t.read().events == []  # the same failure again is not a new event
    t._fh = real
    with open(p, "ab") as f:
        f.write(b"two\n")
    assert [b for _, b in t.read().lines] == [b"two"]
    t.close()
