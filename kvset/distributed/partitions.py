"""Where a distributed analysis's partitions come from: files in time order, a folder, or one large
file cut into byte ranges at line boundaries; and the bounded reader a worker reads its range with.

A partition owns the lines that begin inside its byte range [start, end): the worker skips to the
first line beginning at or after `start` and stops at the first beginning at or after `end`, so
consecutive ranges give every line once, whatever the cut points, without the client reading the
file to find them.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

from kvset.formats.byte_input import GZIP_MAGIC

_SCAN = 1 << 16  # bytes read at a time while looking for a line's end


class PartitionError(Exception):
    """Inputs that cannot be cut into partitions: the command prints it and exits with code 2."""


@dataclass(frozen=True)
class Partition:
    """One worker's share of the input: a whole file (end None) or the lines beginning in [start, end)."""

    index: int
    path: str
    start: int = 0
    end: int | None = None

    def describe(self) -> str:
        if self.end is None:
            return self.path
        return f"{self.path} bytes {self.start:,}-{self.end:,}"


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def _files_of(arg: str) -> list[str]:
    p = Path(arg)
    if arg == "-":
        raise PartitionError("stdin cannot be shared among workers: give files")
    if p.is_dir():
        files = sorted(str(f) for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        if not files:
            raise PartitionError(f"{arg} is a folder without files")
        return files
    if not p.exists():
        raise PartitionError(f"no such file: {arg}")
    return [arg]


def plan_partitions(inputs: list[str], partitions: int) -> tuple[list[Partition], str]:
    """The partitions of the inputs, in stream order, and how they were cut (for the report).

    Several files (or a folder's, in name order): one partition each, in the order given. One file:
    `partitions` byte ranges of about equal size (a gzip file cannot be cut: it is one)."""
    files = [f for arg in inputs for f in _files_of(arg)]
    if len(files) > 1:
        return [Partition(i, f) for i, f in enumerate(files)], f"{len(files)} files in the order given"
    path = files[0]
    size = os.path.getsize(path)
    if partitions <= 1 or size == 0:
        return [Partition(0, path)], "one partition"
    if _is_gzip(path):
        raise PartitionError(
            f"{path} is gzip-compressed: one compressed file cannot be cut into byte ranges "
            "(decompress it, or give several files)"
        )
    count = max(1, min(partitions, size))
    bounds = [size * k // count for k in range(count + 1)]
    parts = [Partition(k, path, bounds[k], bounds[k + 1]) for k in range(count)]
    return parts, f"{count} byte ranges of one file, cut at line boundaries"


def _line_start_at_or_after(f: io.BufferedReader, offset: int) -> int:
    """The first byte offset >= `offset` that begins a line (the file's size if none)."""
    if offset <= 0:
        return 0
    f.seek(offset - 1)
    pos = offset - 1
    while True:
        block = f.read(_SCAN)
        if not block:
            return pos
        nl = block.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(block)


class _RangeReader(io.RawIOBase):
    """The bytes [lo, hi) of a file, as a raw stream."""

    def __init__(self, f: io.BufferedReader, lo: int, hi: int) -> None:
        self._f = f
        self._left = hi - lo
        f.seek(lo)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        n = self._f.readinto(view[: min(len(view), self._left)])
        self._left -= n or 0
        return n or 0

    def close(self) -> None:
        self._f.close()
        super().close()


def open_partition(part: Partition) -> tuple[io.BufferedReader, int]:
    """A binary stream of the partition's lines (the caller closes it), and their size in bytes."""
    f = open(part.path, "rb")  # noqa: SIM115 - closed with the range reader
    if part.end is None:
        return f, os.fstat(f.fileno()).st_size
    lo = _line_start_at_or_after(f, part.start)
    hi = _line_start_at_or_after(f, part.end)
    hi = max(lo, hi)
    return io.BufferedReader(_RangeReader(f, lo, hi), 1 << 20), hi - lo


def group_runs(parts: list[Partition], runs: int) -> list[list[Partition]]:
    """The partitions cut into at most `runs` runs of consecutive ones, of about equal bytes (a run is
    one task: its worker analyses them in order and merges them before anything is sent)."""
    sizes = [(p.end - p.start) if p.end is not None else os.path.getsize(p.path) for p in parts]
    total = sum(sizes)
    out: list[list[Partition]] = []
    last = -1  # the run of the previous partition
    before = 0
    for k, (part, size) in enumerate(zip(parts, sizes, strict=True)):
        # the run of the partition's middle byte (by count when every partition is empty)
        run = min(runs - 1, (2 * before + size) * runs // (2 * total)) if total else k * runs // len(parts)
        before += size
        if run > last:
            out.append([part])
            last = run
        else:
            out[-1].append(part)
    return out
