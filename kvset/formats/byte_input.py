"""Open a trace as a binary line stream: a path, `-` for stdin, or a binary file object.

Gzip is recognised by its magic bytes, not by the file name, so `zcat`-less pipes
(`cat trace.jsonl.gz | kvset analyze -`) work too. It is inflated by ISA-L (python-isal's
igzip: 2.5x zlib's speed on our traces, benchmarks/large.py) where installed, else by zlib.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

try:
    from isal import igzip as _igzip
    from isal.igzip_lib import IsalError as _IsalError

    IsalError: type[Exception] = _IsalError  # type: ignore[assignment]  # a class; isal's stubs say an instance
except ImportError:  # pragma: no cover - isal is a dependency; zlib does the same, slower
    _igzip = None  # type: ignore[assignment]  # no isal: gzip's own GzipFile below
    IsalError = zlib.error

GZIP_MAGIC = b"\x1f\x8b"
# what reading a damaged gzip stream raises (gzip.BadGzipFile is an OSError)
INFLATE_ERRORS = (EOFError, OSError, zlib.error, IsalError)
_BUFFER = 1 << 20


class TraceError(Exception):
    """A trace that cannot be read at all: missing file, no valid request, or a strict-mode rejection."""


class _PrefixedRaw(io.RawIOBase):
    """Gives back bytes already read from a stream that cannot peek, then the rest of the stream."""

    def __init__(self, prefix: bytes, rest: BinaryIO) -> None:
        self._prefix = prefix
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        if self._prefix:
            n = min(len(view), len(self._prefix))
            view[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._rest.read(len(view))
        if not data:
            return 0
        view[: len(data)] = data
        return len(data)


def _binary(stream: object) -> BinaryIO:
    if isinstance(stream, io.TextIOBase):
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            raise TraceError("a trace stream must be binary (got a text stream without a byte buffer)")
        return buffer
    return stream  # type: ignore[return-value]  # any object with read(): checked as it is read


def _ungzip(stream: BinaryIO) -> BinaryIO:
    peek = getattr(stream, "peek", None)
    if peek is not None:
        head = peek(2)[:2]
    else:
        head = stream.read(2)
        if not isinstance(head, bytes):
            raise TraceError("a trace stream must be binary (read() returned text)")
        stream = io.BufferedReader(_PrefixedRaw(head, stream), _BUFFER)
    if head == GZIP_MAGIC:
        if _igzip is not None:
            return _igzip.IGzipFile(fileobj=stream, mode="rb")  # type: ignore[return-value]  # a BinaryIO in all but name
        return gzip.GzipFile(fileobj=stream, mode="rb")
    return stream


@contextlib.contextmanager
def open_trace_input(source: str | Path | BinaryIO) -> Iterator[BinaryIO]:
    """Yield a binary stream of the (decompressed) trace lines. Closes only what it opened."""
    if isinstance(source, str | Path):
        if str(source) == "-":
            yield _ungzip(sys.stdin.buffer)
            return
        try:
            handle = open(source, "rb", buffering=_BUFFER)  # noqa: SIM115 - closed below
        except OSError as e:
            raise TraceError(f"cannot read {source}: {e.strerror or e}") from e
        with handle:
            yield _ungzip(handle)
        return
    yield _ungzip(_binary(source))
