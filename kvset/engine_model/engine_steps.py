"""The engine's step as its event batches' time stamps show it: the shortest (a step) and the longest
of the recent gaps between consecutive batches.

A low quantile of the gaps is one step (consecutive batches are one step apart or more): the replay
tells a decode block from a prefill chunk by it (kvset.engine_model.replay). The longest recent gap
bounds how long the engine goes without publishing while it is busy (a slow prefill step, or a
moment with nothing to run): the tracker's quiet wait is a number of such steps (kvset.engine.
kv_event_publisher.Publisher.quiet_wait).
"""

from __future__ import annotations

from collections import deque

import numpy as np

GAP_SAMPLES = 512  # the recent gaps kept
MIN_LONGEST_SAMPLES = 64  # gaps seen before the longest is trusted (a stream's first moments say little)


class EngineSteps:
    def __init__(self) -> None:
        self._gaps: deque[float] = deque(maxlen=GAP_SAMPLES)  # seconds between consecutive batches
        self.step_seconds: float | None = None  # the engine's step, when measured
        self.longest: float | None = None  # the longest recent gap, once MIN_LONGEST_SAMPLES were seen

    def observe(self, gap: float) -> None:
        """The time between a batch and the one before it (positive)."""
        self._gaps.append(gap)
        n = len(self._gaps)
        if n >= 8 and (n < 64 or n % 32 == 0):
            # consecutive batches are one step apart or more: a low quantile is one step
            self.step_seconds = float(np.quantile(self._gaps, 0.1))
        if n >= MIN_LONGEST_SAMPLES:
            self.longest = max(self._gaps)  # (a few microseconds: the window's, exactly)
