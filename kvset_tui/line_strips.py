"""A plot's lines as Textual strips, each line made once while it stays the same from frame to frame.

Most of a plot's lines (the axes, the empty rows, a flat tail) come out the same in the next frame;
turning every line into a strip anew each frame was most of the UI's CPU.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from rich.text import Text
from textual.strip import Strip
from textual.style import Style
from textual.visual import Visual, visualize
from textual.widget import Widget


class LineStrips:
    """Keeps the last frame's strips by what each line shows; a frame's memory, no more."""

    def __init__(self) -> None:
        self._last: dict[Hashable, Strip] = {}
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
                strip = Visual.to_strips(widget, visualize(widget, text), width, 1, style)[0]
                self.made += 1
            self._last[key] = strip
            strips.append(strip.apply_offsets(0, y))  # where a selection finds it: its own row
        return strips
