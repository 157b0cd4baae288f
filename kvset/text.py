"""Text that came from input, made safe to show: the bottom floor, every layer may import it.

Log lines, /metrics bodies and labels, KV-event strings and trace lines can carry bytes a terminal
acts on: ESC starts a control sequence (CSI colours, OSC window titles and hyperlinks), BEL rings,
CR and LF break a status line, C1 bytes (U+0080..U+009F) are CSI/OSC on some terminals, and
bidirectional overrides reorder what is shown. `printable` writes each such character as a visible
escape (``\\x1b``, ``\\n``, ``\\u202e``), so the text still says what arrived and can do nothing.
The contract types (kvset.types, kvset.rejects) pass their text fields through it when they are
built, so no view ever receives a raw control character.
"""

from __future__ import annotations

import re

# C0 controls (tab, CR and LF included), DEL, C1 controls, and the invisible format characters
# that reorder or hide text (bidi embeddings, overrides and isolates, zero-width marks), plus lone
# surrogates (bytes decoded with errors="surrogateescape"), the line and paragraph separators and
# the byte-order mark.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object) -> str:
    """`text` with every control or invisible format character written as a visible escape.

    Already printable text comes back unchanged (and escaping twice changes nothing more), so it is
    cheap to call on every string a view may show.
    """
    s = text if isinstance(text, str) else str(text)
    if _UNSAFE.search(s) is None:
        return s
    return _UNSAFE.sub(_escape, s)
