"""The curve's cursor (←/→, c): where it appears, how far it goes, the curve it reads and its readout.
The reading itself is kvset.api.read_curve's; this is where the app points it."""

from __future__ import annotations

from kvset.api import CurveReading, Curves, HitRateCurve, Snapshot
from kvset.api import quantities as fmt
from kvset_tui.capacity_units import capacity_text, engine_pool
from kvset_tui.view_state import ViewState


def shown_curve(snapshot: Snapshot, view: ViewState) -> HitRateCurve | None:
    """The curve the view shows: the selected rank's own (all time), else the chosen window's."""
    rank = view.rank_view(snapshot)
    if rank is not None:
        return rank.window.curve
    curves = snapshot.get(Curves)
    return curves.curve(view.window) if curves is not None else None


def cursor_range(snapshot: Snapshot | None, view: ViewState) -> tuple[int, int] | None:
    """Where a new cursor appears (the pool, else the knee, else half the largest distance) and the
    largest capacity it goes to, in blocks; None before there is a curve to point at."""
    curves = snapshot.get(Curves) if snapshot is not None else None
    every = curves.window("all") if curves is not None else None
    if snapshot is None or every is None or not every.curve.accesses:
        return None
    reach = max(2, every.curve.max_distance())
    start = engine_pool(snapshot) or every.knee_capacity() or reach // 2
    return start, min(snapshot.horizon, 2 * max(reach, start))


def cursor_text(reading: CurveReading, snapshot: Snapshot, unit: str) -> str:
    """The cursor's readout: its capacity, the hit rate there and what doubling it adds."""
    where = capacity_text(reading.capacity_blocks, snapshot, unit)
    beyond = " (past the horizon)" if reading.beyond_horizon else ""
    return f"▸ {where}{beyond}: {fmt.percent(reading.hit_rate)} · ×2 {fmt.points(reading.doubling_gain)}"
