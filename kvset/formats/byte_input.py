"""Open a trace as a binary line stream: a path, `-` for stdin, or a binary file object.

Gzip is recognised by its magic bytes, not by the file name, so `zcat`-less pipes
(`cat trace.jsonl.gz | kvset analyze -`) work too. It is inflated by ISA-L (python-isal's
isal_zlib: 2.5x zlib's speed on our traces, benchmarks/large.py) where installed, else by zlib.
"""

from __future__ import annotations

import contextlib
import io
import sys
import types
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

_inflate_module: types.ModuleType  # isal's isal_zlib, else zlib: the same decompressobj
try:
    from isal import isal_zlib as _isal_zlib
    from isal.igzip_lib import IsalError as _IsalError

    _inflate_module = _isal_zlib

    IsalError: type[Exception] = _IsalError  # type: ignore[assignment]  # a class; isal's stubs say an instance
except ImportError:  # pragma: no cover - isal is a dependency; zlib does the same, slower
    _inflate_module = zlib
    IsalError = zlib.error

GZIP_MAGIC = b"\x1f\x8b"
# what reading a damaged gzip stream raises (gzip.BadGzipFile is an OSError)
INFLATE_ERRORS = (EOFError, OSError, zlib.error, IsalError)
# the rejection that says the input stopped before its end: the figures are of a part (kvset.offline)
INPUT_ENDS_EARLY = "input ends early (truncated or corrupt data)"
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
        return io.BufferedReader(_Inflating(stream), _BUFFER)
    return stream


GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate stream
TRUNCATED = "Compressed file ended before the end-of-stream marker was reached"
_COMPRESSED_PIECE = 1 << 16  # read a little at a time: what inflating leaves of it is copied each call


class _Inflating(io.RawIOBase):
    """The inflated bytes of a gzip stream (one member or several, as `cat a.gz b.gz` makes).

    Unlike GzipFile, whose read() raises at a truncated tail and so drops what it had inflated in that
    call, every byte that can be inflated is handed out first, then an end of file, and any read after
    that raises EOFError (a corrupt member: zlib's error at once), so a truncated file loses only its
    last partial line. A reader that stops at the first end asks once more (kvset.formats.traces)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._inflate = _inflate_module.decompressobj(GZIP_WBITS)
        self._input = b""
        self._in_member = False  # bytes of the current member were read: its end must come
        self._done = False
        self._truncated = False  # the end of a truncated member was reported once: raise from now on

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        while not self._done:
            if not self._in_member:
                self._input = self._input.lstrip(b"\0")  # zeros padding the file after a member
            if not self._input:
                self._input = self._stream.read(_COMPRESSED_PIECE)
                if not self._input:
                    if self._in_member:
                        # an end first, so that a buffered reader hands out what it holds; then the error
                        if self._truncated:
                            raise EOFError(TRUNCATED)
                        self._truncated = True
                        return 0
                    self._done = True
                    break
                continue
            self._in_member = True
            out = self._inflate.decompress(self._input, len(view))
            self._input = self._inflate.unconsumed_tail
            if self._inflate.eof:  # the member ended: another may follow
                self._input = self._inflate.unused_data + self._input
                self._inflate = _inflate_module.decompressobj(GZIP_WBITS)
                self._in_member = False
            if out:
                view[: len(out)] = out
                return len(out)
        return 0


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
