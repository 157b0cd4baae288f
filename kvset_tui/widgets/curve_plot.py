"""The hit-rate curve: LRU hit rate against capacity, all-time and the chosen window, with markers; with
--opt also Belady MIN's all-time curve, labelled MIN."""

from __future__ import annotations

import math
import time
from collections.abc import Hashable

from plotext._dict import themes as plotext_themes
from rich.text import Text
from textual.app import RenderResult
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual_plotext import PlotextPlot

from kvset.api import Snapshot, kernels_on_disk
from kvset_tui.ansi_frames import AnsiFrames
from kvset_tui.capacity_units import axis_value_text
from kvset_tui.cursor import cursor_text
from kvset_tui.curve_data import (
    KNEE_MARK,
    MIN_HEIGHT,
    MIN_WIDTH,
    OPT_MARK,
    PlotData,
    label_point,
    line_labels,
    nice_ticks,
    plot_data,
)
from kvset_tui.line_strips import LineStrips
from kvset_tui.theming import KvsetTheme
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView


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
    DATA_FRAME_SECONDS = 2.0  # the curve moves slowly and is the costliest panel to draw

    def __init__(self, palette: KvsetTheme, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.data: PlotData | None = None
        self.theme = register_plot_theme(palette)  # type: ignore[assignment]  # registered at run time, not a plotext name
        self.border_title = "LRU hit rate vs capacity"
        self._frames = AnsiFrames()
        self._picture_of: tuple[Hashable, str | Text] | None = None  # (what it was drawn from, picture)
        self._drawn: str | Text | None = None  # the picture last handed to the screen
        self._line_strips = LineStrips()

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (
            id(snapshot),
            view.window,
            view.unit,
            view.log_x,
            view.target_mode,
            view.rank,
            view.cursor_blocks,
        )

    def set_palette(self, palette: KvsetTheme) -> None:
        self.theme = register_plot_theme(palette)  # type: ignore[assignment]  # the same
        super().set_palette(palette)

    def on_data(self) -> None:
        self.data = plot_data(self.snapshot, self.view) if self.snapshot is not None else None
        d = self.data
        if d is None:
            self.border_title = "LRU hit rate vs capacity"
            self.border_subtitle = ""
            return
        scale = "log" if self.view.log_x else "linear"
        rank = self.view.rank_label(self.snapshot)
        policies = "LRU and MIN" if d.opt is not None else "LRU"
        self.border_title = (
            f"{rank} · " if rank else ""
        ) + f"{policies} {d.hit_unit[:-1]} hit rate vs {d.unit}, {scale}"
        p = self.palette
        legend = Text()
        if d.reading is not None and self.snapshot is not None:  # the cursor's readout comes first
            legend.append(
                cursor_text(d.reading, self.snapshot, d.unit) + "  │", style=f"bold {p.rich('warn')}"
            )
        if d.all_time is not None:
            legend.append("⣿ all time", style=p.rich("curve_all"))
        if d.window is not None:
            legend.append(f"  · {d.window_label}", style=p.rich("curve_window"))
        if d.opt is not None:
            legend.append(f"  {OPT_MARK} MIN", style=p.rich("ok"))
        elif d.note:
            legend.append(f"  ({d.note})", style=p.rich("muted"))
        if d.markers:
            legend.append(f"  │ WS {'/'.join(m for m, _ in d.markers)} %", style=p.rich("marker"))
        if d.knee is not None and d.x_low <= d.knee[0] <= d.x_high:
            legend.append(f"  {KNEE_MARK} knee", style=p.rich("curve_all"))
        if d.engine is not None:
            legend.append("  ◆ engine", style=p.rich("engine"))
        elif d.engine_capacity is not None:
            legend.append(
                "  │ rank pool" if self.view.rank_view(self.snapshot) else "  │ engine pool",
                style=p.rich("engine"),
            )
        if d.effective is not None:
            legend.append("  ◇ model", style=p.rich("engine"))  # at the pool's effective LRU capacity
        self.border_subtitle = legend

    def draws_the_same(self) -> bool:
        # the plot is drawn here, once: a new snapshot often moves nothing a cell of the plot shows
        return self._drawn is not None and self._picture() == self._drawn

    def render(self) -> RenderResult:
        picture = self._drawn = self._picture()
        return self._frames.text(picture) if isinstance(picture, str) else picture

    @property
    def lines_made(self) -> int:
        """Plot lines turned into strips so far (the rest were reused; tests read it)."""
        return self._line_strips.made

    def draw_strips(self, width: int) -> list[Strip]:
        """The plot's lines as strips at the plot's size, each line made once while it stays the same
        (from one frame to the next most of them do; making all of them was most of the UI's CPU)."""
        picture = self._drawn = self._picture()
        (w, h), style = self.size, self.visual_style  # its own size: the curve is not measured
        if not isinstance(picture, str):  # a note: drawn whole, as Textual draws a widget
            return Visual.to_strips(self, visualize(self, picture), w, h, style)
        return self._line_strips.frame(self, self._frames.lines(picture)[:h], w, style)

    def _picture(self) -> str | Text:
        """The plot as plotext draws it (ANSI text), or a note instead of it; drawn once per data and size."""
        key: Hashable
        if self.data is None:  # the note says whether the kernels compile: looked at again each second
            key = (None, int(time.monotonic()), self.size, self.theme)
        else:
            key = (self.data, self.view, self.size, self.theme)
        if self._picture_of is None or self._picture_of[0] != key:
            self._picture_of = (key, self._draw())
        return self._picture_of[1]

    def _draw(self) -> str | Text:
        d = self.data
        if d is None:
            # on a first run the first batch waits for the kernels to compile: say so, not only "waiting"
            waiting = (
                "waiting for block accesses…"
                if kernels_on_disk()
                else "compiling the kernels (first run only)…"
            )
            return Text(waiting, style=self.palette.rich("muted"))
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
        if d.opt is not None:
            plt.plot(d.opt.x, d.opt.y, marker=OPT_MARK, color=p.plotext("ok"))
            at = label_point(d.opt)
            if at is not None:  # named on the plot too: a short screen has no legend line
                plt.text("MIN ", at[0], at[1], color=p.plotext("ok"), alignment="right")
        if d.all_time is not None:
            plt.plot(d.all_time.x, d.all_time.y, marker="braille", color=p.plotext("curve_all"))
        for _label, x in d.markers:
            plt.vline(x, color=p.plotext("marker"))
        if d.engine_capacity is not None:
            plt.vline(d.engine_capacity, color=p.plotext("engine"))
        if d.cursor is not None:
            plt.vline(d.cursor, color=p.plotext("warn"))
        # Every vertical line is a `│`: without colour only a label tells a working set from the pool.
        for text, x, y, key, align in line_labels(d, self.view.log_x, width, height):
            plt.text(text, x, y, color=p.plotext(key), alignment=align)
        if d.knee is not None:
            plt.scatter([d.knee[0]], [d.knee[1]], marker=KNEE_MARK, color=p.plotext("curve_all"))
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
        # PlotextPlot.render's steps, without its decode (AnsiFrames decodes only the changed lines)
        plt.plotsize(width, height)
        plt._set_size(width, height)
        plt.theme(self._get_plotext_theme_name(self.app.theme))
        ansi: str = plt.build()
        return ansi
