"""Thrashing at the engine's (or a chosen) capacity: what more capacity buys, and the near-miss share."""

from __future__ import annotations

from collections.abc import Hashable

from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset import quantities as fmt
from kvset.snapshot import MISSES_ONLY, NEAR_MISS_THRASHING, NEAR_MISS_WARN, Snapshot, Thrashing
from kvset_tui.capacity_units import capacity_text, engine_capacity_blocks
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

LEVEL_LABEL = {"ok": " OK ", "warn": " WARN ", "thrashing": " THRASHING "}
LEVEL_COLOR = {"ok": "ok", "warn": "warn", "thrashing": "bad"}
CAPACITY_SOURCE = {"engine": "engine", "chosen": "chosen", "working-set": "main WS"}


def thrashing_for_view(snapshot: Snapshot, view: ViewState) -> tuple[Thrashing | None, str]:
    t = snapshot.thrashing.get(view.window)
    if t is not None:
        return t, view.window
    return snapshot.thrashing.get("all"), "all"


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
        return (id(snapshot), view.window, view.effective_unit(snapshot))

    def on_data(self) -> None:
        t = None
        window = self.view.window
        if self.snapshot is not None:
            t, window = thrashing_for_view(self.snapshot, self.view)
        level = t.level if t is not None else None
        for name in ("ok", "warn", "thrashing"):
            self.set_class(level == name, f"-{name}")
        self.border_title = f"Thrashing · {window} window" if t is not None else "Thrashing"

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        t = thrashing_for_view(snap, self.view)[0] if snap is not None else None
        if snap is None or t is None:
            if snap is None or snap.totals.accesses == 0:
                return Text("no block accesses yet", style=p.rich("muted"))
            return Text("no capacity to judge: give --capacity or an engine source", style=p.rich("muted"))
        unit = self.view.effective_unit(snap)
        level = t.level
        colour = p.rich(LEVEL_COLOR[level])
        out = Text(no_wrap=True, overflow="ellipsis")
        badge_style = f"bold reverse {colour}" if not p.monochrome else "bold reverse"
        out.append(LEVEL_LABEL[level], style=badge_style)
        out.append(" ")
        out.append(fmt.percent(t.near_miss_share), style=f"bold {colour}")
        out.append(" of misses are near misses\n" if not self.narrow else " near misses\n", style="bold")
        out.append("at ", style=p.rich("muted"))
        out.append(capacity_text(t.capacity_blocks, snap, unit), style="bold")
        out.append(f" ({CAPACITY_SOURCE.get(t.capacity_source, t.capacity_source)})", style=p.rich("muted"))
        out.append(" hit ", style=p.rich("muted"))
        out.append(fmt.percent(t.hit_rate), style="bold")
        out.append("\n+10 % cap ", style=p.rich("muted"))
        out.append(fmt.points(t.gain_10pct), style=f"bold {p.rich('ok')}" if t.gain_10pct > 0 else "bold")
        out.append("   +25 % cap ", style=p.rich("muted"))
        out.append(fmt.points(t.gain_25pct), style=f"bold {p.rich('ok')}" if t.gain_25pct > 0 else "bold")
        measured = snap.engine.token_hit_rate if snap.engine is not None else None
        engine_blocks = engine_capacity_blocks(snap)
        if snap.curve_scope == MISSES_ONLY:
            # the engine's KV events show its misses only: this curve is not the engine's own
            out.append("\ncurve of the engine's misses only (no hits reported)", style=f"bold {p.rich('warn')}")
        elif measured is not None and engine_blocks:
            curve = snap.curves.get(self.view.window) or snap.curves["all"]
            out.append("\nengine measured ", style=p.rich("muted"))
            out.append(fmt.percent(measured), style=f"bold {p.rich('engine')}")
            op = snap.operating_point
            modelled = op is not None and op.model is not None and op.predicted_token_hit_rate is not None
            if modelled:
                out.append(" · model ", style=p.rich("muted"))
                out.append(fmt.percent(op.predicted_token_hit_rate), style="bold")
            out.append(" · LRU " if modelled else " vs LRU ", style=p.rich("muted"))
            out.append(fmt.percent(curve.hit_rate(engine_blocks, "tokens")), style="bold")
            out.append(" (tokens)", style=p.rich("muted"))
            if op is not None and op.miss_breakdown and not self.compact:
                out.append(miss_line(dict(op.miss_breakdown)), style=p.rich("muted"))
        if not self.compact:
            out.append(
                f"\nnear miss ≤ 1.25× cap · warn ≥ {NEAR_MISS_WARN:.0%}, thrashing ≥ {NEAR_MISS_THRASHING:.0%}",
                style=p.rich("muted"),
            )
        return out


MISS_LABELS = (("first_time", "new"), ("capacity", "cap"), ("pinned", "pinned"), ("partial_tail", "tail"),
               ("recomputed_last_block", "last"), ("beyond_horizon", "horizon"))  # fmt: skip


def miss_line(breakdown: dict[str, float]) -> str:
    """Where the engine's query tokens went at its pool, by the model: the misses by cause, in % of them."""
    parts = [f"{label} {100 * breakdown[key]:.1f}" for key, label in MISS_LABELS if breakdown.get(key)]
    return "\nmisses %: " + " ".join(parts)
