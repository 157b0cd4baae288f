"""kvset's public face for front ends: what a view of snapshots needs, and nothing else.

The terminal app (kvset_tui) imports kvset only from here (and its command line from kvset.cli, which
builds the monitor): the snapshot and every figure's result type, the constants the views colour by,
the formatters of every unit (`quantities`), the reports the app exports and prints, and the caveats.
A figure's result is read off a snapshot by its type: `snapshot.get(WorkingSets)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvset import quantities
from kvset.core.jit_cache import kernels_on_disk
from kvset.figures.churn import ChurnSeries
from kvset.figures.curve import Curves, WindowCurve
from kvset.figures.engine import EngineState
from kvset.figures.hybrid_reserve import ModelReserve
from kvset.figures.inputs import ALL_ACCESSES, MISSES_ONLY, RECONSTRUCTED, TARGET_MODES, WINDOWS, Targets
from kvset.figures.kv_cache_groups import GroupFigures, KvCacheGroups
from kvset.figures.operating_point import OperatingPoint
from kvset.figures.policy_gap import BeladyMin, HitRateGap, PolicyGap
from kvset.figures.principals import PrincipalRow, Principals
from kvset.figures.ranks import Pooling, Ranks, RankView
from kvset.figures.reading import CurveReading, read_curve
from kvset.figures.reserve import Reserve
from kvset.figures.thrashing import RANK_POOL_SOURCE, CapacityGain, Thrashing, ThrashingByWindow, thrashing_at
from kvset.figures.thrashing import RULE as THRASHING_RULE
from kvset.figures.thrashing import RULE_SHORT as THRASHING_RULE_SHORT
from kvset.figures.tiers import EngineTier, NextTier, Tier, TierPlan, Tiers
from kvset.figures.working_sets import FITS_WITH_RESERVE, FITS_WORKING_SET, WorkingSetRow, WorkingSets
from kvset.report import CAVEATS, WINDOWED_CURVES, Caveat, curve_csv, snapshot_json, snapshot_text
from kvset.snapshot import Snapshot, Totals
from kvset.text import printable
from kvset.types import EngineReading, SourceHealth, TimelineEvent

# The curve's class is the one name here that loads numpy: kvset-top's command line reads this module
# before it knows whether it will show anything (`--version`, `--help`), so it is given on first use.
if TYPE_CHECKING:
    from kvset.core.curve import HitRateCurve, Unit

_OF_THE_CURVE = ("HitRateCurve", "Unit")

__all__ = [
    "ALL_ACCESSES",
    "CAVEATS",
    "FITS_WITH_RESERVE",
    "FITS_WORKING_SET",
    "MISSES_ONLY",
    "RECONSTRUCTED",
    "THRASHING_RULE",
    "THRASHING_RULE_SHORT",
    "CapacityGain",
    "RANK_POOL_SOURCE",
    "TARGET_MODES",
    "WINDOWED_CURVES",
    "WINDOWS",
    "BeladyMin",
    "Caveat",
    "ChurnSeries",
    "CurveReading",
    "Curves",
    "EngineReading",
    "EngineState",
    "HitRateCurve",
    "HitRateGap",
    "ModelReserve",
    "GroupFigures",
    "KvCacheGroups",
    "EngineTier",
    "NextTier",
    "OperatingPoint",
    "PrincipalRow",
    "Principals",
    "PolicyGap",
    "Pooling",
    "RankView",
    "Ranks",
    "Reserve",
    "Snapshot",
    "SourceHealth",
    "Targets",
    "Thrashing",
    "ThrashingByWindow",
    "Tier",
    "TierPlan",
    "Tiers",
    "TimelineEvent",
    "Totals",
    "Unit",
    "WindowCurve",
    "WorkingSetRow",
    "WorkingSets",
    "curve_csv",
    "printable",
    "kernels_on_disk",
    "quantities",
    "read_curve",
    "snapshot_json",
    "snapshot_text",
    "thrashing_at",
]


def __getattr__(name: str) -> object:
    if name in _OF_THE_CURVE:
        from kvset.core import curve

        return getattr(curve, name)
    raise AttributeError(f"module 'kvset.api' has no attribute {name!r}")
