"""Counted, visible rejection of bad input: never a crash, never silent loss."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from kvset.text import printable

EXAMPLE_CHARS = 200  # an example is cut to this many characters of input before it is escaped


@dataclass(frozen=True)
class Rejection:
    """One reason input was refused, how often, and the first few examples. Reasons and examples
    quote input (a log line, a label, an exception's message), so they are escaped when built."""

    reason: str
    count: int
    examples: tuple[str, ...]  # the first few, e.g. "line 12: not JSON"

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", printable(self.reason))
        object.__setattr__(self, "examples", tuple(printable(e) for e in self.examples))


class RejectCounter:
    """Counts rejected input by reason and keeps the first few examples of each.

    The summary lists the reasons by count, most first, and equal counts by the first place in the
    input each was met at (`at`, e.g. a line number, when the caller knows it), then as they came:
    the same input gives the same list whichever way it was read."""

    def __init__(self, keep_examples: int = 5) -> None:
        self.keep_examples = keep_examples
        self._counts: Counter[str] = Counter()
        self._examples: dict[str, list[str]] = {}
        self._first_at: dict[str, float] = {}

    def reject(self, reason: str, example: str = "", count: int = 1, at: int | None = None) -> None:
        reason = printable(reason)
        self._counts[reason] += count
        if at is not None:
            self._first_at[reason] = min(at, self._first_at.get(reason, math.inf))
        examples = self._examples.setdefault(reason, [])
        if example and len(examples) < self.keep_examples:
            examples.append(printable(example[:EXAMPLE_CHARS]))

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def __bool__(self) -> bool:
        return self.total > 0

    def merge(self, other: RejectCounter) -> None:
        for reason, n in other._counts.items():
            self._counts[reason] += n
            if reason in other._first_at:
                self._first_at[reason] = min(other._first_at[reason], self._first_at.get(reason, math.inf))
            mine = self._examples.setdefault(reason, [])
            for ex in other._examples.get(reason, []):
                if len(mine) < self.keep_examples:
                    mine.append(ex)

    def summary(self) -> tuple[Rejection, ...]:
        arrival = {reason: i for i, reason in enumerate(self._counts)}
        order = sorted(
            self._counts, key=lambda r: (-self._counts[r], self._first_at.get(r, math.inf), arrival[r])
        )
        return tuple(Rejection(r, self._counts[r], tuple(self._examples.get(r, ()))) for r in order)

    def describe(self, limit: int = 3) -> str:
        """One human line per reason, with the first `limit` examples."""
        lines = []
        for r in self.summary():
            shown = "; ".join(r.examples[:limit])
            lines.append(f"{r.count} rejected: {r.reason}" + (f" ({shown})" if shown else ""))
        return "\n".join(lines)
