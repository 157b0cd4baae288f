"""A trace file read as a stream of time-ordered access batches, in memory bounded by a chunk.

The same trace as read_trace() would give, in the same order, without holding it whole:
- the block size is settled on the first requests (as read_trace settles it on all of them) and
  checked again on all of them at the end;
- a request without a timestamp takes its predecessor's (the leading ones wait for the first);
- requests are sorted by time inside a reorder window of about one chunk (stable, as read_trace).
Where the end says the stream was read otherwise than read_trace would have (the block size the
whole trace keeps is not the one chosen early, or a request is earlier than one already handed
on), iterating raises NeedsWholeTrace and the caller reads the file whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from kvset.formats.block_size import CANDIDATES, MIN_REQUESTS, BlockSizeCheck, check_block_size
from kvset.formats.byte_input import TraceError, open_trace_input
from kvset.formats.byte_lines import read_chunks
from kvset.formats.trace_lines import ParsedRequests, TraceLineParser
from kvset.formats.traces import no_request_error, warning_notes, with_block_size
from kvset.rejects import RejectCounter
from kvset.types import AccessBatch


class NeedsWholeTrace(Exception):
    """The stream cannot give read_trace's order or block size: read the file whole (the reason says why)."""


class _Fits:
    """Requests that keep len(hash_ids) = ceil(input_length / b), per candidate b, over the whole stream."""

    def __init__(self, block: int) -> None:
        self.sizes = np.array([*CANDIDATES, block], dtype=np.int64)
        self.fits = np.zeros(len(self.sizes), dtype=np.int64)
        self.checked = 0

    def add(self, parsed: ParsedRequests) -> None:
        implied = parsed.request_input_lengths >= 0
        lengths, counts = parsed.request_input_lengths[implied], parsed.request_lengths()[implied]
        self.checked += len(lengths)
        if len(lengths):
            self.fits += (-(-lengths[None, :] // self.sizes[:, None]) == counts[None, :]).sum(axis=1)

    def check(self) -> BlockSizeCheck:
        """check_block_size's answer for every request seen (fit shares as it computes them)."""
        shares = self.fits / self.checked if self.checked else np.ones(len(self.sizes))
        i = int(np.argmax(shares[:-1]))  # ties: the smallest candidate
        return BlockSizeCheck(
            int(self.sizes[-1]), float(shares[-1]), CANDIDATES[i], float(shares[i]), self.checked
        )


def _stamped(parsed: ParsedRequests, stamps: np.ndarray, block_tokens: int) -> AccessBatch:
    return AccessBatch(
        keys=parsed.keys,
        tokens=parsed.tokens,
        request_starts=parsed.request_starts,
        timestamps=np.repeat(stamps, parsed.request_lengths()),
        block_tokens=block_tokens,
    )


def _split(parsed: ParsedRequests, k: int) -> tuple[ParsedRequests, ParsedRequests]:
    """The first k requests and the rest."""
    cut = int(parsed.request_starts[k]) if k < parsed.requests else parsed.accesses

    def part(lo: int, hi: int, a0: int, a1: int) -> ParsedRequests:
        return ParsedRequests(
            parsed.keys[a0:a1],
            parsed.tokens[a0:a1],
            parsed.request_starts[lo:hi] - a0,
            parsed.request_timestamps[lo:hi],
            parsed.request_lines[lo:hi],
            parsed.request_input_lengths[lo:hi],
        )

    return part(0, k, 0, cut), part(k, parsed.requests, cut, parsed.accesses)


class TraceStream:
    """Iterate to get AccessBatches in read_trace's order; then `lines`, `rejects`, `warnings`,
    `notes`, `requests`, `format` and `block_tokens` say what was read."""

    def __init__(
        self,
        path: str | Path,
        format: str | None = None,
        block_size: int | None = None,
        strict: bool = False,
        hash_algo: str = "sha256",
        python_hash_seed: str | None = None,
        exact: bool = True,
    ) -> None:
        """exact=False (a live replay): where read_trace would have read otherwise, go on and say so
        in the notes instead of raising NeedsWholeTrace."""
        self.path = path
        self.exact = exact
        self.given_format = format
        self.given_block = block_size
        self.parser = TraceLineParser(format, block_size, strict, hash_algo, python_hash_seed)
        self.lines = 0
        self.requests = 0
        self.notes: list[str] = []
        self.warnings = RejectCounter()
        self.sorted_in_window = False

    @property
    def rejects(self) -> RejectCounter:
        return self.parser.rejects

    @property
    def format(self) -> str | None:
        return self.parser.format

    @property
    def block_tokens(self) -> int | None:
        return self.parser.block_tokens

    # -- the stages ------------------------------------------------------------------------
    def _parsed(self) -> Iterator[ParsedRequests]:
        with open_trace_input(self.path) as stream:
            for parsed, lines in read_chunks(stream, self.parser):
                self.lines = lines
                if parsed.requests:
                    yield parsed

    def _settled(self) -> Iterator[ParsedRequests]:
        """Requests with the block size settled: held until MIN_REQUESTS say which it is."""
        p = self.parser
        held: list[ParsedRequests] | None = []  # None once the size is settled
        fits: _Fits | None = None
        self._switched: int | None = None
        for parsed in self._parsed():
            if p.format == "tokens":
                yield parsed
                continue
            if fits is None:
                fits = _Fits(p.block_tokens or 1)
            fits.add(parsed)
            if self._switched is not None and (parsed.request_input_lengths < 0).any():
                self._inexact("lines carry their own block sizes and the default one is wrong")
            if held is not None:
                held.append(parsed)
                if fits.checked < MIN_REQUESTS:
                    continue
                yield self._first_settled(ParsedRequests.concat(held))
                held = None
            else:
                yield parsed
        if held:
            yield self._first_settled(ParsedRequests.concat(held))
        self._fits = fits

    def _first_settled(self, parsed: ParsedRequests) -> ParsedRequests:
        """The first requests, with the block size the lines keep when the default is wrong (as read_trace)."""
        p = self.parser
        block = p.block_tokens
        assert block is not None
        check = check_block_size(parsed.request_input_lengths, parsed.request_lengths(), block)
        if self.given_block is not None or not check.better_known:
            return parsed
        if (parsed.request_input_lengths < 0).any():
            self._inexact("lines carry their own block sizes and the default one is wrong")
        best = check.best
        self._switched = best
        p.block_size = best  # the lines after these are read with it
        p.warnings = RejectCounter()
        counts = parsed.request_lengths()
        lengths = parsed.request_input_lengths
        broken = np.flatnonzero((lengths >= 0) & (-(-lengths // best) != counts))
        for i in broken[: p.warnings.keep_examples]:
            p.warn_mismatch(best, int(parsed.request_lines[i]), int(counts[i]), int(lengths[i]), strict=False)
        if len(broken) > p.warnings.keep_examples:
            p.count_mismatches(best, len(broken) - p.warnings.keep_examples)
        return with_block_size(parsed, best)

    def _timed(self) -> Iterator[tuple[ParsedRequests, np.ndarray]]:
        """Requests with their timestamps filled: a missing one takes its predecessor's."""
        last = None
        waiting: list[ParsedRequests] = []  # requests before the first timestamp
        self._filled = 0
        for parsed in self._settled():
            stamps = parsed.request_timestamps.copy()
            missing = np.isnan(stamps)
            if last is None:
                if missing.all():
                    waiting.append(parsed)
                    continue
                if waiting:
                    parsed = ParsedRequests.concat([*waiting, parsed])
                    waiting = []
                    stamps = parsed.request_timestamps.copy()
                    missing = np.isnan(stamps)
                last = stamps[int(np.argmax(~missing))]
            if missing.any():
                self._filled += int(missing.sum())
                index = np.where(missing, -1, np.arange(len(stamps)))
                np.maximum.accumulate(index, out=index)
                stamps = np.where(index >= 0, stamps[np.maximum(index, 0)], last)
            last = stamps[-1]
            yield parsed, stamps
        if waiting:  # no timestamp at all: every request at 0, in line order
            parsed = ParsedRequests.concat(waiting)
            self._filled += parsed.requests
            yield parsed, np.zeros(parsed.requests)

    def _ordered(self) -> Iterator[tuple[ParsedRequests, np.ndarray]]:
        """Requests in stable timestamp order, through a window of one chunk: the last chunk's
        requests wait until the next one shows where they belong."""
        tail: tuple[ParsedRequests, np.ndarray] | None = None
        released = -np.inf  # the latest timestamp handed on
        for parsed, stamps in self._timed():
            in_order = bool(np.all(stamps[1:] >= stamps[:-1]))
            if tail is not None and in_order and stamps[0] >= tail[1][-1]:
                released = tail[1][-1]
                yield tail
                tail = (parsed, stamps)
                continue
            arrived = parsed.requests
            if tail is not None:
                parsed = ParsedRequests.concat([tail[0], parsed])
                stamps = np.concatenate([tail[1], stamps])
                in_order = bool(np.all(stamps[1:] >= stamps[:-1]))
            if not in_order:
                order = np.argsort(stamps, kind="stable")
                parsed, stamps = parsed.reordered(order), stamps[order]
                self.sorted_in_window = True
            if stamps[0] < released:
                self._inexact("requests out of timestamp order beyond the reorder window")
            head, rest = _split(parsed, parsed.requests - arrived)
            if head.requests:
                released = stamps[head.requests - 1]
                yield head, stamps[: head.requests]
            tail = (rest, stamps[head.requests :])
        if tail is not None:
            yield tail

    def _inexact(self, why: str) -> None:
        if self.exact:
            raise NeedsWholeTrace(why)
        note = f"read otherwise than the whole file would be: {why}"
        if note not in self.parser.notes:
            self.parser.notes.append(note)

    # -- the whole -------------------------------------------------------------------------
    def __iter__(self) -> Iterator[AccessBatch]:
        for parsed, stamps in self._ordered():
            self.requests += parsed.requests
            yield _stamped(parsed, stamps, self.parser.block_tokens or 1)
        self._finish()

    def _finish(self) -> None:
        p = self.parser
        if self.requests == 0:
            raise no_request_error(str(self.path) if str(self.path) != "-" else "stdin", self.lines, p)
        fits = getattr(self, "_fits", None)
        check = fits.check() if p.format != "tokens" and fits is not None else None
        if check is not None and self._switched != (
            check.best if check.better_known and self.given_block is None else None
        ):
            self._inexact("the block size the whole trace keeps is not the one its first lines keep")
        notes = list(p.notes)
        if self.given_format is not None:
            notes.insert(0, f"format {self.given_format} (given)")
        if check is not None:
            if check.wrong and self.given_block is not None and check.better_known:
                raise TraceError(
                    f"--block-size {check.block_tokens} does not fit this trace: {check.describe()}: "
                    f"give --block-size {check.best}"
                )
            if check.better_known:
                notes.append(
                    f"block size inferred from the lines: {check.describe()}; read with {check.best} "
                    f"(give --block-size to override)"
                )
            elif check.wrong:
                notes.append(f"block size doubtful: {check.describe()}; check --block-size")
        notes.append(f"{p.block_tokens} tokens per block")
        if self._filled:
            notes.append(
                f"{self._filled} requests had no timestamp; each takes its predecessor's time (line order)"
            )
        if self.sorted_in_window:
            notes.append("requests were not in timestamp order; sorted by timestamp (stable)")
        self.warnings = p.warnings
        notes += warning_notes(self.warnings)
        self.notes = notes
