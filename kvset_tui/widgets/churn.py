"""Page churn: sparklines over the recent past (accesses, first-time blocks, re-references, hit rate, working set)."""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import NamedTuple

import numpy as np
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import ChurnSeries, EngineState, Snapshot
from kvset.api import quantities as fmt
from kvset_tui.capacity_units import capacity_text
from kvset_tui.sparkline import sparkline
from kvset_tui.theming import KvsetTheme
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView
from kvset_tui.widgets.working_sets import NOT_REACHED

LABEL_WIDTH = 22
VALUE_WIDTH = 12
TRACE_CLOCK_SKEW = 120.0  # seconds between the data's clock and the wall clock that mean "trace time"
TWO_COLUMN_MIN_WIDTH = 70  # a short screen puts two sparklines on each line from this width on


class ChurnRow(NamedTuple):
    label: str
    short: str  # label on a short screen (two sparklines per line)
    series: np.ndarray
    latest: str  # the newest value with its unit


def _last_finite(values: np.ndarray) -> float | None:
    for v in np.asarray(values, dtype=float)[::-1]:
        if not math.isnan(v):
            return float(v)
    return None


def engine_rows(snapshot: Snapshot) -> list[ChurnRow]:
    """The engine's own measured token hit rate (and KV use) over time, from its reading history."""
    engine = snapshot.get(EngineState)
    history = engine.history if engine is not None else ()
    rows = []
    hits = np.array([np.nan if r.token_hit_rate is None else r.token_hit_rate for r in history], dtype=float)
    if len(hits) and not np.isnan(hits).all():
        rows.append(ChurnRow("engine hit (tok)", "eng hit", hits, fmt.percent(_last_finite(hits))))
    usage = np.array([np.nan if r.kv_usage is None else r.kv_usage for r in history], dtype=float)
    if len(usage) and not np.isnan(usage).all():
        rows.append(ChurnRow("engine KV use", "eng KV", usage, fmt.percent(_last_finite(usage))))
    return rows


def churn_rows(snapshot: Snapshot, unit: str) -> list[ChurnRow]:
    """One row per sparkline (the snapshot's series are per second already). Each label says what the
    row is per: the hit rate is of each fine slot's accesses, the working set of each coarse slot's."""
    c = snapshot.get(ChurnSeries)
    if c is None or len(c) == 0 or snapshot.totals.accesses == 0:
        return engine_rows(snapshot)
    accesses = np.asarray(c.accesses, dtype=float)
    first = np.asarray(c.first_time, dtype=float)
    reref = np.asarray(c.rereferences, dtype=float)
    hit = np.asarray(c.hit_rate_at_capacity, dtype=float)
    ws = np.asarray(c.working_set_main, dtype=float)
    main = " " + fmt.target_label(snapshot.main_target, snapshot.main_mode).replace(" % ", "% ")
    last_ws = _last_finite(ws)
    ws_latest = capacity_text(last_ws, snapshot, unit) if last_ws is not None else NOT_REACHED
    ws_slot = fmt.duration(c.working_set_step_seconds or c.slot_seconds)
    rows = [
        ChurnRow("accesses/s", "acc/s", accesses, fmt.rate(_last_finite(accesses))),
        ChurnRow("first-time/s", "new/s", first, fmt.rate(_last_finite(first))),
        ChurnRow("re-refs/s", "reref/s", reref, fmt.rate(_last_finite(reref))),
    ]
    if c.capacity_blocks:
        cap = capacity_text(c.capacity_blocks, snapshot, unit)
        last_hit = _last_finite(hit)
        rows.append(
            ChurnRow(
                f"hit/{fmt.duration(c.slot_seconds)} @ {cap}",
                "hit/slot",
                hit,
                fmt.percent(last_hit) if last_hit is not None else "–",
            )
        )
    # each slot's own working set, smaller than a window's: labelled so that it cannot pass for the
    # working sets table's "1m window" figure
    rows.append(ChurnRow(f"slot WS{main}/{ws_slot}", "slot WS", ws, ws_latest))
    return [*rows, *engine_rows(snapshot)]


class ChurnPanel(SnapshotView, Widget):
    """Sparklines over time, newest on the right, each with its latest value and unit (plus the
    engine's own hit rate and KV use when it reports them)."""

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
        c = snap.get(ChurnSeries) if snap is not None else None
        if snap is None or c is None or len(c) == 0 or snap.totals.accesses == 0:
            engine = snap.get(EngineState) if snap is not None else None
            self.border_title = "Engine history" if engine is not None and engine.history else "Page churn"
            return
        span = fmt.duration(len(c) * c.slot_seconds)
        # A replay (or the demo) runs on its own clock: say so, rates are per trace second then.
        clock = " of trace time" if abs(c.end_time - snap.taken_at) > TRACE_CLOCK_SKEW else ""
        title = f"Page churn · per {fmt.duration(c.slot_seconds)} slot{clock}, last {span}"
        if c.working_set_step_seconds and c.working_set_step_seconds != c.slot_seconds:
            title += f" · WS per {fmt.duration(c.working_set_step_seconds)} slot"
        self.border_title = title

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        unit = self.view.effective_unit(snap) if snap is not None else "blocks"
        rows = churn_rows(snap, unit) if snap is not None else []
        if not rows:
            return Text("no accesses yet", style=p.rich("muted"))
        width = self.content_width
        if self.compact and width >= TWO_COLUMN_MIN_WIDTH:
            return self._render_two_columns(rows, width)
        label_w = min(max(len(r.label) for r in rows), LABEL_WIDTH, max(10, width // 4))
        spark_w = max(4, width - label_w - VALUE_WIDTH - 2)
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, row in enumerate(rows):
            if i:
                out.append("\n")
            self._cell(out, row.label, label_w, row, spark_w, VALUE_WIDTH)
        return out

    def _cell(self, out: Text, label: str, label_w: int, row: ChurnRow, spark_w: int, value_w: int) -> None:
        p = self.palette
        out.append(f"{label[:label_w]:<{label_w}} ", style=p.rich("muted"))
        out.append(sparkline(row.series, spark_w).rjust(spark_w), style=p.rich("spark"))
        out.append(f" {row.latest:>{value_w}}", style="bold")

    def _render_two_columns(self, rows: list[ChurnRow], width: int) -> Text:
        """Two sparklines per line (short labels), so a 24-line screen keeps room for the curve."""
        label_w, value_w = 8, 9
        half = (width - 3) // 2
        spark_w = max(4, half - label_w - value_w - 2)
        out = Text(no_wrap=True, overflow="ellipsis")
        for i in range(0, len(rows), 2):
            if i:
                out.append("\n")
            self._cell(out, rows[i].short, label_w, rows[i], spark_w, value_w)
            if i + 1 < len(rows):
                out.append(" │ ", style=self.palette.rich("muted"))
                self._cell(out, rows[i + 1].short, label_w, rows[i + 1], spark_w, value_w)
        return out
