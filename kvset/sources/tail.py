"""Follow a growing text file like `tail -F`, by polling (no inotify).

`FileTailer.read()` returns complete lines (bytes, without the newline) with their line numbers and
the file events seen on the way: rotation (the path now names another file, e.g. after
`mv log log.1` and a fresh `log`), truncation (copytruncate: the size shrank below our position,
or the bytes just before our position changed because the file was truncated and rewritten
faster than we poll; reading restarts at 0), a file that appears after we started, and a file that vanished. Each
event can be turned into a `TimelineEvent` with `to_timeline()`.

A trailing line without a newline is held until its newline arrives (a writer may be mid-line),
except at the end of a whole-file read and when the file is rotated away, where it is complete.
Reads are bounded (`max_bytes` per call) so a huge backlog never stalls the caller, and a
line longer than `max_line_bytes` is dropped and reported rather than held in memory forever.
Whole-file reads also accept gzip (`.gz`); a gzip file cannot be followed. A whole-file read of
damaged input (a .gz cut short or corrupt, an unreadable path) keeps what was read before the
damage, reports a `read-error` event and finishes; it never raises.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from kvset.quantities import plural
from kvset.sources.clock import REAL_CLOCK, Clock
from kvset.types import TimelineEvent

DEFAULT_MAX_BYTES = 4 << 20
DEFAULT_MAX_LINE_BYTES = 64 << 20
# Bytes just before the read position compared on each poll: a file truncated and written past
# our position between two polls keeps its size but not its content.
REWRITE_CHECK_BYTES = 64
# What a damaged gzip stream raises (BadGzipFile is an OSError, as are plain read failures).
READ_ERRORS = (OSError, EOFError, zlib.error)


@dataclass(frozen=True)
class TailEvent:
    """Something that happened to the followed file.

    kind: log-rotated | log-truncated | log-appeared | log-missing | line-too-long | read-error
    """

    at: float
    kind: str
    text: str

    def to_timeline(self) -> TimelineEvent:
        return TimelineEvent(at=self.at, kind=self.kind, text=self.text)


@dataclass
class TailRead:
    """The result of one `read` call."""

    lines: list[tuple[int, bytes]] = field(default_factory=list)  # (line number, content)
    events: list[TailEvent] = field(default_factory=list)
    finished: bool = False  # whole-file mode: the file has been read to its end
    waiting: bool = False  # the file does not exist (yet)
    bytes_read: int = 0


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


class FileTailer:
    """Reads a file once or follows it across rotation and truncation.

    follow=False reads the whole file (plain or .gz) and then reports `finished`.
    follow=True starts at the beginning (or the end with from_end=True) and keeps reading
    what is appended; the file may not exist yet.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        follow: bool = True,
        from_end: bool = False,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        poll_interval: float = 0.05,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        self.follow = follow
        self.from_end = from_end
        self.max_bytes = max(1, int(max_bytes))
        self.max_line_bytes = max(1, int(max_line_bytes))
        self.poll_interval = poll_interval
        self.gzip = self.path.suffix == ".gz"
        if self.gzip and follow:
            raise ValueError(f"{self.path}: a gzip file can only be read whole, not followed")
        if not follow and not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no such file")
        self._fh: io.BufferedIOBase | None = None  # a plain or gzip file: both have read1
        self._ident: tuple[int, int] | None = None
        self._pos = 0  # bytes consumed from the current file (uncompressed for .gz)
        self._line_no = 0  # complete lines handed out from the current file
        self._partial = bytearray()
        self._last_bytes = b""  # the last bytes consumed, ending at _pos (the rewrite check)
        self._dropping = False  # inside an over-long line: discard until its newline
        self._finished = False
        self._ever_opened = False
        self._missing_reported = False
        self._pending: list[TailEvent] = []
        self._last_error: str | None = None
        self.rotations = 0
        self.truncations = 0
        self.lines_total = 0
        self.bytes_total = 0

    # -- public ---------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def position(self) -> int:
        return self._pos

    def read(self, timeout: float = 0.0) -> TailRead:
        """Lines available now; with timeout > 0 wait up to that long for at least one."""
        deadline = self.clock.monotonic() + max(0.0, timeout)
        while True:
            out = self._read_once()
            if out.lines or out.events or out.finished or self.clock.monotonic() >= deadline:
                return out
            self.clock.sleep(min(self.poll_interval, max(0.0, deadline - self.clock.monotonic())))

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> FileTailer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------

    def _event(self, kind: str, text: str) -> None:
        if kind == "read-error":
            if text == self._last_error:
                return  # the same failure on every poll is one event
            self._last_error = text
        else:
            self._last_error = None
        self._pending.append(TailEvent(self.clock.wall(), kind, text))

    def _open(self, announce: bool = True) -> bool:
        """Open the path; announce=False when the caller already reported why (a rotation)."""
        try:
            if self.gzip:
                fh: io.BufferedIOBase = gzip.GzipFile(self.path, "rb")  # noqa: SIM115
                st = os.stat(self.path)
            else:
                fh = open(self.path, "rb")  # noqa: SIM115 - held open across calls
                st = os.fstat(fh.fileno())
        except FileNotFoundError:
            if not self._missing_reported and self._ever_opened:
                self._event("log-missing", f"{self.path} is gone; waiting for it to reappear")
            self._missing_reported = True
            return False
        except OSError as e:
            self._event("read-error", f"{self.path}: {e.strerror or e}")
            return False
        self._last_error = None
        if announce and (self._ever_opened or self._missing_reported):
            self._event("log-appeared", f"{self.path} appeared; reading from its start")
        self._fh = fh
        self._ident = _identity(st)
        self._pos = 0
        self._line_no = 0
        self._partial.clear()
        self._last_bytes = b""
        self._dropping = False
        if self.from_end and not self._ever_opened and not self.gzip:
            # Like `tail -f`: only what is written from now on; line numbers count from here.
            self._pos = fh.seek(0, os.SEEK_END)
        self._ever_opened = True
        self._missing_reported = False
        return True

    def _read_once(self) -> TailRead:
        out = TailRead()
        if self._finished:
            out.finished = True
            return out
        if self._fh is None and not self._open():
            if not self.follow:
                # A whole-file read of a path that cannot be opened: the error is the answer.
                if not self._pending:
                    self._event("read-error", f"{self.path}: no such file")
                self._finish(out)
            else:
                out.waiting = True
            out.events, self._pending = self._pending, []
            return out
        assert self._fh is not None
        if not self.follow:
            data, damage = self._read_whole_chunk()
            if data:
                self._consume(data, out)
            if damage is not None:
                self._event("read-error", damage)
                self._finish(out)
            elif not data:
                self._finish(out)
            out.events, self._pending = self._pending, []
            return out

        try:
            self._check_rewritten()
            data = self._fh.read(self.max_bytes)
            if data:
                self._consume(data, out)
            else:
                self._check_file(out)
        except OSError as e:  # e.g. EIO on a failing disk: report it and try again on the next poll
            self._event("read-error", f"{self.path}: {e.strerror or e}")
        out.events = self._pending + out.events
        self._pending = []
        return out

    def _finish(self, out: TailRead) -> None:
        self._flush_partial(out)
        self._finished = True
        out.finished = True
        self.close()

    def _read_whole_chunk(self) -> tuple[bytes, str | None]:
        """Up to max_bytes, and why the input cannot be read further (None while it can).

        gzip is read one decompressed piece at a time: a single large read() that meets the
        damage raises and drops everything it had decompressed before it.
        """
        assert self._fh is not None
        if not self.gzip:
            try:
                return self._fh.read(self.max_bytes), None
            except OSError as e:
                return b"", f"{self.path}: {e.strerror or e}"
        parts: list[bytes] = []
        n = 0
        damage: str | None = None
        while n < self.max_bytes:
            try:
                part = self._fh.read1(self.max_bytes - n)
            except EOFError as e:
                damage = f"{self.path}: input ends early: {e}"
                break
            except READ_ERRORS as e:
                damage = f"{self.path}: gzip data damaged: {e}"
                break
            if not part:
                break
            parts.append(part)
            n += len(part)
        return b"".join(parts), damage

    def _check_file(self, out: TailRead) -> None:
        """At the end of the open file: has the path been rotated or the file truncated?"""
        assert self._fh is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            # Renamed away and not yet recreated: keep the old handle, it may still grow.
            if not self._missing_reported:
                self._missing_reported = True
                self._event("log-missing", f"{self.path} was moved or deleted; waiting for a new file")
            return
        except OSError as e:
            self._event("read-error", f"{self.path}: {e.strerror or e}")
            return
        if _identity(st) != self._ident:
            # A new file took the name. Drain what was appended to the old one, then switch.
            while True:
                rest = self._fh.read(self.max_bytes)
                if not rest:
                    break
                self._consume(rest, out)
            self._flush_partial(out)
            old_lines = self._line_no
            self.close()
            self.rotations += 1
            self._missing_reported = False
            self._event(
                "log-rotated",
                f"{self.path} was rotated after {plural(old_lines, 'line')}; reading the new file",
            )
            if self._open(announce=False):
                assert self._fh is not None
                data = self._fh.read(self.max_bytes)
                if data:
                    self._consume(data, out)
            else:
                self._missing_reported = True  # gone again already: report it when it appears
            return
        self._missing_reported = False

    def _check_rewritten(self) -> None:
        """Before each read: the file shrank below our position (copytruncate), or the bytes before
        our position are not what we read there (truncated and rewritten between two polls)."""
        assert self._fh is not None
        size = os.fstat(self._fh.fileno()).st_size
        if size < self._pos:
            self._restart(f"was truncated (size {size} < read position {self._pos})")
            return
        if not self._last_bytes:
            return
        n = len(self._last_bytes)
        if os.pread(self._fh.fileno(), n, self._pos - n) != self._last_bytes:
            self._restart(
                f"was truncated and rewritten (the {n} bytes before read position {self._pos} changed)"
            )

    def _restart(self, why: str) -> None:
        """Read the same file again from its start, and say so."""
        assert self._fh is not None
        lost = len(self._partial)
        self._fh.seek(0)
        self.truncations += 1
        self._event(
            "log-truncated",
            f"{self.path} {why}; reading from 0"
            + (f", dropped a {lost}-byte unfinished line" if lost else ""),
        )
        self._pos = 0
        self._line_no = 0
        self._partial.clear()
        self._last_bytes = b""
        self._dropping = False

    def _consume(self, data: bytes, out: TailRead) -> None:
        self._pos += len(data)
        if not self.gzip:
            self._last_bytes = (self._last_bytes + data[-REWRITE_CHECK_BYTES:])[-REWRITE_CHECK_BYTES:]
        self.bytes_total += len(data)
        out.bytes_read += len(data)
        start = 0
        n = len(data)
        while start < n:
            nl = data.find(b"\n", start)
            if nl < 0:
                if not self._dropping:
                    self._partial += data[start:]
                    if len(self._partial) > self.max_line_bytes:
                        self._line_no += 1
                        self._event(
                            "line-too-long",
                            f"{self.path} line {self._line_no}: longer than {self.max_line_bytes} bytes, skipped",
                        )
                        self._partial.clear()
                        self._dropping = True
                break
            if self._dropping:
                self._dropping = False  # the over-long line ends here; its number was counted
            else:
                if self._partial:
                    self._partial += data[start:nl]
                    line = bytes(self._partial)
                    self._partial.clear()
                else:
                    line = data[start:nl]
                if len(line) > self.max_line_bytes:
                    self._line_no += 1
                    self._event(
                        "line-too-long",
                        f"{self.path} line {self._line_no}: longer than {self.max_line_bytes} bytes, skipped",
                    )
                else:
                    self._emit(line, out)
            start = nl + 1

    def _emit(self, line: bytes, out: TailRead) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        self._line_no += 1
        self.lines_total += 1
        out.lines.append((self._line_no, line))

    def _flush_partial(self, out: TailRead) -> None:
        if self._partial and not self._dropping:
            self._emit(bytes(self._partial), out)
        self._partial.clear()
        self._dropping = False
