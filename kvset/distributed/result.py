"""The merged state read as the one-process result: the AnalysisResult `kvset analyze` reports, with
what was read summed over the partitions and a note saying how it was computed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvset.core.curve import HitRateCurve
from kvset.distributed.partitions import PartitionError
from kvset.offline import AnalysisResult, InputSummary
from kvset.rejects import RejectCounter
from kvset.units import StreamUnits


@dataclass
class MergedAnalysis:
    """What the reports read off an analyzer, read off a merged state (a PartialStack or a
    PartialSample, which carry the analyzer's names), and how it was computed."""

    state: Any
    order: str
    units: StreamUnits | None
    computed: dict[str, Any] = field(default_factory=dict)  # partitions, workers, rounds, seconds

    def __getattr__(self, name: str) -> Any:
        if name in _READ:
            return getattr(self.state, name)
        raise AttributeError(name)

    def curve(self) -> HitRateCurve:
        return self.state.curve()


_READ = frozenset(
    ("horizon", "accesses", "tokens", "first_time", "beyond_horizon", "rereferences", "forgotten_blocks")
    + ("requests", "sampling")
)


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
