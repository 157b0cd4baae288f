"""Cache tiers (--tiers): each tier's size, the share of all accesses it serves, the misses left, and the
smallest next tier for the main target (--size-next-tier)."""

from __future__ import annotations

from collections.abc import Hashable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import NextTier, Snapshot, TierPlan, Tiers
from kvset.api import quantities as fmt
from kvset_tui.capacity_units import capacity_text
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

WAITING = "waiting for the stream's block size to turn the tier sizes into blocks"
LOWER_BOUND = "≥"  # a tier that ends beyond the horizon serves at least this share


def next_tier_text(n: NextTier, snapshot: Snapshot, unit: str, short: bool = False) -> str:
    """The smallest next tier for the target, or that none is needed, or that it is not reached."""
    goal = fmt.target_label(n.target, n.mode)
    if not n.reached:
        return f"next tier for {goal}: not reached inside the horizon"
    if n.capacity_blocks == 0:
        return f"next tier for {goal}: none needed"
    size = capacity_text(n.capacity_blocks, snapshot, unit)
    if short:
        return f"next {goal}: {size} → {fmt.percent(n.block_hit_rate)}"
    return f"next tier for {goal}: {size}, all tiers {fmt.percent(n.block_hit_rate)}"


def tier_plan(snapshot: Snapshot | None) -> TierPlan | None:
    """The tiers' shares (None: no --tiers, or they wait for the stream's block size)."""
    tiers = snapshot.get(Tiers) if snapshot is not None else None
    return tiers.plan if tiers is not None else None


def share_text(rate: float, exact: bool) -> str:
    return ("" if exact else LOWER_BOUND) + fmt.percent(rate)


class TiersPanel(SnapshotView, Widget):
    """One row per tier, fastest first: its size in the chosen unit and its share of all accesses."""

    DEFAULT_CSS = """
    TiersPanel { height: auto; }
    """

    def __init__(self, palette, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.border_title = "Tiers"

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view.effective_unit(snapshot))

    def on_data(self) -> None:
        plan = tier_plan(self.snapshot)
        # the misses in the title: a short screen has no row for them
        self.border_title = (
            "Tiers" if plan is None else f"Tiers · {plan.mode} · miss {fmt.percent(plan.miss_block_rate)}"
        )

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        plan = tier_plan(snap)
        if snap is None or plan is None:
            asked = snap is not None and snap.get(Tiers) is not None
            return Text(WAITING if asked else "no tiers: give --tiers C1,C2", style=p.rich("muted"))
        unit = self.view.effective_unit(snap)
        if self.compact:
            return self._render_compact(plan, snap, unit)
        table = Table(box=None, padding=(0, 1), pad_edge=False, expand=True, show_edge=False)
        table.add_column("tier", style="bold", no_wrap=True)
        table.add_column("size", justify="right", no_wrap=True)
        table.add_column("of blocks", justify="right", no_wrap=True)
        table.add_column("of tokens", justify="right", no_wrap=True)
        for t in plan.tiers:
            table.add_row(
                str(t.index),
                capacity_text(t.capacity_blocks, snap, unit),
                share_text(t.block_hit_rate, t.exact),
                share_text(t.token_hit_rate, t.exact),
            )
        miss = p.rich("warn")
        table.add_row(
            Text("miss", style=miss),
            "",
            Text(fmt.percent(plan.miss_block_rate), style=miss),
            Text(fmt.percent(plan.miss_token_rate), style=miss),
        )
        if plan.next_tier is None:
            return table
        line = Text(
            next_tier_text(plan.next_tier, snap, unit), style="bold", no_wrap=True, overflow="ellipsis"
        )
        return Group(table, line)

    def _render_compact(self, plan: TierPlan, snap: Snapshot, unit: str) -> Text:
        """A line per tier (the misses are in the title), then the next tier: for a short terminal."""
        p = self.palette
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, t in enumerate(plan.tiers):
            if i:
                out.append("\n")
            out.append(f"{t.index} ", style="bold")
            out.append(capacity_text(t.capacity_blocks, snap, unit).rjust(9))
            out.append(f" {share_text(t.block_hit_rate, t.exact):>7} ")
            out.append("blk", style=p.rich("muted"))
            out.append(f" {share_text(t.token_hit_rate, t.exact):>7} ")
            out.append("tok", style=p.rich("muted"))
        if plan.next_tier is not None:
            out.append("\n" + next_tier_text(plan.next_tier, snap, unit, short=True), style="bold")
        return out
