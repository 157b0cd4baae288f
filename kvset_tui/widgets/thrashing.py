"""Thrashing at the engine's (or a chosen) capacity: what more capacity buys, and the re-stores."""

from __future__ import annotations

from collections.abc import Hashable

from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import (
    MISSES_ONLY,
    RANK_POOL_SOURCE,
    RECONSTRUCTED,
    THRASHING_RULE_SHORT,
    Curves,
    OperatingPoint,
    Snapshot,
    Thrashing,
    ThrashingByWindow,
    thrashing_at,
)
from kvset.api import quantities as fmt
from kvset_tui.capacity_units import capacity_text
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

LEVEL_LABEL = {"ok": " OK ", "warn": " WARN ", "thrashing": " THRASHING "}
LEVEL_COLOR = {"ok": "ok", "warn": "warn", "thrashing": "bad"}
CURSOR_SOURCE = "cursor"  # judged at the curve's cursor: no pool is known
CAPACITY_SOURCE = {
    "engine": "engine pool",
    "chosen": "--capacity",
    RANK_POOL_SOURCE: "each rank's own pool",
    CURSOR_SOURCE: "the cursor: no pool known",
}
CAPACITY_SOURCE_SHORT = {
    "engine": "pool",
    "chosen": "chosen",
    RANK_POOL_SOURCE: "rank pool",
    CURSOR_SOURCE: "cursor",
}
ALL_TIME_ONLY = "judged over all time only: each data-parallel rank has its own pool (w: cycle to all)"
NO_REUSE = "not judged yet: no block re-read in this window"
NOT_JUDGED = "not judged: no cache capacity to judge at"
NOT_JUDGED_HOW = "give --capacity BLOCKS, or --metrics of an engine, or point the cursor (←/→, c)"
NOT_JUDGED_HOW_SHORT = "--capacity, --metrics or the cursor (←/→)"


def judged(snapshot: Snapshot | None, view: ViewState) -> Thrashing | None:
    """The thrashing figures of the view's window: at the pool the snapshot judged them at, else at the
    curve's cursor (the same figures, read at the capacity pointed at), else None."""
    by_window = snapshot.get(ThrashingByWindow) if snapshot is not None else None
    found = by_window.get(view.window) if by_window is not None else None
    if found is not None or snapshot is None or view.cursor_blocks is None:
        return found
    if by_window is not None and by_window.by_rank_pools:
        return None  # each rank has its own pool: one cursor does not stand for them
    curves = snapshot.get(Curves)
    curve = curves.curve(view.window) if curves is not None else None
    if curve is None or not curve.infinite_capacity_hits():
        return None
    return thrashing_at(curve, view.cursor_blocks, CURSOR_SOURCE, view.window)


class ThrashingPanel(SnapshotView, Widget):
    """The first number an on-call engineer needs: is the cache thrashing, and what would more buy?"""

    DEFAULT_CSS = """
    ThrashingPanel { height: auto; }
    ThrashingPanel.-ok { border: round $success; }
    ThrashingPanel.-warn { border: round $warning; }
    ThrashingPanel.-thrashing { border: heavy $error; }
    """

    def __init__(self, palette, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.border_title = "Thrashing"

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view.window, view.effective_unit(snapshot), view.cursor_blocks)

    def on_data(self) -> None:
        window = self.view.window
        t = judged(self.snapshot, self.view)
        level = t.level if t is not None else None
        for name in ("ok", "warn", "thrashing"):
            self.set_class(level == name, f"-{name}")
        self.border_title = f"Thrashing · {window} window" if t is not None else "Thrashing"

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        window = self.view.window
        t = judged(snap, self.view)
        if snap is None or t is None:
            if snap is None or snap.totals.accesses == 0:
                return Text("no block accesses yet", style=p.rich("muted"))
            by_window = snap.get(ThrashingByWindow)
            if by_window is not None and by_window.by_rank_pools:
                return Text(ALL_TIME_ONLY, style=p.rich("muted"))
            curves = snap.get(Curves)
            if curves is not None and not curves.curve(window).infinite_capacity_hits():
                return Text(NO_REUSE, style=p.rich("muted"))
            out = Text(NOT_JUDGED, style=p.rich("muted"))
            out.append(
                "\n" + (NOT_JUDGED_HOW_SHORT if self.narrow else NOT_JUDGED_HOW), style=p.rich("muted")
            )
            return out
        unit = self.view.effective_unit(snap)
        # in tokens (and GiB, which counts tokens' bytes) the token figures, as engines report them
        in_tokens = unit != "blocks" and t.tokens is not None
        g = t.in_unit("tokens" if in_tokens else "blocks")
        level = t.level
        colour = p.rich(LEVEL_COLOR[level])
        out = Text(no_wrap=True, overflow="ellipsis")
        badge_style = f"bold reverse {colour}" if not p.monochrome else "bold reverse"
        out.append(LEVEL_LABEL[level], style=badge_style)
        if self.narrow:  # the gains on the third line, both of them
            out.append(" ")
            out.append(fmt.percent(g.restore_share), style=f"bold {colour}")
            out.append(" re-stores\n", style="bold")
        else:
            out.append(" +25 % cap ", style="bold")
            out.append(fmt.points(g.gain_25pct), style=f"bold {colour}")
            out.append(" · ", style="bold")
            out.append(fmt.percent(g.restore_share), style=f"bold {colour}")
            out.append(" re-stores\n", style="bold")
        out.append("at ", style=p.rich("muted"))
        out.append(capacity_text(t.capacity_blocks, snap, unit), style="bold")
        names = CAPACITY_SOURCE_SHORT if self.narrow else CAPACITY_SOURCE
        out.append(f" ({names.get(t.capacity_source, t.capacity_source)})", style=p.rich("muted"))
        # the hit rate over the chosen window (the churn panel's is per time slot)
        what = "token" if in_tokens else "block"
        out.append(
            f" · {window} hit " if self.narrow else f" · {what} hit over {window} ", style=p.rich("muted")
        )
        out.append(fmt.percent(g.hit_rate), style="bold")
        out.append("\n+10 % cap ", style=p.rich("muted"))
        out.append(fmt.points(g.gain_10pct), style=f"bold {p.rich('ok')}" if g.gain_10pct > 0 else "bold")
        if self.narrow:
            out.append("   +25 % cap ", style=p.rich("muted"))
            out.append(fmt.points(g.gain_25pct), style="bold")
        else:
            out.append("   near misses ", style=p.rich("muted"))
            out.append(fmt.percent(g.near_miss_share), style="bold")
            out.append(" of misses", style=p.rich("muted"))
        op = snap.get(OperatingPoint)
        if snap.curve_scope == MISSES_ONLY:
            # the engine's KV events show its misses only: this curve is not the engine's own
            out.append(
                "\ncurve of the engine's misses only (no hits reported)", style=f"bold {p.rich('warn')}"
            )
        elif op is not None and op.measured_token_hit_rate is not None:
            out.append("\nengine " if self.narrow else "\nengine measured ", style=p.rich("muted"))
            out.append(fmt.percent(op.measured_token_hit_rate), style=f"bold {p.rich('engine')}")
            modelled = op.model is not None and op.predicted_token_hit_rate is not None
            if modelled:
                out.append(f" · {op.model_label} ", style=p.rich("muted"))
                out.append(fmt.percent(op.predicted_token_hit_rate), style="bold")
            out.append(" · LRU " if modelled else " vs LRU ", style=p.rich("muted"))
            out.append(fmt.percent(op.lru(window)), style="bold")
            out.append(f" ({'tok' if self.narrow else 'tokens'}, {window})", style=p.rich("muted"))
            if op.miss_breakdown and not self.compact:
                out.append(miss_line(dict(op.miss_breakdown)), style=p.rich("muted"))
            if snap.curve_scope == RECONSTRUCTED:
                # vLLM's default event mode: the hits were read off the chains, requests storing nothing unseen
                unseen = op.unseen_token_share
                out.append(
                    "\nhits reconstructed (misses-only events)"
                    + ("" if unseen is None else f" · unseen {fmt.percent(unseen)} of queries"),
                    style=p.rich("warn"),
                )
        if not self.compact and not self.crowded:
            out.append(f"\n{THRASHING_RULE_SHORT}", style=p.rich("muted"))
        return out


MISS_LABELS = (
    ("first_time", "new"),
    ("capacity", "cap"),
    ("pinned", "pinned"),
    ("partial_tail", "tail"),
    ("recomputed_last_block", "last"),
    ("beyond_horizon", "horizon"),
)


def miss_line(breakdown: dict[str, float]) -> str:
    """Where the engine's query tokens went at its pool, by the model: the misses by cause, in % of them."""
    parts = [f"{label} {100 * breakdown[key]:.1f}" for key, label in MISS_LABELS if breakdown.get(key)]
    return "\nmisses %: " + " ".join(parts)
