"""The one face of the analyzers, exact and sampled, and the one way to make either.

    a = new_analyzer(units)                                    # exact, at every capacity up to the horizon
    a = new_analyzer(units, sampling=Sampling(rate=0.01))      # an estimate from 1 % of the blocks
    a.feed_batch(batch)
    a.curve(), a.curve(window=300)

`StackDistanceAnalyzer` is what every caller (the monitor, the snapshot builder, `kvset analyze`)
may use; `Analyzer` (kvset.core.analyzer) and `SampledAnalyzer` (kvset.core.sampling) both satisfy
it. The stream's units are given at construction and never learned from a batch.

Why two analyzers and not a sampling reader in front of one (libCacheSim samples in its reader): a
reader can only drop accesses, and the exact analyzer's distances among the kept ones, scaled by
1/R, are plain SHARDS (2.5 points off on the benchmark trace, README "Sampling"). The sampled
analyzer counts every access to estimate a distance from the gap between two sampled ones, weighs
each position band by its exact access count and keeps the request heads at boosted rates: it needs
every access, in a kernel of its own that filters and analyzes in one pass over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from kvset.core.analyzer import Analyzer
from kvset.core.curve import HitRateCurve, SampleInfo
from kvset.core.feed_args import DEFAULT_HORIZON, Order
from kvset.core.sampling import SampledAnalyzer
from kvset.core.slots import SlotSeries
from kvset.types import AccessBatch
from kvset.units import StreamUnits


@runtime_checkable
class StackDistanceAnalyzer(Protocol):
    """LRU stack distances of a stream of block accesses, read as hit-rate curves."""

    units: StreamUnits
    horizon: int
    order: Order
    requests: int
    late_accesses: int
    first_time_at: float | None
    last_time_at: float | None

    @property
    def block_size(self) -> int: ...
    @property
    def sampling(self) -> SampleInfo | None: ...
    @property
    def accesses(self) -> int: ...
    @property
    def tokens(self) -> int: ...
    @property
    def tracked_blocks(self) -> int: ...
    @property
    def forgotten_blocks(self) -> int: ...
    @property
    def first_time(self) -> int: ...
    @property
    def beyond_horizon(self) -> int: ...
    @property
    def rereferences(self) -> int: ...
    @property
    def fine_span_seconds(self) -> float: ...
    @property
    def coarse_slot_seconds(self) -> float: ...
    @property
    def coarse_span_seconds(self) -> float: ...

    def feed_batch(self, batch: AccessBatch, return_distances: bool = False) -> np.ndarray | None: ...
    def feed(
        self,
        keys: npt.ArrayLike,
        tokens: npt.ArrayLike | None = None,
        request_starts: npt.ArrayLike | None = None,
        timestamps: npt.ArrayLike | None = None,
        return_distances: bool = False,
    ) -> np.ndarray | None: ...
    def curve(self, window: float | None = None) -> HitRateCurve: ...
    def slot_series(self, seconds: float, coarse: bool = False) -> SlotSeries: ...
    def consecutive_window_curves(self, seconds: float, points: int) -> list[HitRateCurve]: ...
    def memory_bytes(self) -> int: ...


@dataclass(frozen=True)
class Sampling:
    """A spatial sample of the blocks (kvset.core.sampling): at a fixed `rate`, or of at most `size`
    tracked blocks; `seed` picks which blocks. watch_positions: drop the head boost when block
    positions are seen to vary (kvset.core.sampling_rates); False trusts them to be fixed, as the
    partitions of kvset.core.partial_sample must."""

    rate: float | None = None
    size: int | None = None
    seed: int = 0
    watch_positions: bool = True

    def __post_init__(self) -> None:
        if (self.rate is None) == (self.size is None):
            raise ValueError("give a sample rate or a sample size, not both")

    @staticmethod
    def of(rate: float | None, size: int | None, seed: int = 0) -> Sampling | None:
        """From the command line's --sample, --sample-size and --seed (None: every block, exact)."""
        return None if rate is None and size is None else Sampling(rate, size, seed)


def new_analyzer(
    units: StreamUnits,
    horizon: int = DEFAULT_HORIZON,
    order: Order = "forward",
    sampling: Sampling | None = None,
    preallocate: bool = False,
    **slots: Any,  # the rings' seconds (float) and slot counts (int)
) -> StackDistanceAnalyzer:
    """The exact analyzer, or with `sampling` the sampled one, of a stream in `units`.
    slots: the time-slot rings' shape (slot_seconds, fine_slots, coarse_seconds, coarse_slots);
    preallocate: the exact analyzer's tables for its whole horizon at once (a live stream's, so that
    no growth stalls it; the sampled one's are bounded by its sample)."""
    if sampling is None:
        return Analyzer(horizon, order, units=units, preallocate=preallocate, **slots)
    return SampledAnalyzer(
        horizon,
        order,
        units=units,
        sample_rate=sampling.rate,
        sample_size=sampling.size,
        seed=sampling.seed,
        watch_positions=sampling.watch_positions,
        **slots,
    )
