"""Reserve: the full-attention working set plus the hybrid-layer reserve, against the engine's pool."""

from __future__ import annotations

from collections.abc import Hashable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import Curves, KvCacheGroups, Reserve, Snapshot
from kvset.api import quantities as fmt
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView
from kvset_tui.widgets.working_sets import NO_DATA, NOT_REACHED

NO_MODEL = "no model given: use --model"
BAR_CELLS = 20


def pool_bar(total: int, pool: int, cells: int) -> tuple[str, str]:
    """A bar of total/pool (full = pool) and the share as text; over the pool, the bar is full."""
    share = total / pool if pool else 0.0
    filled = min(cells, round(share * cells))
    return "█" * filled + "░" * (cells - filled), f"{share:.0%} of pool"


def working_set_text(r: Reserve, snap: Snapshot) -> str:
    """The all-time working set in bytes, or why there is none."""
    if r.working_set_bytes is not None:
        return fmt.format_bytes(r.working_set_bytes, significant=fmt.SHORT_DIGITS)
    curves = snap.get(Curves)
    return NO_DATA if curves is None or curves.curve("all").accesses == 0 else NOT_REACHED


class ReservePanel(SnapshotView, Widget):
    """Full-attention working set vs hybrid reserve vs pool (from the model geometry)."""

    DEFAULT_CSS = """
    ReservePanel { height: auto; }
    """

    def __init__(self, palette, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.border_title = "Reserve"

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        # What the picture is drawn from (no view setting matters here): the same in snapshot after
        # snapshot of a steady stream, and then not redrawn. Each KV cache group's working sets: by
        # snapshot.
        if snapshot is None or snapshot.get(KvCacheGroups) is not None:
            return (id(snapshot),)
        curves = snapshot.get(Curves)
        no_data = curves is None or curves.curve("all").accesses == 0
        return (snapshot.get(Reserve), snapshot.main_mode, no_data, self.crowded_by(snapshot))

    def on_data(self) -> None:
        r = self.snapshot.get(Reserve) if self.snapshot is not None else None
        if r is None:
            self.border_title = "Reserve"
        else:
            per_token = fmt.format_bytes(r.full_attention_bytes_per_token, significant=fmt.SHORT_DIGITS)
            self.border_title = f"Reserve · {r.model} · {per_token}/token"

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        r = snap.get(Reserve) if snap is not None else None
        groups = snap.get(KvCacheGroups) if snap is not None else None
        if snap is not None and groups is not None and not self.compact:
            # the events say what each group holds: that, not the preset's estimate of the hybrid layers
            return self._render_groups(groups, snap)
        if snap is None or r is None:
            out = Text(NO_MODEL, style=p.rich("warn"))
            if not self.compact:
                out.append(
                    "\nGiB, the hybrid reserve and the pool need the KV geometry", style=p.rich("muted")
                )
            return out
        if self.compact or self.crowded:  # two lines: a short screen, or the tiers panel beside it
            return self._render_compact(r, snap)
        target = fmt.target_label(r.working_set_target, snap.main_mode)
        table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False, expand=True)
        table.add_column("part", style=p.rich("muted"), no_wrap=True, overflow="ellipsis")
        table.add_column("bytes", justify="right", no_wrap=True)
        table.add_row(f"full-attention WS {target}, all time", working_set_text(r, snap))
        conc = (
            f"{r.concurrency} req, {r.concurrency_source}"
            if r.concurrency_source != "none"
            else "no concurrency"
        )
        table.add_row(
            f"+ hybrid reserve ({conc})",
            fmt.format_bytes(r.hybrid_reserve_bytes, significant=fmt.SHORT_DIGITS),
        )
        total = r.total_bytes
        verdict = Text("–")
        if total is not None:
            verdict = Text(fmt.format_bytes(total, significant=fmt.SHORT_DIGITS), style="bold")
        table.add_row(Text("= sum", style="bold"), verdict)
        if r.pool_bytes:
            table.add_row("engine pool", fmt.format_bytes(r.pool_bytes, significant=fmt.SHORT_DIGITS))
        parts: list = [table]
        fits = r.fits
        if r.pool_bytes and total is not None and fits is not None:
            bar, share = pool_bar(total, r.pool_bytes, BAR_CELLS)
            colour = p.rich("ok" if fits else "bad")
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(bar, style=colour)
            line.append(f" {share} ", style="bold")
            line.append("fits" if fits else "does not fit", style=f"bold {colour}")
            parts.append(line)
        if r.notes and not self.compact:
            parts.append(Text(r.notes[0], style=p.rich("muted"), no_wrap=True, overflow="ellipsis"))
        return table if len(parts) == 1 else Group(*parts)

    def _render_groups(self, groups: KvCacheGroups, snap: Snapshot) -> Table:
        """Each KV cache group's own working set, measured from its events."""
        p = self.palette
        table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False, expand=True)
        table.add_column("group", style=p.rich("muted"), no_wrap=True, overflow="ellipsis")
        table.add_column("blocks", justify="right", no_wrap=True)
        target = None
        for g in groups.groups:
            rows = [w for w in g.working_sets if w.mode == snap.main_mode]
            row = rows[0] if rows else None
            target = target or (None if row is None else fmt.target_label(row.target, snap.main_mode))
            window = f" {g.group.sliding_window:,}-token window" if g.group.sliding_window else ""
            kind = (g.group.kind or "kind not said").replace("_", " ")
            ws = "–" if row is None or row.capacity_blocks is None else f"{row.capacity_blocks:,} blocks"
            table.add_row(f"group {g.group.group_idx} {kind}{window}", ws)
        table.add_row(Text(f"measured per group, WS {target or ''}, all time", style=p.rich("muted")), "")
        return table

    def _render_compact(self, r: Reserve, snap: Snapshot) -> Text:
        """Two lines for a short terminal: the parts, then the sum against the pool."""
        p = self.palette
        out = Text(no_wrap=True, overflow="ellipsis")
        target = (
            fmt.target_label(r.working_set_target, snap.main_mode).replace(" % cov", "%").replace(" % ", "% ")
        )
        out.append(working_set_text(r, snap))
        out.append(f" WS {target} all + ", style=p.rich("muted"))
        out.append(fmt.format_bytes(r.hybrid_reserve_bytes, significant=fmt.SHORT_DIGITS))
        out.append(" hybrid", style=p.rich("muted"))
        total = r.total_bytes
        out.append("\n= ", style=p.rich("muted"))
        out.append(
            fmt.format_bytes(total, significant=fmt.SHORT_DIGITS), style="bold"
        )  # None: the missing mark
        fits = r.fits
        if r.pool_bytes and total is not None and fits is not None:
            colour = p.rich("ok" if fits else "bad")
            pool = fmt.format_bytes(r.pool_bytes, significant=fmt.SHORT_DIGITS)
            out.append(f" / pool {pool} ", style=p.rich("muted"))
            out.append(f"{total / r.pool_bytes:.0%} ", style="bold")
            out.append("fits" if fits else "no fit", style=f"bold {colour}")
        return out
