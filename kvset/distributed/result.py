"""The merged state read as the one-process result: the AnalysisResult `kvset analyze` reports, with
what was read summed over the partitions and a note saying how it was computed."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from kvset.core.curve import HitRateCurve, SampleInfo
from kvset.core.log_grid import WINDOW_GRID
from kvset.core.slots import TimeSlotViews
from kvset.distributed.partitions import PartitionError
from kvset.offline import AnalysisResult, InputSummary
from kvset.rejects import RejectCounter
from kvset.types import AccessBatch
from kvset.units import DEFAULT_UNITS, StreamUnits


class MergedAnalysis(TimeSlotViews):
    """The analyzer protocol (kvset.core.stack_distance.StackDistanceAnalyzer) over a merged
    PartialStack, which carries the analyzer's names and time slots (a PartialSample's do not merge
    yet): what the snapshot and the reports read, and how it was computed. It takes no more accesses."""

    def __init__(self, state: Any, order: str, units: StreamUnits | None) -> None:
        self.state = state
        self.order = order
        self.units = units or DEFAULT_UNITS
        self.computed: dict[str, Any] = {}  # partitions, workers, rounds, seconds
        self.horizon = int(state.horizon)
        self.requests = state.requests
        self.first_time_at = None if state.t_first != state.t_first else float(state.t_first)
        self.last_time_at = None if state.t_last != state.t_last else float(state.t_last)
        windows = state.windows
        self.fine, self.coarse = windows.fine.ring(), windows.coarse.ring()
        self.late_accesses = int(windows.late)
        self.grid_capacities = WINDOW_GRID.capacities(self.horizon)

    @property
    def block_size(self) -> int:
        return self.units.block_size

    @property
    def sampling(self) -> SampleInfo | None:
        info: SampleInfo | None = self.state.sampling
        return info

    @property
    def accesses(self) -> int:
        return int(self.state.accesses)

    @property
    def tokens(self) -> int:
        return int(self.state.tokens)

    @property
    def tracked_blocks(self) -> int:
        return int(self.state.tracked_blocks)

    @property
    def forgotten_blocks(self) -> int:
        return int(self.state.forgotten_blocks)

    @property
    def first_time(self) -> int:
        return int(self.state.first_time)

    @property
    def beyond_horizon(self) -> int:
        return int(self.state.beyond_horizon)

    @property
    def rereferences(self) -> int:
        return int(self.state.rereferences)

    def feed_batch(self, batch: AccessBatch, return_distances: bool = False) -> np.ndarray | None:
        raise TypeError("a merged analysis takes no more accesses")

    def feed(self, keys: npt.ArrayLike, *args: Any, **kwargs: Any) -> np.ndarray | None:
        raise TypeError("a merged analysis takes no more accesses")

    def curve(self, window: float | None = None) -> HitRateCurve:
        """The all-time curve, or the last `window` seconds' (grid), as the analyzer gives them."""
        if window is None:
            return self._all_time
        return self.window_curve(float(window))

    @cached_property
    def _all_time(self) -> HitRateCurve:
        curve: HitRateCurve = self.state.curve()  # built once: the state takes no more accesses
        return curve

    def memory_bytes(self) -> int:
        return int(self.state.nbytes())


def merged_summary(name: str, parts: list[dict[str, Any]]) -> InputSummary:
    """What was read, summed over the partitions' extras (in stream order). Every partition settles
    its format and units on its own first requests; they must be the first partition's, as one process
    reads the whole file with what its first requests settle."""
    read = [p for p in parts if p["requests"]]
    first = read[0] if read else parts[0]
    for p in read[1:]:
        if p["format"] != first["format"] or _size(p["units"]) != _size(first["units"]):
            raise PartitionError(
                f"{p['partition']} reads as {p['format']} with {p['units'].describe()}, but "
                f"{first['partition']} as {first['format']} with {first['units'].describe()}: give --format "
                "and --block-size, or run without workers"
            )
    summary = InputSummary(name=name, format=first["format"] or "", units=first["units"])
    notes: list[str] = list(first["notes"])
    for p in parts:
        summary.requests += p["requests"]
        summary.lines += p["lines"]
        summary.rejects.merge(p["rejects"])
        if isinstance(p["warnings"], RejectCounter):
            summary.warnings.merge(p["warnings"])
        for note in p["notes"]:
            # the format each partition detected on its own first line: the first one's says it
            if note not in notes and not note.startswith("format "):
                notes.append(note)
    if len(parts) > 1 and summary.rejects:
        notes.append("line numbers in rejections count from the start of each partition")
    summary.notes = notes
    return summary


def _size(units: Any) -> tuple[int, str | None]:
    return units.block_size, units.convention


def distributed_result(
    name: str, state: Any, parts: list[dict[str, Any]], order: str, how: str, seconds: float
) -> AnalysisResult:
    """The AnalysisResult of a merged state: the same object, report and JSON as one process's."""
    summary = merged_summary(name, parts)
    summary.notes.append(how)
    analysis = MergedAnalysis(state, order, summary.units)
    return AnalysisResult(summary, analysis, analysis.curve(), seconds)  # type: ignore[arg-type]
