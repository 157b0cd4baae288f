"""Snapshots: one immutable value holding everything the views show, and the builder that makes it.

`model` holds the value types (the snapshot, its working-set rows, churn, thrashing, reserve and
the engine's operating point); `builder` reads the analyzer's public API once per refresh and
computes each derived figure once; `reserve` fills the full-attention versus hybrid-layer panel.
"""

from kvset.snapshot.model import (
    ALL_ACCESSES,
    DEFAULT_ABSOLUTE_TARGETS,
    DEFAULT_COVERAGE_TARGETS,
    MISSES_ONLY,
    NEAR_MISS_THRASHING,
    NEAR_MISS_WARN,
    WINDOWS,
    ChurnSeries,
    OperatingPoint,
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
    "NEAR_MISS_THRASHING",
    "NEAR_MISS_WARN",
    "WINDOWS",
    "ChurnSeries",
    "OperatingPoint",
    "Reserve",
    "Snapshot",
    "Thrashing",
    "Totals",
    "WorkingSetRow",
]
