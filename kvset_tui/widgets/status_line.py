"""The status line: each source's health, then ingest rate, horizon, window and pause state."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable, Hashable

from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import Snapshot, SourceHealth
from kvset.api import quantities as fmt
from kvset_tui.theming import KvsetTheme
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

MAX_SOURCE_LINES = 3
MAX_STATE_LINES = 3  # a down source's state (its hint at the end) wraps onto at most these lines


def one_line(text: str) -> str:
    """A message as one line: the status line gives each source its own lines, and a line break inside
    a message (an error's second line) would push the rest off the screen."""
    return " · ".join(part.strip() for part in str(text).splitlines() if part.strip())


def source_lines(
    health: SourceHealth, now: float, palette: KvsetTheme, width: int, compact: bool = False
) -> list[Text]:
    """One line for the source's health, or two (name and state, then the facts) when it is too wide.

    On a short screen (`compact`) a healthy source keeps to one line, cut at the edge; a source that
    is down or rejects input always gets its second line."""
    p = palette
    if health.finished:
        dot, colour = "◼", p.rich("muted")
    elif health.connected:
        dot, colour = "●", p.rich("ok")
    else:
        dot, colour = "○", p.rich("bad")
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(f"{dot} ", style=colour)
    head.append(one_line(health.source), style="bold")
    head.append(" · ")
    head.append(one_line(health.status()), style=colour if not health.connected or health.finished else "")
    facts = Text(no_wrap=True, overflow="ellipsis")
    age = now - health.last_data_at if health.last_data_at is not None else None
    facts.append(f"data {fmt.age(age)}{' ago' if age is not None else ''}", style=p.rich("muted"))
    n = health.rejected_total
    if n:
        top = health.rejected[0]
        facts.append(f" · {fmt.count(n)} rejected", style=f"bold {p.rich('warn')}")
        facts.append(
            f" ({one_line(top.reason)}{', …' if len(health.rejected) > 1 else ''})", style=p.rich("warn")
        )
    else:
        facts.append(" · 0 rejected", style=p.rich("muted"))
    if health.accesses:
        facts.append(f" · {fmt.count(health.accesses)} accesses", style=p.rich("muted"))
    backlog = dict(health.details).get("backlog")
    if backlog:  # the source or the analyzer falls behind: say it before anything else can crowd it out
        facts.append(f" · backlog: {one_line(backlog)}", style=f"bold {p.rich('warn')}")
    if health.notes:
        facts.append(f" · {one_line(health.notes[0])}", style=p.rich("muted"))
    healthy = (health.connected or health.finished) and not n and not backlog
    if head.cell_len + 3 + facts.cell_len <= width or (compact and healthy):
        return [Text.assemble(head, " · ", facts, no_wrap=True, overflow="ellipsis")]
    down = not (health.connected or health.finished)
    if down and not compact and head.cell_len > width:  # what to check is at the end: wrap, not cut
        name = Text.assemble(
            (f"{dot} ", colour), (one_line(health.source), "bold"), no_wrap=True, overflow="ellipsis"
        )
        state = textwrap.wrap(one_line(health.status()), max(10, width - 2))
        if len(state) > MAX_STATE_LINES:
            state = [*state[: MAX_STATE_LINES - 1], " ".join(state[MAX_STATE_LINES - 1 :])]
        wrapped = [Text("  " + part, style=colour, no_wrap=True, overflow="ellipsis") for part in state]
        return [name, *wrapped, Text.assemble("  ", facts, no_wrap=True, overflow="ellipsis")]
    return [head, Text.assemble("  ", facts, no_wrap=True, overflow="ellipsis")]


class StatusLine(SnapshotView, Widget):
    """Health of every source, the ingest rate, horizon, window and whether the display is paused.

    `clock` gives "now" for the age of the last data (injected so screenshots are deterministic).
    """

    DEFAULT_CSS = """
    StatusLine { height: auto; padding: 0 1; background: $panel; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(
        self, palette: KvsetTheme, *, clock: Callable[[], float] = time.time, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.clock = clock
        self.monitor_error: str | None = None

    def _ages(self, snapshot: Snapshot | None) -> tuple[str, ...]:
        if snapshot is None:
            return ()
        now = self.clock()
        return tuple(
            fmt.age(now - s.last_data_at) if s.last_data_at is not None else "never" for s in snapshot.sources
        )

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view, self._ages(snapshot), self.monitor_error)

    def tick(self) -> bool:
        """Re-render only if a shown age changed (called once a second while not paused). An age
        changes no line count worth a layout pass; the next snapshot re-measures anyway."""
        return self.show(self.snapshot, self.view, layout=False)

    def set_monitor_error(self, error: str | None) -> None:
        self.monitor_error = error
        self.show(self.snapshot, self.view)

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        view = self.view
        out = Text(no_wrap=True, overflow="ellipsis")
        if self.monitor_error:
            out.append(f"monitor stopped: {one_line(self.monitor_error)}\n", style=f"bold {p.rich('bad')}")
        if snap is None:
            out.append("starting… no snapshot yet", style=p.rich("muted"))
        else:
            now = self.clock()
            sources = snap.sources
            width = max(20, self.content_width)
            for health in sources[:MAX_SOURCE_LINES]:
                for line in source_lines(health, now, p, width, compact=self.compact):
                    out.append_text(line)
                    out.append("\n")
            if len(sources) > MAX_SOURCE_LINES:
                hidden = sources[MAX_SOURCE_LINES:]
                rejected = sum(h.rejected_total for h in hidden)
                down = sum(1 for h in hidden if not h.connected and not h.finished)
                out.append(
                    f"+{len(hidden)} more sources ({down} down, {rejected} rejected)\n",
                    style=p.rich("bad") if down else p.rich("muted"),
                )
            if not sources:
                out.append("no sources\n", style=p.rich("muted"))
        if view.paused:
            style = "bold reverse" if p.monochrome else f"bold reverse {p.rich('warn')}"
            out.append(" PAUSED ", style=style)
            out.append(" ")
        if snap is not None:
            # the wall-clock rate the sources deliver at (the churn panel's rates are per slot of the data's clock)
            out.append("ingest ", style=p.rich("muted"))
            out.append(fmt.rate(snap.accesses_per_second, " acc/s"), style="bold")
            out.append(" wall clock" if not self.narrow else " wall", style=p.rich("muted"))
        out.append(
            f" · window {view.window} · {view.effective_unit(snap)} · {'log' if view.log_x else 'linear'}"
        )
        out.append(f" · {view.target_mode}")
        rank = view.rank_label(snap)
        if rank:
            out.append(f" · {rank}", style="bold")
        if snap is not None:
            out.append(f" · horizon {fmt.count(snap.horizon)} blk", style=p.rich("muted"))
            out.append(f" · {fmt.count(snap.totals.accesses)} accesses", style=p.rich("muted"))
        return out
