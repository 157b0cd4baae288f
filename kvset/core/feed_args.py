"""What a feed of accesses takes, checked once for every analyzer (exact and sampled): tokens,
request starts, timestamps, the order inside a request; and how the analyzers allocate their state.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import numpy as np
import numpy.typing as npt

# defined where the command line reads them without numpy; the analyzers read them here
from kvset.core import DEFAULT_HORIZON as DEFAULT_HORIZON
from kvset.core import ORDERS as ORDERS

MAX_TIMESTAMP = 1e11  # seconds from zero (about 3,000 years); beyond it a timestamp is garbage
Order = Literal["forward", "reverse"]

try:  # numpy's switch for madvise(MADV_HUGEPAGE) on large arrays (private, so guarded)
    from numpy._core.multiarray import (  # type: ignore[attr-defined]  # private: not in numpy's stubs
        _get_madvise_hugepage,
        _set_madvise_hugepage,
    )

    _HUGEPAGE_SWITCH = True
except ImportError:  # pragma: no cover - older or newer numpy
    _HUGEPAGE_SWITCH = False


@contextmanager
def no_hugepage_advice() -> Iterator[None]:
    """Allocate the state without numpy's huge-page advice.

    Where transparent huge pages are on "madvise" but none can be had (as on the VMs we
    measured), each first touch of advised memory tries to compact memory synchronously:
    touching 80 MB took 0.11 s with the advice and 0.03 s without, and growing the analyzer
    to 1M blocks spent most of its time there (benchmarks/: 0.90-1.0 s against 0.70 s).
    """
    if not _HUGEPAGE_SWITCH:
        yield
        return
    previous = _get_madvise_hugepage()
    _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(previous)


def cache_aligned_zeros(shape: int | tuple[int, ...], dtype: type[np.generic] = np.uint64) -> np.ndarray:
    """Zeros whose first element starts a cache line, so 64-byte groups (a live-bit superblock,
    for one) are one line each, not two."""
    n = int(np.prod(shape))
    raw = np.zeros(n + 8, dtype=dtype)
    skip = (-raw.ctypes.data % 64) // raw.itemsize
    return raw[skip : skip + n].reshape(shape)


def check_analyzer_args(horizon: int, order: str, slot_seconds: float, coarse_seconds: float) -> None:
    """The constructor arguments every analyzer takes."""
    if horizon < 1:
        raise ValueError("horizon must be at least 1 block")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if slot_seconds <= 0 or coarse_seconds < slot_seconds:
        raise ValueError("slot widths must be positive and the coarse slot at least the fine one")


def tokens_array(tokens: npt.ArrayLike | None, n: int, default: int) -> np.ndarray:
    """Per-access tokens, or a length-1 array when every access covers the same number."""
    tok = np.asarray(default if tokens is None else tokens)
    if tok.ndim == 0:
        if int(tok) < 0:
            raise ValueError("tokens per access must not be negative")
        return np.array([int(tok)], dtype=np.int64)
    # int32 (the trace readers') and int64 go to the kernel as they are: no copy per batch
    tok = np.ascontiguousarray(tok, dtype=tok.dtype if tok.dtype in (np.int32, np.int64) else np.int64)
    if tok.shape != (n,):
        raise ValueError(f"tokens has {tok.shape} entries for {n} accesses")
    if n and tok.min() < 0:
        raise ValueError("tokens per access must not be negative")
    return tok


def request_starts_array(request_starts: npt.ArrayLike | None, n: int) -> np.ndarray:
    if request_starts is None:
        return np.zeros(0, dtype=np.int64)
    starts = np.asarray(request_starts, dtype=np.int64)
    if len(starts) and (starts[0] < 0 or starts[-1] >= n or np.any(np.diff(starts) <= 0)):
        raise ValueError("request_starts must be strictly increasing indices into the batch")
    return starts


def timestamps_array(timestamps: npt.ArrayLike | None, n: int) -> tuple[np.ndarray, float, float]:
    """Per-access or one timestamp (default: now), with their earliest and latest."""
    if timestamps is None:
        now = time.time()
        return np.array([now], dtype=np.float64), now, now
    ts = np.asarray(timestamps, dtype=np.float64)
    if ts.ndim == 0:
        ts = ts.reshape(1)
    if ts.shape != (n,) and ts.shape != (1,):
        raise ValueError(f"timestamps has {ts.shape} entries for {n} accesses")
    lo, hi = float(ts.min()), float(ts.max())  # one pass each, for the check and the slots
    if not (lo >= -MAX_TIMESTAMP and hi <= MAX_TIMESTAMP):  # also false for nan
        raise ValueError(f"timestamps must be finite seconds within ±{MAX_TIMESTAMP:g}")
    return ts, lo, hi


def reverse_within_requests(starts: np.ndarray, n: int) -> np.ndarray:
    """Permutation that reverses each request's accesses (accesses before the first start form a segment)."""
    bounds = starts if starts[0] == 0 else np.concatenate([[0], starts])
    ends = np.concatenate([bounds[1:], [n]])
    lengths = ends - bounds
    seg = np.repeat(np.arange(len(bounds)), lengths)
    pos = np.arange(n) - bounds[seg]
    order: np.ndarray = ends[seg] - 1 - pos
    return order
