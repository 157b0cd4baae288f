"""Read a whole trace file (Mooncake, Bailian or token-id JSONL) into numpy arrays in timestamp order.

Built on TraceLineParser (the same code path a tailing source uses), one chunk of lines at a time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np

from kvset.formats.block_size import blocks_of, check_block_size, settle
from kvset.formats.byte_input import (
    GZIP_MAGIC,
    INFLATE_ERRORS,
    INPUT_ENDS_EARLY,
    TraceError,
    open_trace_input,
)
from kvset.formats.byte_lines import read_chunks
from kvset.formats.parsed_requests import ParsedRequests, RequestArrays, split_tokens
from kvset.formats.trace_lines import FORMATS, TraceLineParser, detect_format
from kvset.quantities import plural
from kvset.rejects import RejectCounter
from kvset.types import AccessBatch, PrincipalNames
from kvset.units import DEFAULT_HASH_ALGO, StreamUnits

__all__ = [
    "FORMATS",
    "ParsedRequests",
    "Trace",
    "TraceError",
    "TraceLineParser",
    "detect_format",
    "read_trace",
]

CHUNK_LINES = 8192
_BOM = b"\xef\xbb\xbf"


@dataclass(eq=False)
class Trace(RequestArrays):
    """Every block access of a trace, requests in timestamp order (stable), accesses in request order."""

    format: str
    units: StreamUnits  # tokens per full block, where that came from, the convention or the hash
    keys: np.ndarray  # uint64, one per access
    tokens: np.ndarray  # int32, tokens each access covers
    request_starts: np.ndarray  # int64 index into keys where each request starts
    request_timestamps: np.ndarray  # float64 seconds, one per request, non-decreasing
    lines: int  # lines read, blank and rejected ones included
    rejects: RejectCounter  # lines dropped, by reason, with line numbers
    notes: list[str]  # what the reader decided that the user should know
    warnings: RejectCounter = field(default_factory=RejectCounter)  # requests kept despite a doubtful field
    request_lines: np.ndarray | None = None  # int64 line number of each request (same order)
    # each request's principal ids (kvset.formats.parsed_requests.ParsedRequests), None: none named
    request_principals: np.ndarray | None = None
    principal_names: PrincipalNames | None = None
    parse_seconds: float = 0.0

    @property
    def block_size(self) -> int:
        return self.units.block_size

    def access_timestamps(self) -> np.ndarray:
        """float64 seconds per access: each access at its request's time."""
        return np.repeat(self.request_timestamps, self.request_lengths())

    def batches(self, max_accesses: int = 1 << 20) -> Iterator[AccessBatch]:
        """Whole requests per batch, at most max_accesses each (a longer request gets a batch of its own)."""
        if max_accesses <= 0:
            raise ValueError("max_accesses must be positive")
        bounds = np.append(self.request_starts, len(self.keys))
        lengths = np.diff(bounds)
        first = 0
        while first < self.requests:
            begin = int(bounds[first])
            end_request = int(np.searchsorted(bounds, begin + max_accesses, side="right")) - 1
            end_request = min(max(end_request, first + 1), self.requests)
            end = int(bounds[end_request])
            principals = self.request_principals
            yield AccessBatch(
                principals=None
                if principals is None
                else np.repeat(principals[first:end_request], lengths[first:end_request], axis=0),
                principal_names=self.principal_names if principals is not None else None,
                keys=self.keys[begin:end],
                tokens=self.tokens[begin:end],
                request_starts=self.request_starts[first:end_request] - begin,
                timestamps=np.repeat(self.request_timestamps[first:end_request], lengths[first:end_request]),
                block_size=self.block_size,
            )
            first = end_request


def _iter_chunks(
    stream: BinaryIO, parser: TraceLineParser, chunk_lines: int
) -> Iterator[tuple[list[bytes], int]]:
    """(lines, number of the first) per chunk. A truncated or corrupt gzip tail ends the input visibly."""
    lines_iter = iter(stream)
    lineno = 1
    while True:
        chunk: list[bytes] = []
        failure: Exception | None = None
        try:
            for line in lines_iter:
                chunk.append(line)
                if len(chunk) >= chunk_lines:
                    break
        except INFLATE_ERRORS as e:
            failure = e
        if failure is None and len(chunk) < chunk_lines:
            failure = _damage_after_end(stream)
        if failure is not None and chunk and not chunk[-1].endswith(b"\n"):
            chunk.pop()  # the line the damage cut: not a request
        if lineno == 1 and chunk and chunk[0].startswith(_BOM):
            chunk[0] = chunk[0][len(_BOM) :]
        if chunk:
            yield chunk, lineno
            lineno += len(chunk)
        if failure is not None:
            detail = f"line {lineno}: input ends here ({failure})"
            if parser.strict:
                raise TraceError(detail) from failure
            parser.rejects.reject(INPUT_ENDS_EARLY, detail)
            return
        if len(chunk) < chunk_lines:
            return


def _damage_after_end(stream: BinaryIO) -> Exception | None:
    """A truncated gzip gives an end of file first, then its error (kvset.formats.byte_input): ask once
    more at the end, so that the damage is told and not taken for the file's end."""
    try:
        stream.read(1)
    except INFLATE_ERRORS as e:
        return e
    return None


def _fill_missing_times(stamps: np.ndarray) -> int:
    """A request without a timestamp takes its predecessor's (the first valid one for leading requests),
    so it keeps its place in line order. Returns how many were filled."""
    missing = np.isnan(stamps)
    n = int(missing.sum())
    if n == 0:
        return 0
    if n == len(stamps):
        stamps[:] = 0.0
        return n
    index = np.where(missing, 0, np.arange(len(stamps)))
    np.maximum.accumulate(index, out=index)
    first_valid = int(np.argmax(~missing))
    index[:first_valid] = first_valid
    stamps[:] = stamps[index]
    return n


def _sort_by_time(parsed: ParsedRequests, stamps: np.ndarray) -> tuple[ParsedRequests, np.ndarray, bool]:
    """Requests in stable timestamp order; keys and tokens move with their request."""
    if len(stamps) < 2 or bool(np.all(stamps[1:] >= stamps[:-1])):
        return parsed, stamps, False
    order = np.argsort(stamps, kind="stable")
    return parsed.reordered(order), stamps[order], True


def read_trace(
    source: str | Path | BinaryIO,
    format: str | None = None,
    block_size: int | None = None,
    strict: bool = False,
    hash_algo: str = DEFAULT_HASH_ALGO,
    python_hash_seed: str | None = None,
    chunk_lines: int = CHUNK_LINES,
    byte_scanner: bool = True,
) -> Trace:
    """Read a trace file (path, `-` for stdin, or a binary file object; gzip detected by content).

    format: mooncake | bailian | tokens, or None to detect it from the first valid line.
    block_size: tokens per block (default: the format's, or as the lines say: kvset.formats.block_size).
    Raises TraceError when nothing usable is in the input, when no block size fits the lines (the
    error names the fix), or on the first bad line with strict=True.
    byte_scanner: read the common hash-id lines with the byte scanner (False: every line through
    msgspec, chunk_lines at a time; the results are the same).
    """
    started = time.perf_counter()
    parser = TraceLineParser(format, block_size, strict, hash_algo, python_hash_seed)
    parts: list[ParsedRequests] = []
    lines = 0
    with open_trace_input(source) as stream:
        if byte_scanner:
            for parsed_chunk, lines_read in read_chunks(stream, parser):
                parts.append(parsed_chunk)
                lines = lines_read
        else:
            for chunk, first_lineno in _iter_chunks(stream, parser, chunk_lines):
                parts.append(parser.feed_lines(chunk, first_lineno))
                lines = first_lineno + len(chunk) - 1
    parsed = ParsedRequests.concat(parts)
    if isinstance(source, str | Path):
        name = "stdin" if str(source) == "-" else str(source)
    else:
        name = str(getattr(source, "name", "the input stream"))
    if parsed.requests == 0:
        raise no_request_error(name, lines, parser)
    assert parser.format is not None and parser.block_size is not None
    notes = list(parser.notes)
    if format is not None:
        notes.insert(0, f"format {format} (given)")
    warnings = parser.warnings
    if parser.format != "tokens":
        parsed, warnings = _settle_block_size(parsed, parser, block_size is not None, notes)
    units = parser.units
    assert units is not None
    notes.append(units.describe())
    stamps = parsed.request_timestamps.copy()
    filled = _fill_missing_times(stamps)
    if filled:
        notes.append(f"{filled} requests had no timestamp; each takes its predecessor's time (line order)")
    parsed, stamps, reordered = _sort_by_time(parsed, stamps)
    if reordered:
        notes.append("requests were not in timestamp order; sorted by timestamp (stable)")
    notes += warning_notes(warnings)
    return Trace(
        format=parser.format,
        units=units,
        keys=parsed.keys,
        tokens=parsed.tokens,
        request_starts=parsed.request_starts,
        request_timestamps=stamps,
        lines=lines,
        rejects=parser.rejects,
        notes=notes,
        warnings=warnings,
        request_lines=parsed.request_lines,
        request_principals=parsed.request_principals,
        principal_names=parser.principal_names,
        parse_seconds=time.perf_counter() - started,
    )


def no_request_error(name: str, lines: int, parser: TraceLineParser) -> TraceError:
    why = (
        parser.rejects.describe()
        if parser.rejects
        else "the input is empty"
        if lines == 0
        else "no line is a request"
    )
    if _named_gzip_but_not(name):  # random bytes called .gz: say that first, not only "not JSON"
        return TraceError(f"{name} is named .gz but is not gzip (it does not start with 1f 8b)\n{why}")
    return TraceError(f"no valid request in {name} ({plural(lines, 'line')} read)\n{why}")


def _named_gzip_but_not(name: str) -> bool:
    if not name.endswith(".gz"):
        return False
    try:
        with open(name, "rb") as f:
            return f.read(2) != GZIP_MAGIC
    except OSError:
        return False


def warning_notes(warnings: RejectCounter) -> list[str]:
    """One note per reason for the requests kept despite a doubtful field."""
    return [f"{w.count} requests: {w.reason} ({'; '.join(w.examples[:3])})" for w in warnings.summary()]


def _settle_block_size(
    parsed: ParsedRequests, parser: TraceLineParser, given: bool, notes: list[str]
) -> tuple[ParsedRequests, RejectCounter]:
    """Check the block size and convention against the lines (kvset.formats.block_size.settle): take
    the ones they keep, or refuse the read with the fix (NoBlockSizeFits, a TraceError): a silent
    wrong token hit rate is worse than no answer. Returns the requests and their warnings."""
    block, convention = parser.block_size, parser.convention
    assert block is not None
    settled = settle(check_block_size(parsed.request_input_lengths, parsed.request_lengths(), block), given)
    if settled.note:
        notes.append(settled.note)
    parser.settle(settled.block_size, settled.convention, settled.inferred)
    if (settled.block_size, settled.convention) == (block, convention):
        return parsed, parser.warnings
    parser.warnings = RejectCounter()
    recount_mismatches(parsed, parser)
    return (
        with_block_size(parsed, settled.block_size) if settled.block_size != block else parsed
    ), parser.warnings


def recount_mismatches(parsed: ParsedRequests, parser: TraceLineParser) -> None:
    """Count again, against the parser's block size and convention now, the requests whose hash-id
    count breaks the rule (the first few with their lines, then the count)."""
    block = parser.block_size
    assert block is not None
    counts, lengths = parsed.request_lengths(), parsed.request_input_lengths
    broken = np.flatnonzero((lengths >= 0) & (blocks_of(lengths, block, parser.convention) != counts))
    keep = parser.warnings.keep_examples
    for i in broken[:keep]:
        parser.warn_mismatch(
            block, int(parsed.request_lines[i]), int(counts[i]), int(lengths[i]), strict=False
        )
    if len(broken) > keep:
        parser.count_mismatches(block, len(broken) - keep)


def with_block_size(parsed: ParsedRequests, block: int) -> ParsedRequests:
    """The requests with the tokens of `block`-token blocks, where the line left the block size to us."""
    counts = parsed.request_lengths()
    tokens = parsed.tokens.copy()
    redone = split_tokens(np.maximum(parsed.request_input_lengths, 0), counts, block)
    in_implied = np.repeat(parsed.request_input_lengths >= 0, counts)
    tokens[in_implied] = redone[in_implied]
    return replace(parsed, tokens=tokens)
