"""The engine's step as its event batches' time stamps show it: the shortest (a step) and the longest
of the recent gaps between consecutive batches.

A low quantile of the gaps is one step (consecutive batches are one step apart or more): the replay
tells a decode block from a prefill chunk by it (kvset.engine_model.replay). The longest recent gaps
bound how long n steps of the engine take (a gap is a step or more: a slow prefill step, or a moment
with nothing to run): the tracker's quiet wait is block_size of them (kvset.engine.kv_event_publisher.
Publisher.quiet_wait).
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

GAP_SAMPLES = 512  # the recent gaps kept
MIN_LONGEST_SAMPLES = 64  # gaps seen before the longest is trusted (a stream's first moments say little)


class EngineSteps:
    def __init__(self) -> None:
        self._gaps: deque[float] = deque(maxlen=GAP_SAMPLES)  # seconds between consecutive batches
        self.step_seconds: float | None = None  # the engine's step, when measured
        self._observed = 0  # gaps observed in all (what longest_steps was last worked out for)
        self._longest: tuple[tuple[int, int], float] = ((-1, 0), 0.0)

    def observe(self, gap: float) -> None:
        """The time between a batch and the one before it (positive)."""
        self._gaps.append(gap)
        self._observed += 1
        n = len(self._gaps)
        if n >= 8 and (n < 64 or n % 32 == 0):
            # consecutive batches are one step apart or more: a low quantile is one step
            self.step_seconds = float(np.quantile(self._gaps, 0.1))

    def longest_steps(self, n: int) -> float | None:
        """The n longest of the recent gaps added up (seconds): n steps of the engine take no longer,
        if none is slower than the slowest recent ones. None before MIN_LONGEST_SAMPLES gaps."""
        if len(self._gaps) < MIN_LONGEST_SAMPLES:
            return None
        key = (self._observed, n)
        if self._longest[0] != key:  # (asked at every update: worked out once a batch)
            self._longest = (key, math.fsum(heapq.nlargest(n, self._gaps)))
        return self._longest[1]
