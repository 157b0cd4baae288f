"""Saving what a live source saw as a trace file the core can replay.

The format is Mooncake's trace JSONL, one request per line, plus the block size, because
Mooncake assumes 512 tokens per block and live engines use their own (vLLM 16, SGLang 1):

    {"timestamp": 0, "input_length": 40, "output_length": 0, "hash_ids": [...], "block_size": 16}

- timestamp: ms since the first recorded request (integer, never decreasing, so a stable sort
  by timestamp keeps the recorded order);
- hash_ids: the block keys in access order, unsigned 64-bit integers;
- input_length: the tokens the request's blocks cover: every block holds block_size tokens
  except possibly the last (len(hash_ids) = ceil(input_length / block_size));
- block_tokens: written only when a request's blocks do not follow that rule: the tokens of
  each block, so the trace still replays exactly.
A reader replaying the lines in order, each request's hash_ids first to last, sees exactly
the recorded access stream.

What cannot be read back is not written as such: a timestamp that is not finite, or that lies
outside what the reader accepts, is written as the previous request's time and counted in
`clamped` (one absurd clock reading must not make every later request unreadable).

A path is written atomically: to a hidden temporary file beside it (`partial_path`), renamed over
the target on close; every CHECKPOINT_SECONDS the temporary file is made readable as it stands, so a half-written recording never replaces a good file and a symlink at the target is
replaced, not followed. An existing target is refused unless overwrite=True. A write that fails (a
full disk) ends the recording: the temporary file is removed, nothing is renamed, the target is left
as it was, and `failure` says why; later batches are counted in `unrecorded`, not written.
"""

from __future__ import annotations

import contextlib
import gzip
import math
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import msgspec
import numpy as np

from kvset.formats.trace_lines import MAX_TIMESTAMP_SECONDS
from kvset.types import AccessBatch

# How often a recording to a path is made readable as it stands: the file is flushed, and a .gz one
# ends its gzip member and starts the next, so that a recording killed outright (SIGKILL, a power
# cut) keeps everything up to its last checkpoint in the temporary file, readable as a trace.
CHECKPOINT_SECONDS = 5.0


class RecordTargetError(ValueError):
    """A recording target that must not be written: its one line says why and what to do."""


def check_record_target(
    target: str | Path, inputs: Iterable[str | Path] = (), overwrite: bool = False
) -> Path:
    """The path to record to, or RecordTargetError: not onto an input, not over a file unless asked,
    not into a folder that does not exist."""
    path = Path(target)
    for given in inputs:
        with contextlib.suppress(OSError):
            if path.exists() and os.path.samefile(path, given):
                raise RecordTargetError(f"refusing to record onto the input {given}: choose another file")
    if path.is_dir():
        raise RecordTargetError(f"{path} is a folder: give a file name to record to")
    if not path.parent.is_dir():
        raise RecordTargetError(f"cannot record to {path}: the folder {path.parent} does not exist")
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise RecordTargetError(f"{path} exists: give --force to replace it, or choose another file")
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class TraceRecorder:
    def __init__(
        self, out: str | Path | IO[bytes], block_size: int | None = None, overwrite: bool = False
    ) -> None:
        """out: a path (".gz" is gzip-compressed) or a binary file object; block_size: the stream's
        tokens per block, for batches that carry neither per-access tokens nor their own block size.
        Raises RecordTargetError for a path that must not be written (see check_record_target)."""
        self.path: Path | None = None
        self._tmp: Path | None = None
        if isinstance(out, str | Path):
            self.path = check_record_target(out, overwrite=overwrite)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".part", dir=self.path.parent)
            self._tmp = Path(tmp)
            os.chmod(self._tmp, 0o666 & ~_umask())  # mkstemp makes it private; a trace is a plain file
            raw = os.fdopen(fd, "wb")
            self._file: IO[bytes] | gzip.GzipFile = (
                gzip.GzipFile(fileobj=raw, mode="wb") if self.path.suffix == ".gz" else raw
            )
            self._raw: IO[bytes] | None = raw if self.path.suffix == ".gz" else None
            self._owned = True
        else:
            self._file, self._raw, self._owned = out, None, False
        self.partial_path = self._tmp  # where the recording is until it ends (None: a file object)
        self.checkpoint_seconds = CHECKPOINT_SECONDS
        self._checkpointed = time.monotonic()
        self.block_size = block_size
        self.clamped = 0  # requests whose timestamp could not be written as given
        self.first_timestamp: float | None = None  # seconds, the time of the first recorded request
        self.requests = 0
        self.accesses = 0
        self.tokens = 0
        self._last_ms = 0
        self._encoder = msgspec.json.Encoder()
        self.failure: str | None = None  # why the recording stopped (a failed write), None while it runs
        self.closed = False
        self.unrecorded = 0  # accesses given after it stopped

    def _fail(self, exc: OSError) -> None:
        """Stop recording after a failed write: drop the temporary file, keep the target as it was."""
        where = self.path if self.path is not None else "the recording"
        self.failure = f"cannot write {where}: {exc.strerror or exc}"
        if self._owned:
            for f in (self._file, self._raw):
                with contextlib.suppress(OSError, ValueError):
                    if f is not None:
                        f.close()
            if self._tmp is not None:
                self._tmp.unlink(missing_ok=True)

    def _tokens_of(self, batch: AccessBatch, block_size: int | None) -> np.ndarray:
        if batch.tokens is not None:
            return np.asarray(batch.tokens, dtype=np.int64)
        if not block_size:
            raise ValueError("the batch gives no tokens per block and the recorder has no block size")
        return np.full(len(batch.keys), block_size, dtype=np.int64)

    def _times_of(self, batch: AccessBatch, arrival: float | None) -> np.ndarray:
        if batch.timestamps is None:
            return np.full(len(batch.keys), time.time() if arrival is None else arrival)
        return np.broadcast_to(np.asarray(batch.timestamps, dtype=np.float64), (len(batch.keys),))

    def write(self, batch: AccessBatch, arrival: float | None = None, block_size: int | None = None) -> int:
        """Append a batch's requests; returns how many were written. block_size: the stream's, where
        the batch does not say (else the recorder's).

        A batch without request_starts is written as one request (its accesses in order).
        """
        n = len(batch.keys)
        if n == 0:
            return 0
        if self.failure is not None or self.closed:  # a batch still queued when the recording ended
            self.unrecorded += n
            return 0
        block_size = batch.block_size or block_size or self.block_size
        tokens = self._tokens_of(batch, block_size)
        times = self._times_of(batch, arrival)
        starts = [0] if batch.request_starts is None else [int(s) for s in batch.request_starts]
        bounds = [*starts, n]
        lines = []
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            if end <= start:
                continue
            lines.append(
                self._line(batch.keys[start:end], tokens[start:end], float(times[start]), block_size)
            )
        try:
            self._file.write(b"".join(lines))
            if self._owned and time.monotonic() - self._checkpointed >= self.checkpoint_seconds:
                self._checkpoint()
        except OSError as exc:
            self._fail(exc)
            self.unrecorded += n
            return 0
        return len(lines)

    def _checkpoint(self) -> None:
        """Make the temporary file readable as it stands: a .gz ends its member (a gzip file may hold
        several, read one after another) and starts the next; both flush to the operating system."""
        if self._raw is not None:
            self._file.close()  # writes the member's trailer; the raw file stays open
            self._raw.flush()
            self._file = gzip.GzipFile(fileobj=self._raw, mode="wb")
        else:
            self._file.flush()
        self._checkpointed = time.monotonic()

    def _line(self, keys: np.ndarray, tokens: np.ndarray, ts: float, block_size: int | None) -> bytes:
        if not (math.isfinite(ts) and abs(ts) <= MAX_TIMESTAMP_SECONDS):
            ts = math.nan
        if self.first_timestamp is None and not math.isnan(ts):
            self.first_timestamp = ts
        offset = ts - self.first_timestamp if self.first_timestamp is not None else math.nan
        if math.isnan(offset) or abs(offset) > MAX_TIMESTAMP_SECONDS:
            # unreadable as written: keep the previous request's time
            self.clamped += 1
            offset = self._last_ms / 1000
        ms = max(self._last_ms, int(round(offset * 1000)))
        self._last_ms = ms
        largest = int(tokens.max())
        size = block_size if block_size and block_size >= largest else largest
        record: dict[str, object] = {
            "timestamp": ms,
            "input_length": int(tokens.sum()),
            "output_length": 0,
            "hash_ids": np.asarray(keys, dtype=np.uint64).tolist(),
            "block_size": size,
        }
        regular = bool(np.all(tokens[:-1] == size)) and 0 < int(tokens[-1]) <= size
        if not regular:
            record["block_tokens"] = tokens.tolist()
        self.requests += 1
        self.accesses += len(keys)
        self.tokens += int(tokens.sum())
        return self._encoder.encode(record) + b"\n"

    def flush(self) -> None:
        if self.failure is not None:
            return
        try:
            self._file.flush()
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        """Finish the file: a path is renamed into place only now. A recording that holds nothing
        writes nothing: a file that was there is kept (overwrite or not), and none is created, so that
        running the same command again does not stop at "exists"."""
        self.closed = True
        if self.failure is not None:
            return  # the temporary file is gone already; the target was never touched
        if not self._owned:
            self.flush()
            return
        if self._file.closed:
            return
        try:
            self._file.close()  # gzip writes its last block and trailer here: it may fail too
            if self._raw is not None:
                self._raw.close()
        except OSError as exc:
            self._fail(exc)
            return
        if self._tmp is not None and self.path is not None:
            if self.requests == 0:
                self._tmp.unlink(missing_ok=True)
            else:
                os.replace(self._tmp, self.path)

    def __enter__(self) -> TraceRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
