"""Cache tiers (--tiers): each tier's size, the share of all accesses it serves, the misses left, and the
smallest next tier for the main target (--size-next-tier); beside them, where the engine counts its own
tiers (SGLang's HiCache), the share each served as measured and the pages its events show there."""

from __future__ import annotations

from collections.abc import Hashable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import EngineTier, NextTier, Snapshot, TierPlan, Tiers
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


def measured_text(tier: EngineTier | None) -> str:
    """The engine's measured token share of a tier ("-": it does not count that tier)."""
    return "-" if tier is None or tier.token_hit_rate is None else fmt.percent(tier.token_hit_rate)


def engine_table(tiers: tuple[EngineTier, ...]) -> Table:
    """The engine's own tiers alone (no --tiers to set them beside)."""
    table = Table(box=None, padding=(0, 1), pad_edge=False, expand=True, show_edge=False)
    for name, justify in (("tier", "left"), ("engine", "left"), ("measured", "right"), ("pages", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for t in tiers:
        pages = "-" if t.resident_pages is None else fmt.count(t.resident_pages)
        table.add_row(str(t.index), t.name, measured_text(t), pages)
    return table


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
        tiers = snap.get(Tiers) if snap is not None else None
        measured = tiers.engine if tiers is not None else ()
        if snap is None or plan is None:
            hint = Text(
                WAITING if tiers is not None and tiers.planned else "no tiers planned: give --tiers C1,C2",
                style=p.rich("muted"),
            )
            return Group(engine_table(measured), hint) if measured else hint
        unit = self.view.effective_unit(snap)
        by_index = {t.index: t for t in measured}
        if self.compact:
            return self._render_compact(plan, snap, unit, by_index)
        table = Table(box=None, padding=(0, 1), pad_edge=False, expand=True, show_edge=False)
        table.add_column("tier", style="bold", no_wrap=True)
        table.add_column("size", justify="right", no_wrap=True)
        table.add_column("of blocks", justify="right", no_wrap=True)
        table.add_column("of tokens", justify="right", no_wrap=True)
        if measured:
            table.add_column("engine", justify="right", no_wrap=True)
        for t in plan.tiers:
            row = [
                str(t.index),
                capacity_text(t.capacity_blocks, snap, unit),
                share_text(t.block_hit_rate, t.exact),
                share_text(t.token_hit_rate, t.exact),
            ]
            table.add_row(*row, *([measured_text(by_index.get(t.index))] if measured else []))
        miss = p.rich("warn")
        table.add_row(
            Text("miss", style=miss),
            "",
            Text(fmt.percent(plan.miss_block_rate), style=miss),
            Text(fmt.percent(plan.miss_token_rate), style=miss),
        )
        lines = [
            Text(text, style=style, no_wrap=True, overflow="ellipsis")
            for text, style in (
                (next_tier_text(plan.next_tier, snap, unit) if plan.next_tier else None, "bold"),
                (tiers.note if tiers is not None else None, p.rich("muted")),
            )
            if text
        ]
        return Group(table, *lines) if lines else table

    def _render_compact(
        self, plan: TierPlan, snap: Snapshot, unit: str, measured: dict[int, EngineTier]
    ) -> Text:
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
            if measured:
                out.append(f" {measured_text(measured.get(t.index)):>6} ")
                out.append("engine", style=p.rich("muted"))
        if plan.next_tier is not None:
            out.append("\n" + next_tier_text(plan.next_tier, snap, unit, short=True), style="bold")
        return out
