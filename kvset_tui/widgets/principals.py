"""Principals (`--by`): whose cache it is. One level at a time (`b` cycles tenant, session, adapter
among those asked for), its principals sorted by the cache they hold: the working set each needs
alone, its hit rate in the shared cache, its share of the cache held against its share of the hits,
and a warning on the ones that hold much more than they earn. The cache held is a model (an LRU of
the pool's size replayed over the stream): the panel says so in its title."""

from __future__ import annotations

from collections.abc import Hashable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import PrincipalRow, Principals, Snapshot, printable
from kvset.api import quantities as fmt
from kvset_tui.capacity_units import capacity_text
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

NO_PRINCIPALS = "no principals: give --by tenant, session or adapter"
HOG_MARK = "▲"  # a principal holding much more of the cache than its share of the hits
ROWS = 8  # principals shown; a short screen shows fewer
SHORT_ROWS = 4


def by_cache_held(rows: list[PrincipalRow]) -> list[PrincipalRow]:
    """Most cache held first; without a pool replay, most accesses first (the report's order)."""
    return sorted(rows, key=lambda r: -(r.cache_share if r.cache_share is not None else 0.0))


def principal_name(r: PrincipalRow) -> str:
    return f"(other) ×{r.members:,}" if r.isolated_curve is None else printable(r.name)


class PrincipalsPanel(SnapshotView, Widget):
    """The principals of one level (`level`, cycled by the app's key), sorted by cache held."""

    DEFAULT_CSS = """
    PrincipalsPanel { height: auto; }
    """

    def __init__(self, palette, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.level: str | None = None  # the level shown; None: the first the snapshot has
        self.border_title = "Principals"

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view.effective_unit(snapshot), self.level)

    def result(self) -> Principals | None:
        return self.snapshot.get(Principals) if self.snapshot is not None else None

    def shown_level(self) -> str | None:
        p = self.result()
        if p is None or not p.levels:
            return None
        return self.level if self.level in p.levels else p.levels[0]

    def cycle_level(self) -> str | None:
        """Show the next level the snapshot has (tenant, session, adapter as asked); the one shown."""
        p = self.result()
        if p is None or not p.levels:
            return None
        now = self.shown_level()
        self.level = p.levels[(p.levels.index(now) + 1) % len(p.levels)] if now else None
        self._shown_key = None
        self.show(self.snapshot, self.view)
        return self.level

    def on_data(self) -> None:
        self.display = self.result() is not None  # only with --by: the side column keeps its room otherwise

    def title(self) -> str:
        p, level = self.result(), self.shown_level()
        if p is None or level is None:
            return "Principals"
        at = p.share_capacity_blocks
        if self.narrow:  # the side column's 38 cells: the level and the pool only ("held" says model)
            return f"Principals · {level}" + (f" · {fmt.count(at)} blk" if at else "")
        where = f" · at {fmt.count(at)} blk" if at else ""
        model = " · LRU model" if p.pool is not None else ""
        return f"Principals · by {level}{where}{model}"

    def render(self) -> RenderResult:
        # the title follows the screen's width, known once laid out: set here, not when data comes
        self.border_title = self.title()
        # live, every figure here is of the last --by-window accesses only: said where it is read
        p = self.result()
        window = p.window_short if p is not None else None
        self.border_subtitle = f"over the {window}" if window else ""
        pal = self.palette
        p, level, snap = self.result(), self.shown_level(), self.snapshot
        if p is None or level is None or snap is None:
            return Text(NO_PRINCIPALS, style=pal.rich("muted"))
        unit = self.view.effective_unit(snap)
        rows = by_cache_held(p.level_rows(level))
        shown = rows[: SHORT_ROWS if self.compact else ROWS]
        table = Table(box=None, padding=(0, 1), pad_edge=False, expand=True, show_edge=False)
        table.add_column("principal", no_wrap=True, overflow="ellipsis", ratio=1)
        if not self.narrow:
            table.add_column("WS alone", justify="right", no_wrap=True)
        table.add_column("hit", justify="right", no_wrap=True)
        table.add_column("held*" if self.narrow else "held", justify="right", no_wrap=True)
        table.add_column("hits", justify="right", no_wrap=True)
        warn = pal.rich("warn")
        for r in shown:
            hog = r.holds_more_than_it_earns
            style = warn if hog else ""
            ws = r.working_sets[0].capacity_blocks if r.working_sets else None
            cells = [Text(("" if not hog else HOG_MARK + " ") + principal_name(r), style=style)]
            if not self.narrow:
                cells.append(Text(capacity_text(ws, snap, unit) if ws else fmt.MISSING))
            cells += [
                Text(fmt.percent(r.hit_rate_at_share) if p.share_capacity_blocks else fmt.MISSING),
                Text(fmt.percent(r.cache_share), style=style),
                Text(fmt.percent(r.hit_share)),
            ]
            table.add_row(*cells)
        lines: list[Table | Text] = [table]
        if len(rows) > len(shown):
            lines.append(
                Text(f"+{len(rows) - len(shown)} more (kvset analyze --by {level})", style=pal.rich("muted"))
            )
        hogs = [r for r in rows if r.holds_more_than_it_earns]
        if hogs:
            h = hogs[0]
            held, hits = fmt.percent(h.cache_share), fmt.percent(h.hit_share)
            say = f"{held} held, {hits} of hits" if self.narrow else f"holds {held} for {hits} of the hits"
            lines.append(
                Text(f"{HOG_MARK} {principal_name(h)} {say}", style=warn, no_wrap=True, overflow="ellipsis")
            )
        if self.narrow and p.pool is not None:
            lines.append(Text("* held: an LRU model of the pool", style=pal.rich("muted")))
        if not self.compact:
            lines += self._pool_lines(p, level)
        return Group(*lines)

    def _pool_lines(self, p: Principals, level: str) -> list[Text]:
        d, pool = p.displacement(level), p.pool
        if pool is None:
            return []
        parts = []
        if d is not None and d.top_displacer is not None:
            parts.append(f"top displacer: {printable(d.top_displacer)}")
        age = pool.eviction_age_seconds
        parts.append("no eviction" if age is None else f"eviction age {fmt.age(age)}")
        out = [Text(" · ".join(parts), no_wrap=True, overflow="ellipsis")]
        if pool.sessions_next_turn_in_time is not None:
            out.append(
                Text(
                    f"next turn finds its prefix: {fmt.percent(pool.sessions_next_turn_in_time)} of "
                    f"{fmt.count(pool.sessions_with_turns)} sessions",
                    style=self.palette.rich("muted"),
                    no_wrap=True,
                    overflow="ellipsis",
                )
            )
        return out
