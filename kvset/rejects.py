"""Counted, visible rejection of bad input: never a crash, never silent loss."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from kvset.text import printable

EXAMPLE_CHARS = 200  # an example is cut to this many characters of input before it is escaped
# Distinct reasons kept by one counter; past them a reason is counted under FURTHER_REASONS (with it
# as the example), so a reason that quotes changing input cannot grow the counter without bound.
MAX_REASONS = 64
FURTHER_REASONS = f"further reasons (past the first {MAX_REASONS} kinds)"

# Every reason's short code (the exporter's `code` label): the first code one of whose phrases the
# reason contains (lower case), else "other". A fixed, bounded set; the reasons' wording is where the
# rejections are made (the sources, formats and engine readers), the codes only here.
REASON_CODES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("further_reasons", ("further reasons",)),
    ("source_failed", ("source failed",)),
    # the pipeline's own, which quote an exception's message: before the phrases it could contain
    ("analyzer", ("refused by the analyzer",)),
    ("not_recorded", ("not recorded:",)),
    ("too_large", ("longer than", "larger than", "nested too deeply")),
    ("truncated", ("truncated", "ends early", "mid-response", "line cut")),
    ("not_metrics", ("not a prometheus", "no vllm: or sglang:", "empty response")),
    ("unparsable_metrics", ("unparsable metrics", "unusable metrics", "too slow to parse")),
    ("bad_counter", ("unusable counter",)),
    ("not_json", ("not json", "not a json object")),
    ("replay", ("replay:",)),
    ("bad_event", ("event:",)),
    ("bad_payload", ("payload:", "undecodable")),
    ("bad_message", ("message:", "sequence frame")),
    ("sequence", ("sequence number",)),
    ("block_size", ("block size", "-token blocks", "tokens: refused")),
    ("timestamp", ("timestamp",)),
    (
        "bad_field",
        ("missing field", "empty ", "wrong type", "negative", "out of range", "hash id", "token id"),
    ),
    ("unreadable", ("unreadable",)),
    ("log_line", ("malformed", "unrecognised", "prompt", "percentage", "stats line", "token usage", "line")),
)
OTHER_CODE = "other"


def reason_code(reason: str) -> str:
    """The reason's code (REASON_CODES), "other" when none matches."""
    lower = reason.lower()
    for code, phrases in REASON_CODES:
        if any(p in lower for p in phrases):
            return code
    return OTHER_CODE


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

    @property
    def code(self) -> str:
        return reason_code(self.reason)


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
        if reason not in self._counts and len(self._counts) >= MAX_REASONS:
            reason, example = FURTHER_REASONS, reason + (f" ({example})" if example else "")
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
