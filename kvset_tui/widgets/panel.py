"""The shared behaviour of every panel: hold the shown snapshot and view, refresh only on change."""

from __future__ import annotations

import math
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING

from kvset.api import Snapshot, Tiers
from kvset_tui.theming import KvsetTheme
from kvset_tui.view_state import ViewState

# How early a slow panel takes a snapshot (they come about once a second, never exactly), and how
# long after its time it waits for one before it shows what it has.
FRAME_SLACK_SECONDS = 0.25

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
    # No panel draws a clickable link, and Textual's link pass rebuilds every strip of every frame.
    auto_links = False
    palette: KvsetTheme
    renders: int = 0
    _shown_key: Hashable | None = None
    _measuring_width: int | None = None
    # Panels whose height follows their content re-measure on new data (a layout pass).
    AUTO_HEIGHT: bool = True
    # A slow-moving panel costly to draw takes new data at most this often (0: every snapshot); a
    # change of view (a key) redraws it at once.
    DATA_FRAME_SECONDS: float = 0.0
    _drawn_at: float = -math.inf  # time.monotonic() of the last redraw
    _pending: tuple[Snapshot | None, ViewState, bool | None] | None = None  # show()'s, not yet taken
    _catch_up_due = False
    _measured: tuple[int, int] | None = None  # (width, content height) at the last measurement

    def render_key(self, snapshot: Snapshot | None, view: ViewState) -> Hashable:
        return (id(snapshot), view)

    def show(self, snapshot: Snapshot | None, view: ViewState, layout: bool | None = None) -> bool:
        """Take this snapshot and view; redraw (and re-measure, unless `layout` is False) if they differ.

        Only new data, within DATA_FRAME_SECONDS of the last redraw: taken then, when that time is up."""
        key = self.render_key(snapshot, view)
        self._pending = None
        if key == self._shown_key:
            return False
        if self._too_soon(snapshot, view):
            self._pending = (snapshot, view, layout)
            return False
        self._shown_key = key
        self.snapshot = snapshot
        self.view = view
        self.on_data()
        if self.draws_the_same():
            return False
        self.renders += 1
        self._drawn_at = time.monotonic()
        self.refresh()
        if (self.AUTO_HEIGHT if layout is None else layout) and self._height_changed():
            self.refresh(layout=True)
        return True

    def _height_changed(self) -> bool:
        """Whether the new content needs another height than it was last measured at (a layout pass
        of the whole screen then). Measuring renders the content, which the paint then reuses.

        A hidden panel (no --tiers, no --by) takes no room whatever it holds: it is measured when
        it is shown, by the layout that showing it brings."""
        if not self.display:
            return False
        if self._measured is None:
            return True
        width, height = self._measured
        return bool(self.get_content_height(self.size, self.size, width) != height)

    def _too_soon(self, snapshot: Snapshot | None, view: ViewState) -> bool:
        """New data (same view, a snapshot shown before) within DATA_FRAME_SECONDS of the last redraw.
        The next snapshot is taken as it comes, a little early rather than a frame late; should none
        come, a timer shows what is pending."""
        if not self.DATA_FRAME_SECONDS or view != self.view or self.snapshot is None or snapshot is None:
            return False
        wait = self._drawn_at + self.DATA_FRAME_SECONDS - FRAME_SLACK_SECONDS - time.monotonic()
        if wait <= 0:
            return False
        if not self._catch_up_due:
            self._catch_up_due = True
            self.set_timer(wait + 2 * FRAME_SLACK_SECONDS, self._catch_up)
        return True

    def show_pending(self) -> None:
        """Show the data held back, at once (an export's screenshot is of the snapshot it saves)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._drawn_at = -math.inf
            self.show(*pending)

    def _catch_up(self) -> None:
        self._catch_up_due = False
        if self._pending is not None:
            self.show(*self._pending)

    def draws_the_same(self) -> bool:
        """Hook, after on_data: True when the content would come out as it is on screen, so that the
        panel is not redrawn (its titles and classes update themselves). Default: never known."""
        return False

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Textual measures an auto-height widget by rendering it at `width` before it has that
        # size; render() reads the width through `content_width` so measuring and drawing agree.
        self._measuring_width = width
        try:
            height = super().get_content_height(container, viewport, width)
        finally:
            self._measuring_width = None
        self._measured = (width, height)
        return height

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
        return self.crowded_by(self.snapshot)

    @staticmethod
    def crowded_by(snapshot: Snapshot | None) -> bool:
        return snapshot is not None and snapshot.get(Tiers) is not None

    def set_palette(self, palette: KvsetTheme) -> None:
        self.palette = palette
        self._shown_key = None
        self.on_data()
        self.refresh(layout=self.AUTO_HEIGHT)

    def on_data(self) -> None:
        """Hook: update titles or classes after new data arrived (rendering happens in render())."""
