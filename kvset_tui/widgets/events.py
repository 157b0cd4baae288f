"""Events: what happened to the input (phase changes, engine resets, sequence gaps, log rotation)."""

from __future__ import annotations

from collections.abc import Hashable

from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import Snapshot, TimelineEvent
from kvset.api import quantities as fmt
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

IMPORTANT = {"engine-reset", "all-blocks-cleared", "sequence-gap", "log-truncated"}


def event_age(event: TimelineEvent, snapshot: Snapshot) -> float:
    """Seconds before the snapshot. Events carry wall or trace time; measure against the closer clock."""
    ref = min((snapshot.taken_at, snapshot.data_time), key=lambda t: abs(t - event.at))
    return ref - event.at


class EventsPanel(SnapshotView, Widget):
    """The newest events first, each with its age; fills the space the side column has left. A long
    event wraps (its hint is the part at the end), and the oldest give way at the bottom."""

    DEFAULT_CSS = """
    EventsPanel { height: 1fr; min-height: 3; text-wrap: wrap; }
    """

    AUTO_HEIGHT = False

    def __init__(self, palette, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette
        self.border_title = "Events"

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot),)

    def render(self) -> RenderResult:
        p = self.palette
        snap = self.snapshot
        if snap is None or not snap.events:
            return Text("no events", style=p.rich("muted"))
        out = Text()
        for i, event in enumerate(sorted(snap.events, key=lambda e: e.at, reverse=True)):
            if i:
                out.append("\n")
            out.append(f"{fmt.age(event_age(event, snap))} ago ".rjust(12), style=p.rich("muted"))
            out.append(event.kind, style=f"bold {p.rich('warn')}" if event.kind in IMPORTANT else "bold")
            out.append(f" {event.text}")
        return out
