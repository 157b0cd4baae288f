"""Page churn: sparklines over the recent past (accesses, first-time blocks, re-references, hit rate, working set)."""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.snapshot import ChurnSeries, Snapshot
from kvset_tui import format as fmt
from kvset_tui.theming import KvsetTheme
from kvset_tui.units import capacity_text
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

LABEL_WIDTH = 16
VALUE_WIDTH = 12


def _last_finite(values: np.ndarray) -> float | None:
    for v in np.asarray(values, dtype=float)[::-1]:
        if not math.isnan(v):
            return float(v)
    return None


def churn_rows(snapshot: Snapshot, unit: str) -> list[tuple[str, np.ndarray, str]]:
    """(label, series, latest value with unit) for each sparkline; rates per second."""
    c: ChurnSeries = snapshot.churn
    slot = c.slot_seconds or 1.0
    accesses = np.asarray(c.accesses, dtype=float) / slot
    first = np.asarray(c.first_time, dtype=float) / slot
    reref = np.asarray(c.rereferences, dtype=float) / slot
    hit = np.asarray(c.hit_rate_at_capacity, dtype=float)
    ws = np.asarray(c.working_set_main, dtype=float)
    cap = capacity_text(c.capacity_blocks, snapshot, unit) if c.capacity_blocks else "?"
    main = ""
    coverage = snapshot.targets.get("coverage") or ()
    if coverage:
        main = " " + fmt.target(coverage[0], "coverage").replace(" % cov", "%")
    last_hit = _last_finite(hit)
    last_ws = _last_finite(ws)
    return [
        ("accesses/s", accesses, fmt.rate(_last_finite(accesses))),
        ("first-time/s", first, fmt.rate(_last_finite(first))),
        ("re-refs/s", reref, fmt.rate(_last_finite(reref))),
        (f"hit @ {cap}", hit, fmt.percent(last_hit) if last_hit is not None else "–"),
        (f"WS{main}", ws, capacity_text(last_ws, snapshot, unit) if last_ws is not None else "not reached"),
    ]


class ChurnPanel(SnapshotView, Widget):
    """Five sparklines, newest on the right, each with its latest value and unit."""

    DEFAULT_CSS = """
    ChurnPanel { height: auto; }
    """

    def __init__(self, palette: KvsetTheme, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.border_title = "Page churn"

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view.effective_unit(snapshot))

    def on_data(self) -> None:
        snap = self.snapshot
        if snap is None or len(snap.churn) == 0:
            self.border_title = "Page churn"
            return
        c = snap.churn
        span = fmt.duration(len(c) * c.slot_seconds)
        title = f"Page churn · last {span} in {fmt.duration(c.slot_seconds)} slots"
        if c.working_set_step_seconds and c.working_set_step_seconds != c.slot_seconds:
            title += f" · WS every {fmt.duration(c.working_set_step_seconds)}"
        self.border_title = title

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        if snap is None or len(snap.churn) == 0:
            return Text("no accesses yet", style=p.rich("muted"))
        unit = self.view.effective_unit(snap)
        width = self.content_width
        label_w = min(LABEL_WIDTH, max(10, width // 5))
        spark_w = max(4, width - label_w - VALUE_WIDTH - 2)
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, (label, series, latest) in enumerate(churn_rows(snap, unit)):
            if i:
                out.append("\n")
            out.append(f"{label[:label_w]:<{label_w}} ", style=p.rich("muted"))
            out.append(fmt.sparkline(series, spark_w).rjust(spark_w), style=p.rich("spark"))
            out.append(f" {latest:>{VALUE_WIDTH}}", style="bold")
        return out
