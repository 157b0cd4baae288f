"""The merged state read as the one-process result: the AnalysisResult `kvset analyze` reports, with
what was read summed over the partitions and a note saying how it was computed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvset.core.curve import HitRateCurve
from kvset.offline import AnalysisResult, InputSummary
from kvset.rejects import RejectCounter


@dataclass
class MergedAnalysis:
    """What the reports read off an analyzer, read off a merged state (a PartialStack or a
    PartialSample, which carry the analyzer's names), and how it was computed."""

    state: Any
    order: str
    block_tokens: int | None
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


def merged_summary(name: str, parts: list[dict[str, Any]], given_format: str | None) -> InputSummary:
    """What was read, summed over the partitions' extras (in stream order)."""
    first = next((p for p in parts if p["requests"]), parts[0])
    summary = InputSummary(name=name, format=first["format"] or "", block_tokens=first["block_tokens"])
    notes: list[str] = []
    for p in parts:
        summary.requests += p["requests"]
        summary.lines += p["lines"]
        summary.rejects.merge(p["rejects"])
        if isinstance(p["warnings"], RejectCounter):
            summary.warnings.merge(p["warnings"])
        for note in p["notes"]:
            if given_format is None and note.endswith("(given)") and note.startswith("format "):
                continue  # the format was detected on the first partition, handed to the others
            if note not in notes:
                notes.append(note)
    if len(parts) > 1 and summary.rejects:
        notes.append("line numbers in rejections count from the start of each partition")
    summary.notes = notes
    return summary


def distributed_result(
    name: str,
    state: Any,
    parts: list[dict[str, Any]],
    order: str,
    given_format: str | None,
    how: list[str],
    seconds: float,
) -> AnalysisResult:
    """The AnalysisResult of a merged state: the same object, report and JSON as one process's."""
    summary = merged_summary(name, parts, given_format)
    summary.notes = [*how[:-1], *(n for n in summary.notes if n not in how), how[-1]]
    analysis = MergedAnalysis(state, order, summary.block_tokens)
    return AnalysisResult(summary, analysis, analysis.curve(), seconds)  # type: ignore[arg-type]
