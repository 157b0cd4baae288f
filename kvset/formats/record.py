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
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import IO

import msgspec
import numpy as np

from kvset.types import AccessBatch


class TraceRecorder:
    def __init__(self, out: str | Path | IO[bytes], block_tokens: int | None = None) -> None:
        """out: a path (".gz" is gzip-compressed) or a binary file object; block_tokens: tokens per
        block for batches that carry neither per-access tokens nor their own block_tokens."""
        if isinstance(out, str | Path):
            path = Path(out)
            self._file: IO[bytes] = gzip.open(path, "wb") if path.suffix == ".gz" else open(path, "wb")  # noqa: SIM115
            self._owned = True
        else:
            self._file, self._owned = out, False
        self.block_tokens = block_tokens
        self.first_timestamp: float | None = None  # seconds, the time of the first recorded request
        self.requests = 0
        self.accesses = 0
        self.tokens = 0
        self._last_ms = 0
        self._encoder = msgspec.json.Encoder()

    def _tokens_of(self, batch: AccessBatch) -> np.ndarray:
        if batch.tokens is not None:
            return np.asarray(batch.tokens, dtype=np.int64)
        size = batch.block_tokens or self.block_tokens
        if not size:
            raise ValueError("the batch gives no tokens per block and the recorder has no block_tokens")
        return np.full(len(batch.keys), size, dtype=np.int64)

    def _times_of(self, batch: AccessBatch, arrival: float | None) -> np.ndarray:
        if batch.timestamps is None:
            return np.full(len(batch.keys), time.time() if arrival is None else arrival)
        return np.broadcast_to(np.asarray(batch.timestamps, dtype=np.float64), (len(batch.keys),))

    def write(self, batch: AccessBatch, arrival: float | None = None) -> int:
        """Append a batch's requests; returns how many were written.

        A batch without request_starts is written as one request (its accesses in order).
        """
        n = len(batch.keys)
        if n == 0:
            return 0
        tokens = self._tokens_of(batch)
        times = self._times_of(batch, arrival)
        starts = [0] if batch.request_starts is None else [int(s) for s in batch.request_starts]
        bounds = [*starts, n]
        lines = []
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            if end <= start:
                continue
            lines.append(
                self._line(batch.keys[start:end], tokens[start:end], float(times[start]), batch.block_tokens)
            )
        self._file.write(b"".join(lines))
        return len(lines)

    def _line(self, keys: np.ndarray, tokens: np.ndarray, ts: float, block_size: int | None) -> bytes:
        if self.first_timestamp is None:
            self.first_timestamp = ts
        ms = max(self._last_ms, int(round((ts - self.first_timestamp) * 1000)))
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
        self._file.flush()

    def close(self) -> None:
        if self._owned:
            self._file.close()
        else:
            self._file.flush()

    def __enter__(self) -> TraceRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
