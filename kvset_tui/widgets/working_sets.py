"""Working sets: for each hit-rate target, the smallest LRU capacity that reaches it."""

from __future__ import annotations

import math
from collections.abc import Hashable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset import quantities as fmt
from kvset.snapshot import Snapshot, WorkingSetRow
from kvset_tui.capacity_units import capacity_text
from kvset_tui.sparkline import sparkline
from kvset_tui.theming import KvsetTheme
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

FULL_TABLE_WIDTH = 48  # below this, one capacity column (in the chosen unit) instead of three
TREND_CELLS = 6


def rows_for_view(snapshot: Snapshot, view: ViewState) -> tuple[tuple[WorkingSetRow, ...], str]:
    """The rows for the chosen window and target set, falling back to all-time; and their window."""
    rows = snapshot.working_set_rows(view.window, view.target_mode)
    if rows:
        return rows, view.window
    return snapshot.working_set_rows("all", view.target_mode), "all"


def trend_text(trend: tuple[int | None, ...], palette: KvsetTheme) -> Text:
    """A sparkline of the working set over recent windows and an arrow for its direction."""
    if not trend:
        return Text("–", style=palette.rich("muted"))
    values = [math.nan if v is None else float(v) for v in trend]
    line = sparkline(values, TREND_CELLS, low=None)
    known = [v for v in values if not math.isnan(v)]
    arrow = "·"
    if len(known) >= 2 and known[0] > 0:
        change = known[-1] / known[0] - 1.0
        arrow = "↑" if change > 0.05 else "↓" if change < -0.05 else "→"
    elif values and math.isnan(values[-1]):
        arrow = "∅"  # not reached in the latest window
    return Text(line + " " + arrow, style=palette.rich("spark"))


def row_capacity_text(row: WorkingSetRow, snapshot: Snapshot, unit: str) -> str:
    """The row's own capacity in `unit` (the snapshot's numbers, converted only when it lacks one)."""
    if unit == "tokens" and row.capacity_tokens is not None:
        return f"{fmt.count(row.capacity_tokens)} tok"
    if unit == "GiB" and row.capacity_bytes is not None:
        return fmt.format_gib(row.capacity_bytes, significant=fmt.SHORT_DIGITS)
    return capacity_text(row.capacity_blocks, snapshot, unit)


def fits_text(fits: bool | None, palette: KvsetTheme) -> Text:
    if fits is None:
        return Text("–", style=palette.rich("muted"))
    if fits:
        return Text("yes", style=palette.rich("ok"))
    return Text("no", style=f"bold {palette.rich('bad')}")


class WorkingSetTable(SnapshotView, Widget):
    """One row per target: capacity in blocks, tokens and GiB, trend over recent windows, fits the pool."""

    DEFAULT_CSS = """
    WorkingSetTable { height: auto; }
    """

    def __init__(self, palette: KvsetTheme, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.border_title = "Working sets"

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view.window, view.unit, view.target_mode)

    def on_data(self) -> None:
        title = f"Working sets · {self.view.target_mode}"
        if self.snapshot is not None:
            _, window = rows_for_view(self.snapshot, self.view)
            title += f" · {window} window"
        self.border_title = title

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        if snap is None:
            return Text("waiting for data…", style=p.rich("muted"))
        rows, window = rows_for_view(snap, self.view)
        if not rows:
            return Text(f"no {self.view.target_mode} targets computed yet", style=p.rich("muted"))
        full = self.content_width >= FULL_TABLE_WIDTH
        unit = self.view.effective_unit(snap)
        table = Table(box=None, padding=(0, 1), pad_edge=False, expand=True, show_edge=False)
        table.add_column("target", style="bold", no_wrap=True)
        if full:
            table.add_column("blocks", justify="right", no_wrap=True)
            table.add_column("tokens", justify="right", no_wrap=True)
            table.add_column("GiB", justify="right", no_wrap=True)
        else:
            table.add_column(unit, justify="right", no_wrap=True)
        table.add_column("trend", no_wrap=True)
        table.add_column("fits", justify="right", no_wrap=True)
        bound = ""
        for row in rows:
            target = fmt.target_label(row.target, row.mode)
            if not row.reached:
                miss = Text("not reached", style=p.rich("warn"))
                cells = [miss, Text("–"), Text("–")] if full else [miss]
            else:
                prefix = "" if row.exact else "≤"
                if not row.exact:
                    bound = "≤: upper bound within the windowed curve's grid step"
                if full:
                    gib = (fmt.format_gib(row.capacity_bytes, significant=fmt.SHORT_DIGITS, with_unit=False)
                           if row.capacity_bytes is not None else None)  # fmt: skip
                    tokens = fmt.count(row.capacity_tokens) if row.capacity_tokens is not None else None
                    cells = [
                        Text(prefix + fmt.count(row.capacity_blocks)),
                        Text(prefix + tokens if tokens else "–"),
                        Text(prefix + gib if gib else "–"),
                    ]
                else:
                    cells = [Text(prefix + row_capacity_text(row, snap, unit))]
            table.add_row(target, *cells, trend_text(row.trend_blocks, p), fits_text(row.fits_pool, p))
        if bound and full:
            return Group(table, Text(bound, style=p.rich("muted")))
        return table
