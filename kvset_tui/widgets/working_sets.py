"""Working sets: for each hit-rate target, the smallest LRU capacity that reaches it; with --opt also the
smallest Belady MIN needs, and the gap between the two policies at the engine's pool (or --capacity)."""

from __future__ import annotations

import math
from collections.abc import Hashable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import (
    FITS_WITH_RESERVE,
    FITS_WORKING_SET,
    BeladyMin,
    Curves,
    Ranks,
    Snapshot,
    WorkingSetRow,
    WorkingSets,
)
from kvset.api import quantities as fmt
from kvset_tui.capacity_units import capacity_text, hit_unit
from kvset_tui.sparkline import sparkline, trend_arrow
from kvset_tui.theming import KvsetTheme
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

FULL_TABLE_WIDTH = 48  # below this, one capacity column (in the chosen unit) instead of three
# with --gpu, the full table adds a GPUs column from this width; narrower, GPUs take the tokens' place
# (tokens are one `u` away on every panel)
GPU_TABLE_WIDTH = 56
NARROW_TREND_WIDTH = 42  # a one-capacity-column table narrower than this leaves out the trend
TREND_CELLS = 6
NO_DATA = "no data"  # the window holds no access yet: nothing to reach
NO_REUSE = "no reuse yet"  # accesses, none re-read: a coverage target needs no capacity yet
NOT_REACHED = "not reached"  # not reached inside the tracked horizon


def fits_note(rows: tuple[WorkingSetRow, ...], short: bool = False) -> str | None:
    """What the fits column compared (the snapshot's one definition), or None when it compared nothing."""
    judged = [r for r in rows if r.fits_pool is not None]
    if not judged:
        return None
    rule = FITS_WITH_RESERVE if any(r.fits_counts_reserve for r in judged) else FITS_WORKING_SET
    return "fits: " + (rule.replace("working set", "WS") if short else rule)


def trend_text(trend: tuple[int | None, ...], palette: KvsetTheme) -> Text:
    """A sparkline of the working set over recent windows, from zero (so that a few per cent do not
    look like a cliff), and the arrow of what it draws."""
    if not trend or all(v is None for v in trend):  # no window reached it yet, or none holds data
        return Text("–", style=palette.rich("muted"))
    values = [math.nan if v is None else float(v) for v in trend]
    line = sparkline(values, TREND_CELLS)
    arrow = trend_arrow(values, TREND_CELLS) or "·"
    if math.isnan(values[-1]):
        arrow = "∅"  # not reached in the latest window
    return Text(line + " " + arrow, style=palette.rich("spark"))


def row_capacity_text(row: WorkingSetRow, snapshot: Snapshot, unit: str) -> str:
    """The row's own capacity in `unit` (the snapshot's numbers, converted only when it lacks one)."""
    if unit == "tokens" and row.capacity_tokens is not None:
        return f"{fmt.count(row.capacity_tokens)} tok"
    if unit == "GiB" and row.capacity_bytes is not None:
        return fmt.format_gib(row.capacity_bytes, significant=fmt.SHORT_DIGITS)
    return capacity_text(row.capacity_blocks, snapshot, unit)


def hit_text(row: WorkingSetRow, unit: str, palette: KvsetTheme) -> Text:
    """The hit rate the row's capacity gives, in the hit unit that goes with `unit` (what the target buys)."""
    rate = row.token_hit_rate if hit_unit(unit) == "tokens" else row.block_hit_rate
    if rate is None or not row.capacity_blocks:
        return Text("–", style=palette.rich("muted"))
    return Text(fmt.percent(rate))


def fits_text(fits: bool | None, palette: KvsetTheme) -> Text:
    if fits is None:
        return Text("–", style=palette.rich("muted"))
    if fits:
        return Text("yes", style=palette.rich("ok"))
    return Text("no", style=f"bold {palette.rich('bad')}")


OPT_ALL_TIME = "MIN: of the whole trace, in the all window (w)"


def opt_gap_text(snapshot: Snapshot, unit: str, narrow: bool = False) -> str:
    """With --opt: MIN's hit rate against LRU's at the engine's pool (or --capacity), else what MIN is
    waiting for; nothing without --opt."""
    belady = snapshot.get(BeladyMin)
    if belady is None:
        return ""
    gap = belady.gap
    if gap is None:
        return belady.note or ""
    at = gap.at_capacity()
    if at is None:
        return (
            "MIN: give --capacity for its gap at a pool"
            if narrow
            else "MIN beside LRU: give --capacity BLOCKS for the gap at a pool"
        )
    tokens = hit_unit(unit) == "tokens"
    opt, lru = (
        (at.opt_token_hit_rate, at.lru_token_hit_rate)
        if tokens
        else (at.opt_block_hit_rate, at.lru_block_hit_rate)
    )
    where = capacity_text(at.capacity_blocks, snapshot, unit)
    if narrow:
        return f"MIN {fmt.percent(opt)} · LRU {fmt.percent(lru)} @ {where}"
    return f"@ {where}: MIN {fmt.percent(opt)} · LRU {fmt.percent(lru)} ({fmt.points(opt - lru)})"


def ranks_subtitle(snapshot: Snapshot, view: ViewState) -> str:
    """With data-parallel ranks: the selected rank's share and pool, or the merged stream's pooling gain."""
    by_rank = snapshot.get(Ranks)
    if by_rank is None:
        return ""
    rank = view.rank_view(snapshot)
    if rank is not None:
        share = rank.accesses / snapshot.totals.accesses if snapshot.totals.accesses else None
        pool = f" · own pool {fmt.count(rank.pool_blocks)} blk" if rank.pool_blocks else ""
        return f"{fmt.percent(share)} of accesses{pool}"
    p = by_rank.pooling
    if p is None:
        return f"{len(by_rank.views)} ranks · pooling gain not computed"
    return (
        f"pooled {fmt.count(p.capacity_blocks)} blk: {fmt.points(p.gain('blocks'))} over {p.ranks} rank pools"
    )


class WorkingSetTable(SnapshotView, Widget):
    """One row per target: capacity in blocks, tokens and GiB, the hit rate it gives, trend over recent
    windows, fits the pool."""

    DEFAULT_CSS = """
    WorkingSetTable { height: auto; }
    """
    DATA_FRAME_SECONDS = 2.0  # windows of minutes move slowly; the table is costly to lay out

    def __init__(self, palette: KvsetTheme, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.border_title = "Working sets"

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view.window, view.unit, view.target_mode, view.rank)

    @property
    def shows_opt(self) -> bool:
        """MIN's column: with its curve, on the merged stream (ranks have none)."""
        snap = self.snapshot
        opt = snap.get(BeladyMin) if snap is not None else None
        return opt is not None and opt.curve is not None and self.view.rank_view(snap) is None

    def on_data(self) -> None:
        rank = self.view.rank_label(self.snapshot)
        title = "Working sets" + (f" · {rank}" if rank else "") + f" · {self.view.target_mode}"
        if self.view.rank_view(self.snapshot) is not None:
            title += " · all time"  # a rank's own views are all-time only
        elif self.snapshot is not None:
            title += f" · {self.view.window} window"
        self.border_title = title
        snap = self.snapshot
        subtitle = ranks_subtitle(snap, self.view) if snap is not None else ""
        if snap is not None and not subtitle:
            subtitle = opt_gap_text(snap, self.view.effective_unit(snap), self.narrow)
        self.border_subtitle = subtitle

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        if snap is None:
            return Text("waiting for data…", style=p.rich("muted"))
        window = self.view.window
        ws = snap.get(WorkingSets)
        rows = ws.rows_for(window, self.view.target_mode) if ws is not None else ()
        rank = self.view.rank_view(snap)
        if rank is not None:
            window, rows = "all", rank.working_set_rows(self.view.target_mode)
        if not rows:
            return Text(f"no {self.view.target_mode} targets computed yet", style=p.rich("muted"))
        full = self.content_width >= FULL_TABLE_WIDTH
        with_gib = any(r.capacity_bytes is not None for r in rows)  # GiB needs a model's geometry
        gpu = ws.gpu if ws is not None and rank is None and full else None
        with_tokens = gpu is None or self.content_width >= GPU_TABLE_WIDTH
        unit = self.view.effective_unit(snap)
        # one space between columns (rich pads both sides of a cell otherwise): the row fits 54 cells
        table = Table(box=None, padding=(0, 1, 0, 0), pad_edge=False, expand=True, show_edge=False)
        table.add_column("target", style="bold", no_wrap=True)
        if full:
            table.add_column("blocks", justify="right", no_wrap=True)
            if with_tokens:
                table.add_column("tokens", justify="right", no_wrap=True)
            if with_gib:
                table.add_column("GiB", justify="right", no_wrap=True)
            if gpu is not None:
                table.add_column("GPUs", justify="right", no_wrap=True)
        else:
            table.add_column(unit, justify="right", no_wrap=True)
        table.add_column("hit", justify="right", no_wrap=True)
        opt = self.shows_opt
        if opt:
            table.add_column("MIN", justify="right", no_wrap=True)
        # a narrow table gives its trend column to MIN's, and to the hit rate where both do not fit
        trend = full or (not opt and self.content_width >= NARROW_TREND_WIDTH)
        if trend:
            table.add_column("trend", no_wrap=True)
        table.add_column("fits", justify="right", no_wrap=True)
        bound = ""
        curves = snap.get(Curves)
        shown = rank.curve if rank is not None else curves.curve(window) if curves is not None else None
        empty = shown is None or shown.accesses == 0
        blanks = [Text("–") for _ in range(with_tokens + with_gib + (gpu is not None))]
        for row in rows:
            target = fmt.target_label(row.target, row.mode)
            if not row.reached:
                miss = (
                    Text(NO_DATA, style=p.rich("muted")) if empty else Text(NOT_REACHED, style=p.rich("warn"))
                )
                cells = [miss, *blanks] if full else [miss]
            elif row.capacity_blocks == 0:  # a window with accesses but no re-reference yet
                reuse = Text(NO_REUSE, style=p.rich("muted"))
                cells = [reuse, *blanks] if full else [reuse]
            else:
                prefix = "" if row.exact else "≤"
                if not row.exact:
                    bound = "≤: upper bound within the windowed curve's grid step"
                if full:
                    gib = (
                        fmt.format_gib(row.capacity_bytes, significant=fmt.SHORT_DIGITS, with_unit=False)
                        if row.capacity_bytes is not None
                        else None
                    )
                    tokens = fmt.count(row.capacity_tokens) if row.capacity_tokens is not None else None
                    cells = [Text(prefix + fmt.count(row.capacity_blocks))]
                    if with_tokens:
                        cells.append(Text(prefix + tokens if tokens else "–"))
                    if with_gib:
                        cells.append(Text(prefix + gib if gib else "–"))
                    if gpu is not None:
                        count = fmt.format_gpus(row.gpus, at_least=gpu.lower_bound, with_unit=False)
                        cells.append(Text(prefix + count))
                else:
                    cells = [Text(prefix + row_capacity_text(row, snap, unit))]
            cells.append(hit_text(row, unit, p))
            if opt:
                cells.append(self._opt_cell(row, snap, unit if not full else "blocks"))
            if trend:
                cells.append(trend_text(row.trend_blocks, p))
            table.add_row(target, *cells, fits_text(row.fits_pool, p))
        # with the tiers panel beside it, the grid-step line gives way, and on a short screen the fits rule too
        fits = fits_note(rows, short=not full) if not (self.compact and self.crowded) else None
        elsewhere = OPT_ALL_TIME if opt and window != "all" and not self.compact else ""
        # a short screen draws no bottom border: MIN's gap at the pool goes under the table instead
        gap = opt_gap_text(snap, unit, self.narrow) if self.compact and rank is None else ""
        gpu_note = gpu.short() if gpu is not None and not (self.compact and self.crowded) else ""
        notes = [
            note
            for note in (fits, gpu_note, bound if full and not self.crowded else "", elsewhere, gap)
            if note
        ]
        if notes:
            muted = p.rich("muted")
            return Group(table, *(Text(n, style=muted, no_wrap=True, overflow="ellipsis") for n in notes))
        return table

    def _opt_cell(self, row: WorkingSetRow, snap: Snapshot, unit: str) -> Text:
        """The capacity MIN needs for the row's target, in `unit` (blocks in the full table)."""
        muted = self.palette.rich("muted")
        if row.window != "all":
            return Text("–", style=muted)  # MIN's curve is of the whole trace only
        if row.opt_capacity_blocks is None:
            return Text(NOT_REACHED, style=self.palette.rich("warn"))
        if unit == "blocks":
            return Text(fmt.count(row.opt_capacity_blocks), style=self.palette.rich("ok"))
        return Text(capacity_text(row.opt_capacity_blocks, snap, unit), style=self.palette.rich("ok"))
