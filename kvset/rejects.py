"""Counted, visible rejection of bad input: never a crash, never silent loss."""

from __future__ import annotations

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
    """Counts rejected input by reason and keeps the first few examples of each."""

    def __init__(self, keep_examples: int = 5) -> None:
        self.keep_examples = keep_examples
        self._counts: Counter[str] = Counter()
        self._examples: dict[str, list[str]] = {}

    def reject(self, reason: str, example: str = "", count: int = 1) -> None:
        reason = printable(reason)
        self._counts[reason] += count
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
            mine = self._examples.setdefault(reason, [])
            for ex in other._examples.get(reason, []):
                if len(mine) < self.keep_examples:
                    mine.append(ex)

    def summary(self) -> tuple[Rejection, ...]:
        return tuple(
            Rejection(reason, n, tuple(self._examples.get(reason, ())))
            for reason, n in self._counts.most_common()
        )

    def describe(self, limit: int = 3) -> str:
        """One human line per reason, with the first `limit` examples."""
        lines = []
        for r in self.summary():
            shown = "; ".join(r.examples[:limit])
            lines.append(f"{r.count} rejected: {r.reason}" + (f" ({shown})" if shown else ""))
        return "\n".join(lines)
