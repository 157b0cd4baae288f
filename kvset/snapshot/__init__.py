"""Snapshots: one immutable value holding everything the views show, and the builder that makes it.

`model` holds the value types (the snapshot, its working-set rows, churn, thrashing, reserve and
the engine's operating point, the data-parallel ranks' views); `builder` reads the analyzer's public API once per refresh and
computes each derived figure once; `reserve` fills the full-attention versus hybrid-layer panel;
`ranks` compares each rank's own cache with one shared pool.
"""

from kvset.core.tiers import NextTier, TierPlan  # values the snapshot holds (its `tiers`)
from kvset.figures.inputs import (
    ALL_ACCESSES,
    DEFAULT_ABSOLUTE_TARGETS,
    DEFAULT_COVERAGE_TARGETS,
    MISSES_ONLY,
    WINDOWS,
)
from kvset.snapshot.model import (
    NEAR_MISS_THRASHING,
    NEAR_MISS_WARN,
    RANK_POOL_SOURCE,
    ChurnSeries,
    OperatingPoint,
    Pooling,
    RankView,
    Reserve,
    Snapshot,
    Thrashing,
    Totals,
    WorkingSetRow,
)

__all__ = [
    "ALL_ACCESSES",
    "DEFAULT_ABSOLUTE_TARGETS",
    "DEFAULT_COVERAGE_TARGETS",
    "MISSES_ONLY",
    "NextTier",
    "NEAR_MISS_THRASHING",
    "NEAR_MISS_WARN",
    "RANK_POOL_SOURCE",
    "WINDOWS",
    "ChurnSeries",
    "OperatingPoint",
    "Pooling",
    "RankView",
    "Reserve",
    "Snapshot",
    "Thrashing",
    "TierPlan",
    "Totals",
    "WorkingSetRow",
]
