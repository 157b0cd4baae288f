"""What the hit-rate curve draws, in display units: the series, the axis range and ticks, the markers
and their labels; built from a snapshot and the view, without drawing anything."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from kvset.api import (
    BeladyMin,
    CurveReading,
    Curves,
    HitRateCurve,
    OperatingPoint,
    Snapshot,
    WindowCurve,
    WorkingSets,
    read_curve,
)
from kvset.api import quantities as fmt
from kvset_tui.capacity_units import engine_pool, hit_unit, to_unit
from kvset_tui.cursor import shown_curve
from kvset_tui.view_state import ViewState

SAMPLES = 160  # points per curve: enough for any terminal width, cheap to read off the curve
MIN_WIDTH, MIN_HEIGHT = 24, 7


Alignment = Literal["left", "right"]  # where a line's label sits against it


@dataclass(frozen=True)
class CurveSeries:
    x: list[float]
    y: list[float]  # hit rate in percent


@dataclass(frozen=True)
class PlotData:
    """Everything the plot draws, in display units; built from a snapshot without analysis."""

    unit: str
    hit_unit: str
    x_low: float
    x_high: float
    all_time: CurveSeries | None
    window: CurveSeries | None
    window_label: str
    markers: tuple[tuple[str, float], ...]  # (target label, x) for reached working sets
    engine: tuple[float, float] | None  # (x, measured hit rate %)
    engine_capacity: float | None = None  # x of the engine's pool, drawn even without a measured rate
    opt: CurveSeries | None = None  # Belady MIN's all-time curve (--opt), once the whole trace is known
    note: str = ""
    knee: tuple[float, float] | None = None  # (x, hit rate %) where the all-time curve's returns die
    # the engine model's prediction, drawn on the curve at the pool's effective capacity: (x, hit rate %)
    effective: tuple[float, float] | None = None
    cursor: float | None = None  # x of the cursor (left/right, c), and the shown curve read there
    reading: CurveReading | None = None


# The axis starts a little below the capacity where the curve first moves (1 % of its final hits)
# and ends past where it has nearly settled (99 %), the largest working set and the pool: a flat 0 %
# from 1 block, or a flat tail to the horizon, would take most of the width and say nothing.
KNEE_MARK = "●"  # on the all-time curve where doubling the capacity gains less than a point
OPT_MARK = "•"  # MIN's curve: dots, so that it reads apart from LRU's braille line without colour
MOVES_AT = 0.01
SETTLES_AT = 0.99
AXIS_MARGIN = 1.25  # the x range reaches this factor past the last thing it must show


def sample_capacities(top: int, log_x: bool, n: int = SAMPLES, low: int = 1) -> np.ndarray:
    top = max(low + 1, int(top))
    low = max(1, int(low))
    raw = np.geomspace(low, top, n) if log_x else np.linspace(low, top, n)
    return np.unique(np.round(raw).astype(np.int64))


def capacity_reaching(curve: HitRateCurve, share: float) -> int | None:
    """The smallest capacity whose hits reach `share` of the curve's final hits (None: no hits)."""
    if len(curve.capacities) == 0 or curve.block_hits[-1] <= 0:
        return None
    need = max(1, math.ceil(share * int(curve.block_hits[-1])))
    i = int(np.searchsorted(curve.block_hits, need, side="left"))
    return int(curve.capacities[min(i, len(curve.capacities) - 1)])


def saturation_capacity(curve: HitRateCurve) -> int:
    """Where the curve has nearly settled (99 % of its final hits): beyond it the curve is all but flat.

    Windowed curves are read on a grid that runs to the horizon; plotting to there would squeeze the
    interesting part into a corner."""
    return capacity_reaching(curve, SETTLES_AT) or 1


def nice_floor(x: float) -> float:
    """The largest 1, 2 or 5 times a power of ten not above x (at least 1)."""
    if x <= 1:
        return 1.0
    e = math.floor(math.log10(x))
    return max(m * 10.0**e for m in (1, 2, 5) if m * 10.0**e <= x)


def axis_range(
    curves: list[HitRateCurve], must_show: list[int], log_x: bool, horizon: int
) -> tuple[int, int]:
    """(first, last) capacity in blocks the x axis spans; see MOVES_AT and SETTLES_AT."""
    moves = [c for c in (capacity_reaching(curve, MOVES_AT) for curve in curves) if c]
    top = max([2, *(saturation_capacity(c) for c in curves), *must_show])
    top = int(math.ceil(top * AXIS_MARGIN))
    if horizon:
        top = min(top, max(horizon, 2))
    low = 1
    if log_x and moves:
        low = int(nice_floor(min([min(moves) / 2, *(m / AXIS_MARGIN for m in must_show)])))
    return max(1, min(low, top // 2)), top


def _series(curve: HitRateCurve, caps: np.ndarray, snapshot: Snapshot, unit: str) -> CurveSeries:
    rates = curve.hit_rates(caps, unit=hit_unit(unit)) * 100.0
    factor = to_unit(1, snapshot, unit) or 1.0
    return CurveSeries(x=(caps * factor).tolist(), y=rates.tolist())


def label_point(series: CurveSeries, share: float = 0.6) -> tuple[float, float] | None:
    """Where a curve's name goes: its first point at `share` of its height (a label ending there sits
    left of the curve, where MIN's curve has nothing but empty plot: LRU's lies to its right)."""
    top = max(series.y, default=0.0)
    if top <= 0:
        return None
    i = next(i for i, y in enumerate(series.y) if y >= share * top)
    return series.x[i], series.y[i]


def _knee_point(window: WindowCurve, snapshot: Snapshot, unit: str) -> tuple[float, float] | None:
    """The curve's knee (the curve figure's, the one the reports print) in display units."""
    knee = window.knee_capacity(hit_unit(unit))
    x = to_unit(knee, snapshot, unit) if knee else None
    if knee is None or x is None:
        return None
    return float(x), 100.0 * window.curve.hit_rate(knee, hit_unit(unit))


def _engine_point(snapshot: Snapshot, x: float | None) -> tuple[float, float] | None:
    """The engine's own operating point: its pool and the token hit rate it measured."""
    op = snapshot.get(OperatingPoint)
    if op is None or x is None or op.measured_token_hit_rate is None:
        return None
    return float(x), 100.0 * float(op.measured_token_hit_rate)


def plot_data(snapshot: Snapshot, view: ViewState) -> PlotData | None:
    """The curves and markers for this view, or None when there is nothing to draw yet."""
    curves = snapshot.get(Curves)
    every = curves.window("all") if curves is not None else None
    all_time = every.curve if every is not None else None
    unit = view.effective_unit(snapshot)
    if (
        curves is None
        or every is None
        or all_time is None
        or not all_time.accesses
        or not len(all_time.capacities)
    ):
        return engine_only(snapshot, unit)
    window_curve = curves.curve(view.window) if view.window != "all" else None
    ws = snapshot.get(WorkingSets)
    rows = ws.rows_for(view.window, view.target_mode) if ws is not None else ()
    engine_blocks = engine_pool(snapshot)
    show_engine = True
    rank = view.rank_view(snapshot)
    if rank is not None:
        # one rank's own cache: its all-time curve (ranks keep no windows), working sets and pool; the
        # engine's measured hit rate is of all ranks together, so no operating point
        every, window_curve, rows = rank.window, None, rank.working_set_rows(view.target_mode)
        all_time = every.curve
        engine_blocks, show_engine = rank.pool_blocks, False
        if all_time.accesses == 0:
            return None
    opt = snapshot.get(BeladyMin)
    opt_curve = opt.curve if opt is not None and rank is None else None  # of the merged stream only
    shown = [all_time] + [c for c in (window_curve, opt_curve) if c is not None]
    must_show = [b for b in [engine_blocks, *(r.capacity_blocks for r in rows)] if b]
    low_blocks, top = axis_range(shown, must_show, view.log_x, snapshot.horizon)
    caps = sample_capacities(top, view.log_x, low=low_blocks)
    markers = tuple(
        (
            fmt.target_label(r.target, r.mode).split(" % ")[0],
            float(to_unit(r.capacity_blocks, snapshot, unit) or 0),
        )
        for r in rows
        if r.reached and r.capacity_blocks
    )
    engine_x = to_unit(engine_blocks, snapshot, unit) if engine_blocks else None
    low = to_unit(low_blocks, snapshot, unit) or float(low_blocks)
    high = to_unit(top, snapshot, unit) or float(top)
    op = snapshot.get(OperatingPoint)
    effective = None
    if op is not None and op.effective_capacity_blocks and op.predicted_token_hit_rate is not None:
        x = to_unit(op.effective_capacity_blocks, snapshot, unit)
        if x:
            effective = (
                float(x),
                100.0 * float(all_time.hit_rate(op.effective_capacity_blocks, hit_unit(unit))),
            )
    cursor = reading = None
    shown_now = shown_curve(snapshot, view)
    if view.cursor_blocks is not None and shown_now is not None and shown_now.accesses:
        reading = read_curve(shown_now, view.cursor_blocks, hit_unit(unit))
        cursor = to_unit(view.cursor_blocks, snapshot, unit)
        high = max(float(high), float(cursor or 0) * AXIS_MARGIN)
    return PlotData(
        unit=unit,
        hit_unit=hit_unit(unit),
        x_low=float(low),
        x_high=float(high),
        all_time=_series(all_time, caps, snapshot, unit),
        window=_series(window_curve, caps, snapshot, unit) if window_curve is not None else None,
        window_label=view.window,
        markers=markers,
        engine=_engine_point(snapshot, engine_x) if show_engine else None,
        engine_capacity=engine_x,
        opt=_series(opt_curve, caps, snapshot, unit) if opt_curve is not None else None,
        knee=_knee_point(every, snapshot, unit),
        effective=effective,
        cursor=float(cursor) if cursor else None,
        reading=reading,
    )


def engine_only(snapshot: Snapshot, unit: str) -> PlotData | None:
    """Without block accesses (e.g. only /metrics), the engine's own operating point is all there is."""
    blocks = engine_pool(snapshot)
    x = (to_unit(blocks, snapshot, unit) or float(blocks)) if blocks else None
    engine = _engine_point(snapshot, x)
    if engine is None or x is None:
        return None
    return PlotData(
        unit=unit,
        hit_unit="tokens",
        x_low=x / 10.0,
        x_high=x * 10.0,
        all_time=None,
        window=None,
        window_label="",
        markers=(),
        engine=engine,
        engine_capacity=x,
        note="no block accesses: engine's own point only",
    )


def nice_ticks(low: float, high: float, log_x: bool, max_ticks: int) -> list[float]:
    """Tick positions a reader can say out loud: powers of ten (log) or 1/2/5 steps (linear)."""
    max_ticks = max(2, max_ticks)
    if high <= low:
        return [low]
    if log_x:
        lo_exp, hi_exp = math.floor(math.log10(low)), math.ceil(math.log10(high))
        for mults in ((1,), (1, 3), (1, 2, 5)):
            ticks = [m * 10.0**e for e in range(lo_exp, hi_exp + 1) for m in mults]
            ticks = [t for t in ticks if low <= t <= high]
            if len(ticks) >= 3 or mults == (1, 2, 5):
                break
        step = max(1, math.ceil(len(ticks) / max_ticks))
        return ticks[::step]
    raw = (high - low) / max_ticks
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(low / step) * step
    ticks, t = [], first
    while t <= high + 1e-9 * step:
        ticks.append(t)
        t += step
    return ticks


PLOT_LEFT_COLUMNS = 6  # the y-axis tick labels and the frame ("100%┤")
PLOT_FRAME_ROWS = 3  # the frame above, the frame and the x tick labels below


def line_labels(
    d: PlotData, log_x: bool, width: int, height: int
) -> list[tuple[str, float, float, str, Alignment]]:
    """(text, x, y, theme colour, alignment) of a label at the top of each vertical line: the working
    sets' targets and "pool". A label that would run into the one before it on a row drops to the next
    row; one that would run past the right edge ends at its line instead of starting there."""
    lines = [(label, x, "marker") for label, x in d.markers]
    if d.engine_capacity is not None:
        lines.append(("pool", d.engine_capacity, "engine"))
    columns = max(1, width - PLOT_LEFT_COLUMNS)
    rows = max(2, height - PLOT_FRAME_ROWS)

    def column(x: float) -> float:
        if log_x:
            lo, hi = math.log10(d.x_low), math.log10(d.x_high)
            pos = math.log10(max(x, d.x_low))
        else:
            lo, hi, pos = d.x_low, d.x_high, x
        return (pos - lo) / (hi - lo) * columns if hi > lo else 0.0

    taken: list[float] = []  # per row: the column where the last label on it ends
    out: list[tuple[str, float, float, str, Alignment]] = []
    for text, x, key in sorted(lines, key=lambda line: line[1]):
        if not d.x_low <= x <= d.x_high:
            continue
        start = column(x)
        align: Alignment = "left"
        if start + len(text) >= columns:
            start, align = start - len(text) + 1, "right"
        row = next((r for r, end in enumerate(taken) if end < start), len(taken))
        if row >= rows // 2:
            continue  # no room left high enough: the legend still names the lines
        end = start + len(text) + 1
        if row == len(taken):
            taken.append(end)
        else:
            taken[row] = end
        out.append((text, x, 100.0 - row * 100.0 / (rows - 1), key, align))
    return out
