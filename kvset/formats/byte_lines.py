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

from kvset.formats.byte_input import INFLATE_ERRORS, TraceError
from kvset.formats.scan import END, count_mismatches, line_end, scan_lines, split_tokens_into
from kvset.formats.trace_lines import TIME_UNITS_PER_SECOND, ParsedRequests, TraceLineParser

CHUNK_BYTES = 4 << 20  # decompressed bytes per chunk: whole lines, however many
_PIECE = 1 << 16  # bytes per read() inside a chunk
_BOM = b"\xef\xbb\xbf"
_MIN_REQUEST_BYTES = 30  # the shortest line the scanner takes: {"input_length":0,"hash_ids":[0]}


def _ready(parser: TraceLineParser) -> bool:
    """Whether the scanner may read on: the format is known (and checked, when it was given)."""
    return parser.format in ("mooncake", "bailian") and (parser._looked or not parser.format_given)


def _split_lines(data: bytes) -> list[bytes]:
    """Lines as a binary file's line iterator gives them: split at b"\\n" only, newline kept."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    if data.endswith(b"\n"):
        lines.pop()
    else:
        lines[-1] = lines[-1][:-1]
    return lines


class _Run:
    """Requests the scanner read, in arrays sized for one chunk."""

    def __init__(self, size: int) -> None:
        self.keys = np.empty(size // 2 + 1, dtype=np.uint64)
        requests = size // _MIN_REQUEST_BYTES + 2
        self.counts = np.empty(requests, dtype=np.int64)
        self.input_lengths = np.empty(requests, dtype=np.int64)
        self.stamps = np.empty(requests, dtype=np.float64)
        self.lines = np.empty(requests, dtype=np.int64)

    def requests(self, parser: TraceLineParser, k0: int, k1: int, r0: int, r1: int) -> ParsedRequests:
        """Requests r0..r1 (keys k0..k1) as the msgspec path would give them, warnings included."""
        block = parser.block_tokens
        assert block is not None
        counts, lengths = self.counts[r0:r1], self.input_lengths[r0:r1]
        tokens = np.empty(k1 - k0, dtype=np.int32)
        split_tokens_into(counts, lengths, block, tokens)
        lines = self.lines[r0:r1].copy()
        bad = count_mismatches(counts, lengths, block)
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


def feed_bytes(parser: TraceLineParser, data: bytes, first_lineno: int) -> ParsedRequests:
    """Parse whole lines (the last may lack its newline); line i of data has number first_lineno + i."""
    buf = np.frombuffer(data, dtype=np.uint8)
    end = len(buf)
    pos, lineno = 0, first_lineno
    parts: list[ParsedRequests] = []
    while pos < end and not _ready(parser) and parser.format != "tokens":
        stop = line_end(buf, pos, end)
        parts.append(parser.feed_lines([data[pos : stop + 1]], lineno))
        pos, lineno = stop + 1, lineno + 1
    if pos < end and parser.format == "tokens":
        parts.append(parser.feed_lines(_split_lines(data[pos:]), lineno))
        return ParsedRequests.concat(parts)
    run = _Run(end - pos) if pos < end else None
    units = TIME_UNITS_PER_SECOND[parser.format or "mooncake"]
    pending: list[bytes] = []  # consecutive lines for the msgspec path
    pending_first = 0
    n_keys = n_req = 0
    while pos < end:
        assert run is not None
        reason, stop, lines, k1, r1 = scan_lines(buf, pos, end, units, lineno, run.keys, n_keys, run.counts,
                                                 run.input_lengths, run.stamps, run.lines, n_req)  # fmt: skip
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
        pending.append(data[pos : stop + 1])
        pos, lineno = stop + 1, lineno + 1
    if pending:
        parts.append(parser.feed_lines(pending, pending_first))
    return ParsedRequests.concat(parts)


def _read(stream: BinaryIO, size: int) -> tuple[bytes, Exception | None]:
    """About size bytes, in pieces: a corrupt tail loses only the piece it is in, as a line reader would."""
    pieces: list[bytes] = []
    got = 0
    while got < size:
        try:
            piece = stream.read(min(_PIECE, size - got))
        except INFLATE_ERRORS as e:
            return b"".join(pieces), e
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return b"".join(pieces), None


def iter_byte_chunks(stream: BinaryIO, parser: TraceLineParser, chunk_bytes: int | None = None) -> Iterator[tuple[bytes, int, int]]:
    """(whole lines, number of the first, how many) per chunk of about chunk_bytes.

    A truncated or corrupt gzip tail ends the input visibly, after the whole lines before it.
    """
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    lineno = 1
    rest = b""
    first = True
    while True:
        block, failure = _read(stream, chunk_bytes)
        if first and block.startswith(_BOM):
            block = block[len(_BOM) :]
        first = False
        data = rest + block if rest else block
        if failure is None and not block:  # the end: a last line without its newline
            if data:
                yield data, lineno, 1
            return
        cut = data.rfind(b"\n") + 1
        if failure is not None:
            data, cut = data[:cut], cut  # a partial last line is lost, as a line reader loses it
        if cut:
            n = data.count(b"\n", 0, cut)
            yield data[:cut], lineno, n
            lineno += n
        rest = data[cut:]
        if failure is not None:
            detail = f"line {lineno}: input ends here ({failure})"
            if parser.strict:
                raise TraceError(detail) from failure
            parser.rejects.reject("input ends early (truncated or corrupt data)", detail)
            return
