"""The DEMO banner: the numbers on screen come from the built-in synthetic workload, not an engine."""

from __future__ import annotations

from collections.abc import Hashable

from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from kvset.api import Snapshot
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.panel import SnapshotView

DEMO_TEXT = "DEMO · built-in synthetic agent workload, not your engine · give a source to monitor one"
DEMO_TEXT_SHORT = "DEMO · synthetic agent workload, not your engine"


class DemoBanner(SnapshotView, Widget):
    """One line across the top, shown only while the snapshot says it comes from the demo."""

    DEFAULT_CSS = """
    DemoBanner { height: 1; display: none; text-style: bold; }
    DemoBanner.-demo { display: block; }
    """

    AUTO_HEIGHT = False

    def __init__(self, palette, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.palette = palette

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (bool(snapshot is not None and snapshot.demo), self.palette.name)

    def on_data(self) -> None:
        self.set_class(bool(self.snapshot is not None and self.snapshot.demo), "-demo")

    def render(self) -> RenderResult:
        p = self.palette
        style = "bold reverse" if p.monochrome else f"bold {p.rich('banner_fg')} on {p.rich('banner_bg')}"
        width = self.content_width
        text = DEMO_TEXT if width >= len(DEMO_TEXT) else DEMO_TEXT_SHORT
        return Text(text.center(max(len(text), width)), style=style, no_wrap=True, overflow="ellipsis")
