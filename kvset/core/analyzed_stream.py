"""A copy of the access stream exactly as an analyzer saw it, for the passes that need it whole.

Belady's MIN (kvset.core.opt) needs every access's next use, and a naive replay
(kvset.core.naive) needs the stream again: both take it from here. Each batch is kept as the
Analyzer takes it (kvset.core.analyzer.Analyzer.feed_batch): with `order="reverse"` a batch's
requests are reversed one by one (accesses before its first request start are a segment of their
own; a batch without request starts is a plain stream and stays as it is), and an access without
tokens covers its batch's block size, else the stream's `block_size`. Memory: the keys and tokens, 12 to
16 bytes an access (a batch given in forward order is kept by reference, not copied).
"""

from __future__ import annotations

import numpy as np

from kvset.core.feed_args import ORDERS, reverse_within_requests
from kvset.types import AccessBatch


class AnalyzedStream:
    def __init__(self, order: str = "forward", block_size: int = 1) -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        self.order = order
        self.block_size = int(block_size)
        self._keys: list[np.ndarray] = []
        self._tokens: list[np.ndarray] = []
        self.accesses = 0

    def __len__(self) -> int:
        return self.accesses

    def add(self, batch: AccessBatch) -> None:
        n = len(batch)
        if not n:
            return
        keys = np.asarray(batch.keys, dtype=np.uint64)
        if batch.tokens is not None:
            tokens = np.asarray(batch.tokens)
        else:
            tokens = np.full(n, batch.block_size or self.block_size, dtype=np.int32)
        starts = batch.request_starts
        if self.order == "reverse" and starts is not None and len(starts):
            perm = reverse_within_requests(np.asarray(starts, dtype=np.int64), n)
            keys, tokens = keys[perm], tokens[perm]
        self._keys.append(keys)
        self._tokens.append(tokens)
        self.accesses += n

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, tokens): every access's block key (uint64) and the tokens it covers, in the analyzed
        order. The batches are joined once and kept joined, so asking again costs nothing."""
        if len(self._keys) != 1:
            keys = np.concatenate(self._keys) if self._keys else np.zeros(0, np.uint64)
            tokens = np.concatenate(self._tokens) if self._tokens else np.zeros(0, np.int64)
            self._keys, self._tokens = [keys], [tokens]
        return self._keys[0], self._tokens[0]
