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

from kvset.formats.block_size import (
    MIN_REQUESTS,
    FitCounts,
    NoBlockSizeFits,
    Settled,
    check_block_size,
    settle,
)
from kvset.formats.byte_input import open_trace_input
from kvset.formats.byte_lines import read_chunks
from kvset.formats.parsed_requests import ParsedRequests
from kvset.formats.trace_lines import TraceLineParser
from kvset.formats.traces import no_request_error, recount_mismatches, warning_notes, with_block_size
from kvset.rejects import RejectCounter
from kvset.types import AccessBatch, PrincipalNames
from kvset.units import DEFAULT_HASH_ALGO, StreamUnits


class NeedsWholeTrace(Exception):
    """The stream cannot give read_trace's order or block size: read the file whole (the reason says why)."""


def _stamped(
    parsed: ParsedRequests, stamps: np.ndarray, block_size: int, names: PrincipalNames
) -> AccessBatch:
    principals = parsed.access_principals()
    return AccessBatch(
        keys=parsed.keys,
        tokens=parsed.tokens,
        request_starts=parsed.request_starts,
        timestamps=np.repeat(stamps, parsed.request_lengths()),
        block_size=block_size,
        principals=principals,
        principal_names=names if principals is not None else None,
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
            None if parsed.request_principals is None else parsed.request_principals[lo:hi],
        )

    return part(0, k, 0, cut), part(k, parsed.requests, cut, parsed.accesses)


class TraceStream:
    """Iterate to get AccessBatches in read_trace's order; then `lines`, `rejects`, `warnings`,
    `notes`, `requests`, `format` and `units` say what was read. `units` is known (not None) from
    the first batch on: the block size is settled before any access is handed on."""

    def __init__(
        self,
        path: str | Path,
        format: str | None = None,
        block_size: int | None = None,
        strict: bool = False,
        hash_algo: str = DEFAULT_HASH_ALGO,
        python_hash_seed: str | None = None,
        exact: bool = True,
    ) -> None:
        """exact=False (a live replay): where read_trace would have read otherwise, go on and say so
        in the notes instead of raising NeedsWholeTrace."""
        self.path = path
        self.exact = exact
        self.given_format = format
        self.given_block_size = block_size
        self.parser = TraceLineParser(format, block_size, strict, hash_algo, python_hash_seed)
        self.lines = 0
        self.requests = 0
        self.notes: list[str] = []
        self.warnings = RejectCounter()
        self.sorted_in_window = False
        self._early: Settled | None = None  # what the first requests settled

    @property
    def rejects(self) -> RejectCounter:
        return self.parser.rejects

    @property
    def format(self) -> str | None:
        return self.parser.format

    @property
    def units(self) -> StreamUnits | None:
        """The stream's units once settled (None before the first batch)."""
        return self.parser.units if self._early is not None or self.parser.format == "tokens" else None

    @property
    def block_size(self) -> int | None:
        return self.parser.block_size

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
        fits: FitCounts | None = None
        for parsed in self._parsed():
            if p.format == "tokens":
                yield parsed
                continue
            if fits is None:
                fits = FitCounts(p.block_size or 1)
            fits.add(parsed.request_input_lengths, parsed.request_lengths())
            if self._early is not None and self._early.inferred and (parsed.request_input_lengths < 0).any():
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
        """The first requests, read with the block size and convention they keep (as read_trace would
        on the whole file; the end checks that the whole agrees)."""
        p = self.parser
        block, convention = p.block_size, p.convention
        assert block is not None
        check = check_block_size(parsed.request_input_lengths, parsed.request_lengths(), block)
        try:
            settled = settle(check, self.given_block_size is not None)
        except NoBlockSizeFits:
            if not self.exact:  # a live replay is refused before it plays made-up token counts
                raise
            settled = Settled(block, convention, False, None)  # read on: the whole trace decides at the end
        self._early = settled
        if settled.inferred and (parsed.request_input_lengths < 0).any():
            self._inexact("lines carry their own block sizes and the default one is wrong")
        p.settle(settled.block_size, settled.convention, settled.inferred)
        if (settled.block_size, settled.convention) == (block, convention):
            return parsed
        p.warnings = RejectCounter()  # the lines after these are read with the settled rule
        recount_mismatches(parsed, p)
        return with_block_size(parsed, settled.block_size) if settled.block_size != block else parsed

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
            yield _stamped(parsed, stamps, self.parser.block_size or 1, self.parser.principal_names)
        self._finish()

    def _finish(self) -> None:
        p = self.parser
        if self.requests == 0:
            raise no_request_error(str(self.path) if str(self.path) != "-" else "stdin", self.lines, p)
        fits = getattr(self, "_fits", None)
        whole: Settled | None = None
        if p.format != "tokens" and fits is not None:
            # every request judged against the size the reading started with, as read_trace judges them
            whole = settle(fits.check(), self.given_block_size is not None)
            early = self._early
            if early is None or (whole.block_size, whole.convention) != (early.block_size, early.convention):
                self._inexact("the block size the whole trace keeps is not the one its first lines keep")
        notes = list(p.notes)
        if self.given_format is not None:
            notes.insert(0, f"format {self.given_format} (given)")
        if whole is not None and whole.note:
            notes.append(whole.note)
        units = p.units
        assert units is not None
        notes.append(units.describe())
        if self._filled:
            notes.append(
                f"{self._filled} requests had no timestamp; each takes its predecessor's time (line order)"
            )
        if self.sorted_in_window:
            notes.append("requests were not in timestamp order; sorted by timestamp (stable)")
        self.warnings = p.warnings
        notes += warning_notes(self.warnings)
        self.notes = notes
