"""The shared behaviour of every panel: hold the shown snapshot and view, refresh only on change."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

from kvset.api import Snapshot, Tiers
from kvset_tui.theming import KvsetTheme
from kvset_tui.view_state import ViewState

if TYPE_CHECKING:  # every panel is a Widget too (class X(SnapshotView, Static)): what mypy is shown
    from textual.geometry import Size
    from textual.widget import Widget as _Widget
else:
    _Widget = object


class SnapshotView(_Widget):
    """Mixin for a Widget that renders part of a snapshot.

    `show()` stores the data and refreshes only when `render_key` differs from the last one, so a
    panel that ignores a view setting (the reserve ignores the axis scale) is not redrawn for it.
    `renders` counts the refreshes it asked for (tests use it to check that nothing redraws idly).
    """

    snapshot: Snapshot | None = None
    view: ViewState = ViewState()
    palette: KvsetTheme
    renders: int = 0
    _shown_key: Hashable | None = None
    _measuring_width: int | None = None
    # Panels whose height follows their content re-measure on new data (a layout pass).
    AUTO_HEIGHT: bool = True

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view)

    def show(self, snapshot: Snapshot | None, view: ViewState, layout: bool | None = None) -> bool:
        """Take this snapshot and view; redraw (and re-measure, unless `layout` is False) if they differ."""
        key = self.render_key(snapshot, view)
        if key == self._shown_key:
            return False
        self._shown_key = key
        self.snapshot = snapshot
        self.view = view
        self.renders += 1
        self.on_data()
        self.refresh(layout=self.AUTO_HEIGHT if layout is None else layout)
        return True

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Textual measures an auto-height widget by rendering it at `width` before it has that
        # size; render() reads the width through `content_width` so measuring and drawing agree.
        self._measuring_width = width
        try:
            return super().get_content_height(container, viewport, width)
        finally:
            self._measuring_width = None

    @property
    def content_width(self) -> int:
        return self._measuring_width or self.size.width

    @property
    def narrow(self) -> bool:
        """True on a narrow terminal (the screen's -narrow breakpoint class)."""
        try:
            return self.screen.has_class("-narrow")
        except Exception:  # not mounted yet
            return False

    @property
    def compact(self) -> bool:
        """True on a short terminal (the screen's -short breakpoint class): panels drop explanations."""
        try:
            return self.screen.has_class("-short")
        except Exception:  # not mounted yet
            return False

    @property
    def crowded(self) -> bool:
        """True when the side column also holds the tiers panel (--tiers): explanation lines give way
        (the help screen has them)."""
        return self.snapshot is not None and self.snapshot.get(Tiers) is not None

    def set_palette(self, palette: KvsetTheme) -> None:
        self.palette = palette
        self._shown_key = None
        self.on_data()
        self.refresh(layout=self.AUTO_HEIGHT)

    def on_data(self) -> None:
        """Hook: update titles or classes after new data arrived (rendering happens in render())."""
