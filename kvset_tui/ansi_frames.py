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
# A line of only SGR codes and plain text (what plotext draws): decoded here with each run of codes'
# effect on the style remembered; anything else (links, other escapes, a carriage return) by rich.
PLAIN_SGR_LINE = re.compile(r"(?:\x1b\[[0-9;]*m|[^\x1b\r])*")
SGR_RUNS = re.compile(r"((?:\x1b\[[0-9;]*m)+)")
MAX_REMEMBERED_STYLES = 4096

# A line's Text depends on the style the line before left open: (style at its start, line) -> its
# Text and the style at its end.
LineKey = tuple[Style, str]
Decoded = dict[LineKey, tuple[Text, Style]]


class AnsiFrames:
    """Decodes frames of ANSI text; keeps the last frame's lines (a frame's worth of memory)."""

    def __init__(self) -> None:
        self._lines: Decoded = {}
        self.decoded_lines = 0  # lines decoded so far (the rest were reused; tests read it)
        # (style before, a run of SGR codes) -> the style after, as rich's decoder makes it: a plot
        # has a handful of colours but hundreds of codes a frame, each a new Color in rich
        self._styles: dict[tuple[Style, str], Style] = {}

    def text(self, ansi: str) -> Text:
        """The frame as Text, as Text.from_ansi(ansi) gives it."""
        return NEWLINE.join(line for _, line in self.lines(ansi))

    def lines(self, ansi: str) -> list[tuple[LineKey, Text]]:
        """The frame's lines as Text, each with what it was decoded from: a line equal to one of the
        last frame's (same text, same style left open before it) is the very same Text and key."""
        decoder = AnsiDecoder()
        lines: Decoded = {}
        out = []
        for raw in LINE_END.split(ansi):
            key = (decoder.style, raw.rstrip("\n"))
            done = lines.get(key) or self._lines.get(key)
            if done is None:
                done = self._decode(decoder, *key)
                self.decoded_lines += 1
            lines[key] = done
            out.append((key, done[0]))
            decoder.style = done[1]
        self._lines = lines
        return out

    def _decode(self, decoder: AnsiDecoder, style: Style, line: str) -> tuple[Text, Style]:
        """One line as rich's decoder reads it from `style` on: (its Text, the style at its end)."""
        if PLAIN_SGR_LINE.fullmatch(line) is None:
            decoder.style = style
            return decoder.decode_line(line), decoder.style
        text = Text()
        for k, part in enumerate(SGR_RUNS.split(line)):
            if k % 2:  # a run of codes
                after = self._styles.get((style, part))
                if after is None:
                    if len(self._styles) > MAX_REMEMBERED_STYLES:  # a theme changed many times
                        self._styles.clear()
                    decoder.style = style
                    decoder.decode_line(part)
                    after = self._styles[(style, part)] = decoder.style
                style = after
            elif part:
                text.append(part, style or None)
        return text, style
