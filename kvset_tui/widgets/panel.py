"""The shared behaviour of every panel: hold the shown snapshot and view, refresh only on change."""

from __future__ import annotations

import math
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Self

from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual, visualize

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


class RepaintOnChange:
    """A border title or subtitle that repaints its panel only when it changes.

    Textual repaints the whole widget on every assignment, and panels set their titles with each
    snapshot: that undid the repaint of only the changed lines."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.shown = f"_{name}_set"

    def __get__(self, panel: object, owner: type | None = None) -> Any:
        if panel is None:
            return self
        return self._textuals(panel).__get__(panel, type(panel))

    def __set__(self, panel: object, value: object) -> None:
        last = getattr(panel, self.shown, _NEVER)
        if type(last) is type(value) and last == value:
            return
        setattr(panel, self.shown, value)
        self._textuals(panel).__set__(panel, value)

    def _textuals(self, panel: object) -> Any:
        """Textual's own descriptor of the name: the next class after the mixin that has it."""
        mro = type(panel).__mro__
        for cls in mro[mro.index(SnapshotView) + 1 :]:
            if self.name in vars(cls):
                return vars(cls)[self.name]
        raise AttributeError(self.name)


_NEVER = object()


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
    border_title = RepaintOnChange()
    border_subtitle = RepaintOnChange()
    # The content's lines as last drawn, and what they were drawn for (see content_strips). A
    # whole repaint (Textual's, on a resize or a theme) starts a new drawing.
    _drawing = 0
    _strips_for: tuple[Hashable, ...] | None = None
    _strips: list[Strip] = []

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
        self._repaint_changed_lines()
        if (self.AUTO_HEIGHT if layout is None else layout) and self._height_changed():
            super().refresh(layout=True)  # the same lines, laid out anew
        return True

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if repaint and not regions:  # a whole repaint: the content is drawn anew
            self._drawing += 1
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def _repaint_changed_lines(self) -> None:
        """Draw the new content now and repaint only the lines that differ from those on screen.

        From one second to the next most of a panel's lines stay the same; a whole repaint sends
        every line through Textual's border, padding and colour passes and the compositor."""
        before, before_for = self._strips, self._strips_for
        self._drawing += 1
        if before_for is None or not self.is_mounted or not self.display:
            super().refresh()
            return
        after = self.content_strips()
        if self._strips_for is None or before_for[1:] != self._strips_for[1:]:
            super().refresh()  # another size, style, selection or breakpoint: every line moves
            return
        width = self.size.width
        for y in range(max(len(before), len(after))):
            if y >= len(before) or y >= len(after) or before[y] != after[y]:
                super().refresh(Region(0, y, width, 1))

    def content_strips(self, width: int | None = None) -> list[Strip]:
        """The content's lines at `width` (the panel's own by default), as many as it has: drawn
        once per drawing, width, style, selection and breakpoint, for the layout's measure and the
        paint alike."""
        width = self.size.width if width is None else width
        try:
            selection = self.text_selection
        except Exception:  # not on a screen yet
            selection = None
        # a panel whose height is not its content's (the curve) draws to its height; the screen's
        # breakpoints change what a panel includes, and come after the first data
        height = None if self.AUTO_HEIGHT else self.size.height
        key = (self._drawing, width, height, self.visual_style, selection, self.narrow, self.compact)
        if key != self._strips_for:
            self._measuring_width = width
            try:
                self._strips = self.draw_strips(width)
            finally:
                self._measuring_width = None
            self._strips_for = key
        return self._strips

    def draw_strips(self, width: int) -> list[Strip]:
        """The content drawn into lines, as Textual draws a widget's render() (of any height: a
        shorter panel shows the first lines)."""
        return Visual.to_strips(self, visualize(self, self.render()), width, None, self.visual_style)

    def render_line(self, y: int) -> Strip:
        """Textual's line API, served from the lines drawn for the current content."""
        strips = self.content_strips()
        if y < len(strips):
            return strips[y]
        return Strip.blank(self.size.width, self.visual_style.rich_style)

    def _height_changed(self) -> bool:
        """Whether the new content needs another height than it was last measured at (a layout pass
        of the whole screen then). Measuring draws the content, which the paint then reuses.

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
        # Textual measures an auto-height widget at `width` before it has that size; the lines
        # drawn for the measure are those the paint shows (render() reads `content_width`).
        height = len(self.content_strips(width)) if width else 0
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
