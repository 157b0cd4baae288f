"""Chunks of whole trace lines as bytes -> requests, through the byte scanner where it can, msgspec where not.

The scanner (kvset.formats.scan) reads the common hash-id lines straight into arrays; a line it
cannot take goes, with its neighbours of the same kind, to TraceLineParser.feed_lines, in line
order, so rejections, warnings and their line numbers are the msgspec path's own. Token-id
traces, and the lines before the format is known, take the msgspec path whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from kvset.formats.byte_input import INFLATE_ERRORS, INPUT_ENDS_EARLY, TraceError
from kvset.formats.parsed_requests import ParsedRequests
from kvset.formats.scan import END, count_mismatches, line_end, scan_lines, split_tokens_into
from kvset.formats.trace_lines import TIME_UNITS_PER_SECOND, TraceLineParser
from kvset.units import FLOOR

CHUNK_BYTES = 4 << 20  # decompressed bytes per chunk: whole lines, however many
_PIECE = 1 << 16  # bytes per read() inside a chunk
_BOM = b"\xef\xbb\xbf"
_MIN_REQUEST_BYTES = 30  # the shortest line the scanner takes: {"input_length":0,"hash_ids":[0]}


def _ready(parser: TraceLineParser) -> bool:
    """Whether the scanner may read on: a hash-id format is known (and checked, when it was given)."""
    return parser.format in ("mooncake", "bailian") and parser.format_settled


def _split_lines(data: bytes) -> list[bytes]:
    """Lines as a binary file's line iterator gives them: split at b"\\n" only, newline kept."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    if data.endswith(b"\n"):
        lines.pop()
    else:
        lines[-1] = lines[-1][:-1]
    return lines


class _Run:
    """Requests the scanner read, in arrays sized for a chunk (reused from chunk to chunk: what is
    handed on is copied out)."""

    def __init__(self, size: int = 0) -> None:
        self.size = size
        self.keys = np.empty(size // 2 + 1, dtype=np.uint64)
        requests = size // _MIN_REQUEST_BYTES + 2
        self.counts = np.empty(requests, dtype=np.int64)
        self.input_lengths = np.empty(requests, dtype=np.int64)
        self.stamps = np.empty(requests, dtype=np.float64)
        self.lines = np.empty(requests, dtype=np.int64)

    def requests(self, parser: TraceLineParser, k0: int, k1: int, r0: int, r1: int) -> ParsedRequests:
        """Requests r0..r1 (keys k0..k1) as the msgspec path would give them, warnings included."""
        block = parser.block_size
        assert block is not None
        counts, lengths = self.counts[r0:r1], self.input_lengths[r0:r1]
        tokens = np.empty(k1 - k0, dtype=np.int32)
        split_tokens_into(counts, lengths, block, tokens)
        lines = self.lines[r0:r1].copy()
        bad = count_mismatches(counts, lengths, block, parser.convention == FLOOR)
        for n, r in enumerate(bad):
            if n == parser.warnings.keep_examples and not parser.strict:
                parser.count_mismatches(block, len(bad) - n)  # beyond the examples kept, only the count
                break
            parser.warn_mismatch(block, int(lines[r]), int(counts[r]), int(lengths[r]))
        starts = np.zeros(r1 - r0, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        return ParsedRequests(
            keys=self.keys[k0:k1].copy(),
            tokens=tokens,
            request_starts=starts,
            request_timestamps=self.stamps[r0:r1] / TIME_UNITS_PER_SECOND[parser.format or "mooncake"],
            request_lines=lines,
            request_input_lengths=lengths.copy(),
        )


def feed_bytes(
    parser: TraceLineParser, data: bytes | memoryview, first_lineno: int, scratch: _Run | None = None
) -> tuple[ParsedRequests, int]:
    """Parse whole lines (the last may lack its newline); line i of data has number first_lineno + i.
    Returns the requests and the number of lines. scratch: arrays of an earlier call to reuse."""
    buf = np.frombuffer(data, dtype=np.uint8)
    end = len(buf)
    pos, lineno = 0, first_lineno
    parts: list[ParsedRequests] = []
    while pos < end and not _ready(parser) and parser.format != "tokens":
        stop = line_end(buf, pos, end)
        parts.append(parser.feed_lines([bytes(data[pos : stop + 1])], lineno))
        pos, lineno = stop + 1, lineno + 1
    if pos < end and parser.format == "tokens":
        rest = _split_lines(bytes(data[pos:]))
        parts.append(parser.feed_lines(rest, lineno))
        return ParsedRequests.concat(parts), lineno + len(rest) - first_lineno
    run = scratch if scratch is not None and scratch.size >= end - pos else _Run(end - pos)
    units = TIME_UNITS_PER_SECOND[parser.format or "mooncake"]
    pending: list[bytes] = []  # consecutive lines for the msgspec path
    pending_first = 0
    n_keys = n_req = 0
    while pos < end:
        reason, stop, lines, k1, r1 = scan_lines(
            buf,
            pos,
            end,
            units,
            lineno,
            run.keys,
            n_keys,
            run.counts,
            run.input_lengths,
            run.stamps,
            run.lines,
            n_req,
        )
        if pending and lines:  # the msgspec lines came first
            parts.append(parser.feed_lines(pending, pending_first))
            pending = []
        if r1 > n_req:
            parts.append(run.requests(parser, n_keys, k1, n_req, r1))
        n_keys, n_req, pos, lineno = k1, r1, stop, lineno + lines
        if reason == END:
            break
        stop = line_end(buf, pos, end)
        if not pending:
            pending_first = lineno
        pending.append(bytes(data[pos : stop + 1]))
        pos, lineno = stop + 1, lineno + 1
    if pending:
        parts.append(parser.feed_lines(pending, pending_first))
    return ParsedRequests.concat(parts), lineno - first_lineno


class _Chunks:
    """Whole lines of a stream, about chunk_bytes at a time, read in place into one buffer.

    Each view handed out is valid until the next one is asked for (the buffer is reused: no
    fresh pages per chunk, no copies but the partial last line's)."""

    def __init__(self, stream: BinaryIO, chunk_bytes: int) -> None:
        self.stream = stream
        self._use(bytearray(chunk_bytes))
        self.filled = 0
        self.failure: Exception | None = None

    def _use(self, buffer: bytearray) -> None:
        self.buffer = buffer
        self.view = memoryview(buffer)

    def _read_into(self, view: memoryview) -> int:
        readinto = getattr(self.stream, "readinto", None)
        if readinto is not None:
            return readinto(view)
        data = self.stream.read(len(view))  # a file object with read() only
        view[: len(data)] = data
        return len(data)

    def _fill(self) -> int:
        """Read into the free end of the buffer in pieces; returns the bytes read. A truncated gzip
        hands out all it can inflate before its error (kvset.formats.byte_input)."""
        got = 0
        at_end = False
        while self.filled < len(self.buffer):
            try:
                n = self._read_into(self.view[self.filled : self.filled + _PIECE])
            except INFLATE_ERRORS as e:
                self.failure = e
                break
            if not n and at_end:
                break
            at_end = not n  # a truncated gzip tells its damage on the read after its end: ask once more
            self.filled += n
            got += n
        return got

    def __iter__(self) -> Iterator[memoryview]:
        first = True
        while True:
            got = self._fill()
            start = len(_BOM) if first and self.buffer.startswith(_BOM) else 0
            first = False
            ended = self.failure is not None or got == 0
            cut = self.buffer.rfind(b"\n", start, self.filled) + 1
            if ended and self.failure is None:
                cut = self.filled  # the end: a last line without its newline
            elif not cut and self.filled == len(self.buffer):  # a line longer than the buffer: double it
                grown = bytearray(2 * len(self.buffer))
                grown[: self.filled] = self.buffer
                self._use(grown)
                continue
            if cut > start:
                yield self.view[start:cut]
            rest = self.filled - max(cut, start)
            self.buffer[:rest] = self.buffer[self.filled - rest : self.filled]  # same size: no resize
            self.filled = rest
            if ended:
                return


def read_chunks(
    stream: BinaryIO, parser: TraceLineParser, chunk_bytes: int | None = None
) -> Iterator[tuple[ParsedRequests, int]]:
    """(requests, lines read so far) per chunk of about chunk_bytes of whole lines.

    A truncated or corrupt gzip tail ends the input visibly, after the whole lines before it.
    """
    chunks = _Chunks(stream, chunk_bytes or CHUNK_BYTES)
    scratch = _Run(len(chunks.buffer))
    lines = 0
    for data in chunks:
        if scratch.size < len(data):
            scratch = _Run(len(data))
        parsed, n = feed_bytes(parser, data, lines + 1, scratch)
        lines += n
        yield parsed, lines
    if chunks.failure is not None:
        detail = f"line {lines + 1}: input ends here ({chunks.failure})"
        if parser.strict:
            raise TraceError(detail) from chunks.failure
        parser.rejects.reject(INPUT_ENDS_EARLY, detail)
