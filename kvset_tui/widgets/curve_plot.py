"""The hit-rate curve: LRU hit rate against capacity, all-time and the chosen window, with markers."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from plotext._dict import themes as plotext_themes
from rich.text import Text
from textual.app import RenderResult
from textual_plotext import PlotextPlot

from kvset import quantities as fmt
from kvset.core.curve import HitRateCurve
from kvset.snapshot import Snapshot
from kvset_tui.capacity_units import axis_value_text, engine_capacity_blocks, hit_unit, to_unit
from kvset_tui.theming import KvsetTheme
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

SAMPLES = 160  # points per curve: enough for any terminal width, cheap to read off the curve
MIN_WIDTH, MIN_HEIGHT = 24, 7


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
    note: str = ""
    # the engine model's prediction, drawn on the curve at the pool's effective capacity: (x, hit rate %)
    effective: tuple[float, float] | None = None


def sample_capacities(top: int, log_x: bool, n: int = SAMPLES) -> np.ndarray:
    top = max(2, int(top))
    raw = np.geomspace(1, top, n) if log_x else np.linspace(1, top, n)
    return np.unique(np.round(raw).astype(np.int64))


def saturation_capacity(curve: HitRateCurve) -> int:
    """The smallest capacity at which the curve reaches its final value (beyond it the curve is flat).

    Windowed curves are read on a grid that runs to the horizon; plotting to there would squeeze the
    interesting part into a corner."""
    if len(curve.capacities) == 0:
        return 1
    i = int(np.searchsorted(curve.block_hits, curve.block_hits[-1], side="left"))
    return int(curve.capacities[min(i, len(curve.capacities) - 1)])


def _series(curve: HitRateCurve, caps: np.ndarray, snapshot: Snapshot, unit: str) -> CurveSeries:
    rates = curve.hit_rates(caps, unit=hit_unit(unit)) * 100.0  # type: ignore[arg-type]
    factor = to_unit(1, snapshot, unit) or 1.0
    return CurveSeries(x=(caps * factor).tolist(), y=rates.tolist())


def plot_data(snapshot: Snapshot, view: ViewState) -> PlotData | None:
    """The curves and markers for this view, or None when there is nothing to draw yet."""
    all_time = snapshot.curves.get("all")
    unit = view.effective_unit(snapshot)
    if all_time is None or all_time.accesses == 0 or len(all_time.capacities) == 0:
        return engine_only(snapshot, unit)
    window_curve = None
    note = ""
    if view.window != "all":
        window_curve = snapshot.curves.get(view.window)
        if window_curve is None or window_curve.accesses == 0:
            window_curve = None
            note = f"no {view.window} curve yet"
    rows = snapshot.working_set_rows(view.window, view.target_mode) or snapshot.working_set_rows(
        "all", view.target_mode
    )
    engine_blocks = engine_capacity_blocks(snapshot)
    top = max(saturation_capacity(all_time), 2)
    if window_curve is not None:
        top = max(top, saturation_capacity(window_curve))
    for extra in [engine_blocks, *(r.capacity_blocks for r in rows)]:
        if extra:
            top = max(top, int(math.ceil(extra * 1.15)))
    top = min(top, max(snapshot.horizon, 2)) if snapshot.horizon else top
    caps = sample_capacities(top, view.log_x)
    markers = tuple(
        (fmt.target_label(r.target, r.mode).split(" % ")[0], float(to_unit(r.capacity_blocks, snapshot, unit) or 0))
        for r in rows
        if r.reached and r.capacity_blocks
    )
    engine = None
    engine_x = to_unit(engine_blocks, snapshot, unit) if engine_blocks else None
    eng = snapshot.engine
    if eng is not None and engine_x is not None and eng.token_hit_rate is not None:
        engine = (float(engine_x), 100.0 * float(eng.token_hit_rate))
    low = to_unit(1, snapshot, unit) or 1.0
    high = to_unit(top, snapshot, unit) or float(top)
    op = snapshot.operating_point
    effective = None
    if op is not None and op.effective_capacity_blocks and op.predicted_token_hit_rate is not None:
        x = to_unit(op.effective_capacity_blocks, snapshot, unit)
        if x:
            effective = (float(x), 100.0 * float(all_time.hit_rate(op.effective_capacity_blocks, hit_unit(unit))))
    return PlotData(
        unit=unit,
        hit_unit=hit_unit(unit),
        x_low=float(low),
        x_high=float(high),
        all_time=_series(all_time, caps, snapshot, unit),
        window=_series(window_curve, caps, snapshot, unit) if window_curve is not None else None,
        window_label=view.window,
        markers=markers,
        engine=engine,
        engine_capacity=engine_x,
        note=note,
        effective=effective,
    )


def engine_only(snapshot: Snapshot, unit: str) -> PlotData | None:
    """Without block accesses (e.g. only /metrics), the engine's own operating point is all there is."""
    blocks = engine_capacity_blocks(snapshot)
    eng = snapshot.engine
    if eng is None or not blocks or eng.token_hit_rate is None:
        return None
    x = to_unit(blocks, snapshot, unit) or float(blocks)
    return PlotData(
        unit=unit,
        hit_unit="tokens",
        x_low=x / 10.0,
        x_high=x * 10.0,
        all_time=None,
        window=None,
        window_label="",
        markers=(),
        engine=(x, 100.0 * float(eng.token_hit_rate)),
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


def register_plot_theme(palette: KvsetTheme) -> str:
    """Register the palette as a Plotext theme (canvas, axes, ticks, tick style, colour cycle)."""
    name = f"kvset-{palette.name}"
    canvas = "default" if palette.ansi else palette.plotext("surface")
    plotext_themes[name] = [
        canvas,
        canvas,
        palette.plotext("ticks"),
        "default",
        [palette.plotext("curve_all"), palette.plotext("curve_window"), palette.plotext("engine")],
    ]
    return name


class HitRateCurvePlot(SnapshotView, PlotextPlot):
    """Hit rate (%) against capacity in the chosen unit; log or linear capacity axis."""

    DEFAULT_CSS = """
    HitRateCurvePlot { width: 1fr; height: 1fr; }
    """

    AUTO_HEIGHT = False

    def __init__(self, palette: KvsetTheme, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.data: PlotData | None = None
        self.theme = register_plot_theme(palette)
        self.border_title = "LRU hit rate vs capacity"

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view.window, view.unit, view.log_x, view.target_mode)

    def set_palette(self, palette: KvsetTheme) -> None:
        self.theme = register_plot_theme(palette)
        super().set_palette(palette)

    def on_data(self) -> None:
        self.data = plot_data(self.snapshot, self.view) if self.snapshot is not None else None
        d = self.data
        if d is None:
            self.border_title = "LRU hit rate vs capacity"
            self.border_subtitle = ""
            return
        scale = "log" if self.view.log_x else "linear"
        self.border_title = f"LRU {d.hit_unit[:-1]} hit rate vs {d.unit}, {scale}"
        p = self.palette
        legend = Text()
        if d.all_time is not None:
            legend.append("⣿ all time", style=p.rich("curve_all"))
        if d.window is not None:
            legend.append(f"  · {d.window_label}", style=p.rich("curve_window"))
        elif d.note:
            legend.append(f"  ({d.note})", style=p.rich("muted"))
        if d.markers:
            legend.append(f"  │ WS {'/'.join(m for m, _ in d.markers)} %", style=p.rich("marker"))
        if d.engine is not None:
            legend.append("  ◆ engine", style=p.rich("engine"))
        elif d.engine_capacity is not None:
            legend.append("  │ engine pool", style=p.rich("engine"))
        if d.effective is not None:
            legend.append("  ◇ model", style=p.rich("engine"))  # at the pool's effective LRU capacity
        self.border_subtitle = legend

    def render(self) -> RenderResult:
        d = self.data
        if d is None:
            return Text("waiting for block accesses…", style=self.palette.rich("muted"))
        width, height = self.size.width, self.size.height
        if width < MIN_WIDTH or height < MIN_HEIGHT:
            return Text("(too small for the curve)", style=self.palette.rich("muted"))
        plt = self.plt
        plt.clear_figure()
        p = self.palette
        if self.view.log_x:
            plt.xscale("log")
        if d.window is not None:
            plt.plot(d.window.x, d.window.y, marker="·", color=p.plotext("curve_window"))
        if d.all_time is not None:
            plt.plot(d.all_time.x, d.all_time.y, marker="braille", color=p.plotext("curve_all"))
        for _label, x in d.markers:
            plt.vline(x, color=p.plotext("marker"))
        if d.engine_capacity is not None:
            plt.vline(d.engine_capacity, color=p.plotext("engine"))
        if d.engine is not None:
            plt.scatter([d.engine[0]], [d.engine[1]], marker="◆", color=p.plotext("engine"))
        if d.effective is not None:
            plt.scatter([d.effective[0]], [d.effective[1]], marker="◇", color=p.plotext("engine"))
        plt.ylim(0, 100)
        plt.yticks([0, 25, 50, 75, 100], ["0", "25", "50", "75", "100%"])
        if self.view.log_x:
            # Plotext takes log-axis limits as log10 values (ticks and data stay in data units).
            plt.xlim(math.log10(d.x_low), math.log10(d.x_high))
        else:
            plt.xlim(d.x_low, d.x_high)
        ticks = nice_ticks(d.x_low, d.x_high, self.view.log_x, max(2, width // 10))
        plt.xticks(ticks, [axis_value_text(t, d.unit) for t in ticks])
        return super().render()
