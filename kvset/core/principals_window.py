"""The principals' accesses as the collector keeps them (kvset.core.principals): the last `capacity`
accesses of the stream, or all of them where there is no capacity (`kvset analyze`, which ends).

Each access is kept in the analyzer's order (`reverse`: each request's blocks last to first) as its
key, its tokens, its stack distance in the shared stack and its principal id at each level asked
for (8 + 4 + 4 bytes, and 4 per level); each request as its first access and its time (16 bytes).
They are held in chunks of CHUNK accesses (or requests), a dropped chunk kept to be filled again, so
a live stream's memory stops growing once the window is full: the capacity, the chunk being filled
and one spare. Reads go chunk by chunk over views of them, in the pipeline thread that feeds them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

CHUNK = 1 << 16  # accesses (or requests) per chunk


@dataclass(frozen=True)
class WindowSpan:
    """What the principals' figures cover: `accesses` (the last ones) of the `seen` the collector was
    fed, over `seconds` of stream time (first request to last; None: the stream gave no times), in
    a window of `capacity` accesses (None: the whole stream is kept)."""

    accesses: int
    seen: int
    capacity: int | None
    seconds: float | None

    @property
    def whole_stream(self) -> bool:
        return self.accesses == self.seen


class _Chunks:
    """Rows of fixed-type columns appended at the end and dropped at the front, in chunks."""

    def __init__(self, dtypes: dict[str, tuple[np.dtype, int]], chunk: int) -> None:
        self.dtypes = dtypes  # column -> (type, width: 0 for a vector)
        self.chunk = chunk
        self._full: deque[dict[str, np.ndarray]] = deque()
        self._spare: dict[str, np.ndarray] | None = None  # a dropped chunk, to be filled again
        self._filling = self._new()
        self._fill = 0
        self._head = 0  # rows of the first chunk already dropped
        self.rows = 0  # held

    def _new(self) -> dict[str, np.ndarray]:
        if self._spare is not None:
            made, self._spare = self._spare, None
            return made
        return {
            name: np.empty((self.chunk, width) if width else self.chunk, dtype=dtype)
            for name, (dtype, width) in self.dtypes.items()
        }

    def append(self, columns: dict[str, np.ndarray]) -> None:
        n = len(next(iter(columns.values())))
        done = 0
        while done < n:
            take = min(n - done, self.chunk - self._fill)
            for name, values in columns.items():
                self._filling[name][self._fill : self._fill + take] = values[done : done + take]
            self._fill += take
            done += take
            if self._fill == self.chunk:
                self._full.append(self._filling)
                self._filling, self._fill = self._new(), 0
        self.rows += n

    def _chunks(self) -> list[tuple[dict[str, np.ndarray], int, int]]:
        """(chunk, first row, end row) of every chunk holding rows, oldest first."""
        spans = [(c, 0, self.chunk) for c in self._full] + [(self._filling, 0, self._fill)]
        first, lo, hi = spans[0]
        spans[0] = (first, self._head, hi)
        return [s for s in spans if s[2] > s[1]]

    def drop(self, n: int) -> None:
        """Forget the `n` oldest rows; a chunk left empty is kept to be filled again."""
        n = min(n, self.rows)
        self.rows -= n
        while n:
            if not self._full:  # within the chunk being filled
                self._head += n
                if self._head == self._fill:
                    self._head = self._fill = 0
                return
            take = min(n, self.chunk - self._head)
            self._head += take
            n -= take
            if self._head == self.chunk:
                self._spare = self._full.popleft()
                self._head = 0

    def count_at_most(self, name: str, value: int) -> int:
        """How many of the oldest rows have `name` at most `value` (a column held ascending)."""
        count = 0
        for c, lo, hi in self._chunks():
            rows = c[name][lo:hi]
            if rows[-1] <= value:
                count += hi - lo
                continue
            return count + int(np.searchsorted(rows, value, side="right"))
        return count

    def views(self) -> list[dict[str, np.ndarray]]:
        """Every held row, chunk by chunk, oldest first: views into the chunks (valid until the
        next append), so a read costs no copy of the window."""
        return [{name: c[name][lo:hi] for name in self.dtypes} for c, lo, hi in self._chunks()]

    def column(self, name: str) -> np.ndarray:
        """Every held row of one column, oldest first (a copy)."""
        parts = [v[name] for v in self.views()]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=self.dtypes[name][0])

    @property
    def nbytes(self) -> int:
        """Bytes of the chunks made (held, being filled and spare)."""
        per_row = sum(np.dtype(t).itemsize * max(w, 1) for t, w in self.dtypes.values())
        made = len(self._full) + 1 + (self._spare is not None)
        return made * self.chunk * per_row


class AccessWindow:
    """The last `capacity` accesses (None: all of them) with their requests."""

    def __init__(self, levels: int, capacity: int | None, horizon: int, chunk: int = CHUNK) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError(f"a window of {capacity} accesses holds nothing")
        if horizon >= 2**31:  # the distances are kept in 32 bits, and read packed with the tokens
            raise ValueError(f"--by needs a horizon under 2**31 blocks, got {horizon:,}")
        self.capacity = capacity
        chunk = chunk if capacity is None else max(1, min(chunk, capacity))
        self._accesses = _Chunks(
            {
                "keys": (np.dtype(np.uint64), 0),
                "tokens": (np.dtype(np.int32), 0),
                "distances": (np.dtype(np.int32), 0),
                "principals": (np.dtype(np.int32), levels),
            },
            chunk,
        )
        # a request's first access counted from the stream's first access
        self._requests = _Chunks({"start": (np.dtype(np.int64), 0), "time": (np.dtype(np.float64), 0)}, chunk)
        self.seen = 0  # accesses fed in all

    def __len__(self) -> int:
        return self._accesses.rows

    @property
    def start(self) -> int:
        """The window's first access, counted from the stream's first."""
        return self.seen - len(self)

    @property
    def nbytes(self) -> int:
        return self._accesses.nbytes + self._requests.nbytes

    def add(
        self,
        keys: np.ndarray,
        tokens: np.ndarray,
        distances: np.ndarray,
        principals: np.ndarray,
        request_starts: np.ndarray,
        request_times: np.ndarray,
    ) -> None:
        """One batch in the analyzer's order, its requests' starts counted within it."""
        n = len(keys)
        if self.capacity is not None and n > self.capacity:  # only its last accesses stay
            cut = n - self.capacity
            before = request_starts <= cut  # the last of them is cut in two: it begins at the window
            head = request_times[before][-1:] if before.any() else np.full(1, np.nan)
            later = ~before
            request_starts = np.concatenate([[0], request_starts[later] - cut])
            request_times = np.concatenate([head, request_times[later]])
            keys, tokens, distances, principals = (a[cut:] for a in (keys, tokens, distances, principals))
            self.seen += cut
            n -= cut
        self._accesses.append(
            {"keys": keys, "tokens": tokens, "distances": distances, "principals": principals}
        )
        self._requests.append({"start": request_starts + self.seen, "time": request_times})
        self.seen += n
        if self.capacity is not None and len(self) > self.capacity:
            self._accesses.drop(len(self) - self.capacity)
            # the requests that begin at or before the window's start, but the last of them
            begun = self._requests.count_at_most("start", self.start)
            self._requests.drop(max(begun - 1, 0))

    def parts(self) -> list[dict[str, np.ndarray]]:
        """The window's accesses in the analyzer's order, chunk by chunk (AccessWindow's views):
        keys, tokens, distances (in the shared stack), principals (one column per level kept)."""
        return self._accesses.views()

    def requests(self) -> tuple[np.ndarray, np.ndarray]:
        """Each request's first access (the first at 0: a request cut by the window's start begins
        there) and its time."""
        return np.maximum(self._requests.column("start") - self.start, 0), self._requests.column("time")

    def span(self) -> WindowSpan:
        times = self._requests.column("time")
        stamped = times[np.isfinite(times)]
        seconds = float(stamped.max() - stamped.min()) if len(stamped) else None
        return WindowSpan(len(self), self.seen, self.capacity, seconds)
