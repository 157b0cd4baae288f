"""A plot's lines as Textual strips, each line made once while it stays the same from frame to frame.

Most of a plot's lines (the axes, the empty rows, a flat tail) come out the same in the next frame;
turning every line into a strip anew each frame was most of the UI's CPU. A changed line is cut
into segments here, one per run of one style, with each style converted to what Textual would paint
once per frame's few colours: sending the line through Textual's Content converted the style of
every run again.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.strip import Strip
from textual.style import Style
from textual.visual import Visual, visualize
from textual.widget import Widget

MAX_REMEMBERED_STYLES = 4096  # a plot has a handful of colours; a theme cycled many times, more


class LineStrips:
    """Keeps the last frame's strips by what each line shows; a frame's memory, no more."""

    def __init__(self) -> None:
        self._last: dict[Hashable, Strip] = {}
        # (a run's rich style, the widget's base style) -> the rich style Textual paints it with
        self._painted: dict[tuple[RichStyle | None, Style], RichStyle | None] = {}
        self.made = 0  # lines turned into strips so far (the rest were reused; tests read it)

    def frame(
        self, widget: Widget, lines: Iterable[tuple[Hashable, Text]], width: int, style: Style
    ) -> list[Strip]:
        """The strips of a frame's lines, given with a key that says what each line shows."""
        last, self._last = self._last, {}
        strips = []
        for y, (line_key, text) in enumerate(lines):
            key = (line_key, width, style)
            strip = last.get(key) or self._last.get(key)
            if strip is None:
                strip = self._strip(widget, text, width, style)
                self.made += 1
            self._last[key] = strip
            strips.append(strip.apply_offsets(0, y))  # where a selection finds it: its own row
        return strips

    def _strip(self, widget: Widget, text: Text, width: int, style: Style) -> Strip:
        """One line as Textual paints it: a segment per styled run and per unstyled gap."""
        plain = text.plain
        segments = []
        at = 0
        for span in sorted(text.spans, key=lambda s: s.start):
            if span.start > at:
                segments.append(Segment(plain[at : span.start], self._paint(widget, None, style)))
            rich = span.style if isinstance(span.style, RichStyle) else RichStyle.parse(span.style)
            segments.append(Segment(plain[span.start : span.end], self._paint(widget, rich, style)))
            at = max(at, span.end)
        if at < len(plain):
            segments.append(Segment(plain[at:], self._paint(widget, None, style)))
        strip = Strip(segments)
        return strip.crop(0, width) if strip.cell_length > width else strip

    def _paint(self, widget: Widget, rich: RichStyle | None, base: Style) -> RichStyle | None:
        """The rich style Textual paints a run of `rich` with on `base`, taken from Textual's own
        rendering of one such cell (so that a colour comes out exactly as Textual would draw it)."""
        key = (rich, base)
        if key not in self._painted:
            if len(self._painted) > MAX_REMEMBERED_STYLES:
                self._painted.clear()
            probe = Text(" ", style=rich) if rich is not None else Text(" ")
            strip = Visual.to_strips(widget, visualize(widget, probe), 1, 1, base)[0]
            self._painted[key] = next(iter(strip)).style
        return self._painted[key]
