"""A plot drawn as ANSI text, read into rich Text a line at a time, reusing the lines of the last frame.

From one second to the next most of a plot's lines (the axes, the empty rows, a flat tail) are the
same: decoding only the lines that changed saves most of the decode, which is about as costly as
drawing the plot itself.
"""

from __future__ import annotations

import re

from rich.ansi import AnsiDecoder
from rich.style import Style
from rich.text import Text

NEWLINE = Text("\n")
LINE_END = re.compile(r"(?<=\n)")  # where rich's decoder splits a frame into lines

# A line's Text depends on the style the line before left open: (style at its start, line) -> its
# Text and the style at its end.
Decoded = dict[tuple[Style, str], tuple[Text, Style]]


class AnsiFrames:
    """Decodes frames of ANSI text; keeps the last frame's lines (a frame's worth of memory)."""

    def __init__(self) -> None:
        self._lines: Decoded = {}
        self.decoded_lines = 0  # lines decoded so far (the rest were reused; tests read it)

    def text(self, ansi: str) -> Text:
        """The frame as Text, as Text.from_ansi(ansi) gives it."""
        decoder = AnsiDecoder()
        lines: Decoded = {}
        out = []
        for raw in LINE_END.split(ansi):
            key = (decoder.style, raw.rstrip("\n"))
            done = lines.get(key) or self._lines.get(key)
            if done is None:
                decoder.style = key[0]
                done = (decoder.decode_line(key[1]), decoder.style)
                self.decoded_lines += 1
            lines[key] = done
            out.append(done[0])
            decoder.style = done[1]
        self._lines = lines
        return NEWLINE.join(out)
