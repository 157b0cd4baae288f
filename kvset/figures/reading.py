"""The curve read at one capacity the user points at (kvset-top's cursor): the hit rate there and what
doubling the capacity would add. Not a figure of the snapshot: a read of the snapshot's curve that the
app asks for as the cursor moves, so that it has one definition beside the knee's (which looks for
where that doubling gain falls below KNEE_MIN_GAIN)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    from kvset.core.curve import HitRateCurve, Unit


@dataclass(frozen=True)
class CurveReading:
    capacity_blocks: int
    unit: Unit  # which hit rate: of blocks, or of tokens
    hit_rate: float
    doubling_gain: float  # hit rate at twice the capacity, less the hit rate here
    beyond_horizon: bool  # the capacity is past the horizon: the curve is not exact there


def read_curve(curve: HitRateCurve, capacity_blocks: int, unit: Unit = "blocks") -> CurveReading:
    c = max(1, int(capacity_blocks))
    here = curve.hit_rate(c, unit)
    return CurveReading(c, unit, here, curve.hit_rate(2 * c, unit) - here, c > curve.horizon)
