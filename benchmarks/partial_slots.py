"""What carrying the time slots costs a distributed analysis (kvset.core.partial_slots), measured alone:

    python -m benchmarks.partial_slots

a partition's analysis with and without its slot marks (4M Zipf accesses with per-access timestamps
over 8 hours, in batches of 65,536), the slots' bytes in a state at the default horizon, and the
time a merge spends on them. Best of 3 each; the load average is printed, since other work on the
machine slows every figure.
"""

from __future__ import annotations

import os
import time

import numpy as np

from kvset.core.feed_args import DEFAULT_HORIZON
from kvset.core.partial_slots import merge_slots
from kvset.core.partial_stack import PartialStack, PartitionAnalyzer, array_batch
from kvset.core.partial_stack_merge import merge

N = 4_000_000
BATCH = 1 << 16


def _trace() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    keys = (rng.zipf(1.2, N) % 2_000_000).astype(np.uint64)
    return keys, np.sort(rng.uniform(0, 8 * 3600, N))


def _partition(
    keys: np.ndarray, ts: np.ndarray, lo: int, hi: int, marks: bool = True
) -> tuple[PartialStack, float]:
    p = PartitionAnalyzer(DEFAULT_HORIZON)
    if not marks:  # the analysis alone: every access in slot 0 as far as the marks go
        p._marks.feed = lambda stamps, n: np.zeros(n, dtype=np.int64)  # type: ignore[method-assign]
    t0 = time.perf_counter()
    for a in range(lo, hi, BATCH):
        b = min(hi, a + BATCH)
        p.feed_batch(array_batch(keys[a:b], 16, None, ts[a:b]))
    state = p.state()
    return state, time.perf_counter() - t0


def _best(f, repeat: int = 3) -> float:
    return min(f() for _ in range(repeat))


def main() -> None:
    keys, ts = _trace()
    _partition(keys, ts, 0, BATCH)  # compiled
    without = _best(lambda: _partition(keys, ts, 0, N, marks=False)[1])
    with_marks = _best(lambda: _partition(keys, ts, 0, N)[1])
    a, _ = _partition(keys, ts, 0, N // 2)
    b, _ = _partition(keys, ts, N // 2, N)
    assert a.windows is not None and b.windows is not None
    merge(a, b)
    whole = _best(lambda: _timed(lambda: merge(a, b)))
    no_resolve = np.zeros(len(b.firsts), dtype=np.int64)
    slots = _best(
        lambda: _timed(
            lambda: merge_slots(
                a.windows, b.windows, no_resolve, b.first_tokens, no_resolve == 0, a.complete, a.horizon
            )
        )
    )
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(
        f"partition of {N:,} accesses: {without:.3f} s without slot marks, {with_marks:.3f} s with "
        f"({100 * (with_marks / without - 1):+.1f} %)"
    )
    print(f"a state's slots: {a.windows.nbytes() / 1e6:.1f} MB of its {a.nbytes() / 1e6:.1f} MB")
    print(f"a merge of two halves: {1e3 * whole:.1f} ms, of which the slots {1e3 * slots:.1f} ms")


def _timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
