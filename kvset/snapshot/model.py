"""The snapshot: one immutable value holding everything the views show.

A header (what the stream is, who delivered it, the totals) and the result of every figure
(kvset.figures), by the figure's result type: `snapshot.get(WorkingSets)`. Built in the pipeline's
worker thread after the analyzer has been fed (or once, after a whole trace: kvset analyze); views
(the Textual app, the text and JSON reports, the exporter) only read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kvset.figures.base import Sizes
from kvset.figures.inputs import ALL_ACCESSES, Targets
from kvset.rejects import Rejection
from kvset.types import SourceHealth, TimelineEvent
from kvset.units import StreamUnits

if TYPE_CHECKING:  # a snapshot's types are read by kvset-top's command line before it reads anything
    from kvset.core.curve import SampleInfo

R = TypeVar("R")


@dataclass(frozen=True)
class Totals:
    accesses: int
    tokens: int
    requests: int
    first_time: int  # accesses to never-seen blocks (distinct blocks seen)
    rereferences: int
    beyond_horizon: int
    tracked_blocks: int
    late_accesses: int = 0  # out-of-order timestamps folded into the current slot
    forgotten_blocks: int = 0  # blocks forgotten at the horizon: the horizon was reached
    # False once the analyzer could not remember every forgotten block: first_time is then at most,
    # beyond_horizon at least, what they say (their sum, every miss, is exact)
    misses_split_exact: bool = True

    @property
    def first_time_bound(self) -> str:
        """'at most ' when first_time is an upper bound, else ''."""
        return "" if self.misses_split_exact else "at most "

    @property
    def beyond_horizon_bound(self) -> str:
        """'at least ' when beyond_horizon is a lower bound, else ''."""
        return "" if self.misses_split_exact else "at least "


@dataclass(frozen=True)
class InputRead:
    """What `kvset analyze` read: a file (or the demo, a log), as its reader saw it. A live snapshot
    has none: its sources' health says the same per source."""

    name: str
    format: str
    lines: int
    rejected: tuple[Rejection, ...]
    warnings: tuple[Rejection, ...]  # requests kept with a warning
    notes: tuple[str, ...]  # what the reader decided
    read_seconds: float
    analyze_seconds: float

    @property
    def rejected_total(self) -> int:
        return sum(r.count for r in self.rejected)


@dataclass(frozen=True, eq=False)
class Snapshot:
    seq: int
    taken_at: float  # wall time
    data_time: float  # timestamp of the newest access (trace time in a replay)
    horizon: int
    order: str
    units: StreamUnits | None  # the stream's block size (None while no access has told it)
    bytes_per_block: int | None  # full-attention bytes per block (with a model)
    totals: Totals
    targets: Targets
    sources: tuple[SourceHealth, ...] = ()
    events: tuple[TimelineEvent, ...] = ()
    accesses_per_second: float = 0.0  # recent ingest rate
    demo: bool = False
    # a sampled analyzer's sample (rate, size, seed, blocks tracked): then every curve, working set and
    # count but accesses, tokens and requests is an estimate; None: measured on every block
    sample: SampleInfo | None = None
    # what the curve is the curve of: ALL_ACCESSES, or MISSES_ONLY while an engine's KV events show
    # only its newly stored blocks (then it is not comparable with the engine's own hit rate)
    curve_scope: str = ALL_ACCESSES
    input: InputRead | None = None
    # every figure's result, by its type (kvset.figures.FIGURES); a figure that does not apply has none
    results: Mapping[type, Any] = field(default_factory=dict)

    def get(self, kind: type[R]) -> R | None:
        """The result of the figure whose result type is `kind` (None: not computed for this snapshot)."""
        value = self.results.get(kind)
        return value if isinstance(value, kind) else None

    @property
    def block_tokens(self) -> int | None:
        """Tokens per block of the analyzed stream."""
        return self.units.block_size if self.units is not None else None

    @property
    def sizes(self) -> Sizes:
        return Sizes(self.block_tokens, self.bytes_per_block)

    @property
    def main_mode(self) -> str:
        return self.targets.main_mode

    @property
    def main_target(self) -> float:
        return self.targets.main_target

    @property
    def horizon_reached(self) -> bool:
        return self.totals.forgotten_blocks > 0

    @property
    def rejected_total(self) -> int:
        read = self.input.rejected_total if self.input is not None else 0
        return read + sum(s.rejected_total for s in self.sources)
