"""A byte-level scanner for the common hash-id line shapes, compiled with numba (nogil).

It reads Mooncake lines ({"timestamp", "input_length", "output_length", "hash_ids"}), Bailian
lines (also "chat_id", "parent_chat_id", "type", "turn") and RAGPulse-style lines with the ids
flattened into one "hash_ids" list (also "session_id"), straight from the bytes into arrays:
uint64 keys, per request the id count, input_length, raw timestamp and line number.

It takes only what it can read exactly as msgspec would: spaces as the only whitespace, plain
integers for input_length and the ids (in range), timestamps that parse exactly (the
Clinger fast path: at most 2^53 in the digits, a power of ten up to 10^22), strings without
escapes, each known field at most once. Any other line (unknown fields, escapes, tabs or CR,
numbers out of range or of another type, empty hash_ids, JSON errors...) stops the scan there,
and kvset.formats.byte_lines hands it to the msgspec path, which counts and explains it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Field names the scanner knows; the index is the field's bit in the "seen" mask.
FIELDS = (
    "timestamp",
    "input_length",
    "output_length",
    "hash_ids",
    "chat_id",
    "parent_chat_id",
    "type",
    "turn",
    "session_id",
)
F_TIMESTAMP, F_INPUT_LENGTH, F_HASH_IDS = 0, 1, 3
_NAMES = np.frombuffer("".join(FIELDS).encode(), dtype=np.uint8).copy()
_OFFSETS = np.cumsum([0] + [len(f) for f in FIELDS]).astype(np.int64)
_POW10 = np.array([10.0**k for k in range(23)])  # exact doubles: 10^0 .. 10^22

MAX_TOKENS = (1 << 31) - 1
MAX_EXACT = 1 << 53  # digits beyond this do not convert to a double exactly in one step
MAX_TIMESTAMP_SECONDS = 1e11

# why scan_lines stopped
END = 0  # the end of the buffer
FALLBACK = 1  # a line it cannot take begins at the returned position

_SPACE, _QUOTE, _COMMA, _COLON = 32, 34, 44, 58
_LBRACKET, _RBRACKET, _LBRACE, _RBRACE = 91, 93, 123, 125
_NEWLINE, _MINUS, _DOT, _BACKSLASH = 10, 45, 46, 92


@njit(inline="always")
def _spaces(buf, i, end):
    while i < end and buf[i] == _SPACE:
        i += 1
    return i


@njit(inline="always")
def _is_digit(c):
    return 48 <= c <= 57


@njit(inline="always")
def _field_of(buf, i, j):
    """Index in FIELDS of the name in buf[i:j], or -1."""
    n = j - i
    for f in range(_OFFSETS.shape[0] - 1):
        lo = _OFFSETS[f]
        if _OFFSETS[f + 1] - lo != n:
            continue
        same = True
        for k in range(n):
            if buf[i + k] != _NAMES[lo + k]:
                same = False
                break
        if same:
            return f
    return -1


@njit(inline="always")
def _uint(buf, i, end):
    """A JSON integer >= 0 that fits in 64 bits: (value, position after it), position -1 if not one."""
    if i >= end or not _is_digit(buf[i]):
        return np.uint64(0), -1
    if buf[i] == 48:  # "0" alone: JSON forbids leading zeros
        i += 1
        if i < end and (_is_digit(buf[i]) or buf[i] == _DOT or buf[i] == 101 or buf[i] == 69):
            return np.uint64(0), -1
        return np.uint64(0), i
    v = np.uint64(0)
    digits = 0
    while i < end and _is_digit(buf[i]):
        d = np.uint64(buf[i] - 48)
        digits += 1
        if digits > 20:
            return np.uint64(0), -1
        if digits == 20 and v > (np.uint64(0xFFFFFFFFFFFFFFFF) - d) // np.uint64(10):
            return np.uint64(0), -1  # above 2^64-1: the msgspec path rejects it
        v = v * np.uint64(10) + d
        i += 1
    if i < end and (buf[i] == _DOT or buf[i] == 101 or buf[i] == 69):
        return np.uint64(0), -1  # a float where an integer belongs
    return v, i


@njit(inline="always")
def _number(buf, i, end):
    """A JSON number read exactly as a double, or (nan, -1) if the fast path cannot."""
    neg = False
    if i < end and buf[i] == _MINUS:
        neg = True
        i += 1
    if i >= end or not _is_digit(buf[i]):
        return np.nan, -1
    m = np.int64(0)
    scale = 0  # power of ten to divide by
    if buf[i] == 48:
        i += 1
        if i < end and _is_digit(buf[i]):
            return np.nan, -1
    else:
        while i < end and _is_digit(buf[i]):
            m = m * 10 + (buf[i] - 48)
            if m > MAX_EXACT:
                return np.nan, -1
            i += 1
    if i < end and buf[i] == _DOT:
        i += 1
        if i >= end or not _is_digit(buf[i]):
            return np.nan, -1
        while i < end and _is_digit(buf[i]):
            m = m * 10 + (buf[i] - 48)
            if m > MAX_EXACT:
                return np.nan, -1
            scale += 1
            i += 1
    if i < end and (buf[i] == 101 or buf[i] == 69):  # e, E
        i += 1
        eneg = False
        if i < end and (buf[i] == 43 or buf[i] == _MINUS):
            eneg = buf[i] == _MINUS
            i += 1
        if i >= end or not _is_digit(buf[i]):
            return np.nan, -1
        e = 0
        while i < end and _is_digit(buf[i]):
            e = e * 10 + (buf[i] - 48)
            if e > 400:
                return np.nan, -1
            i += 1
        scale += e if eneg else -e
    if scale > 22 or scale < -22:
        return np.nan, -1
    v = np.float64(m)
    v = v / _POW10[scale] if scale >= 0 else v * _POW10[-scale]
    return (-v if neg else v), i


@njit(inline="always")
def _string(buf, i, end):
    """Position after a JSON string of printable ASCII without escapes, or -1."""
    if i >= end or buf[i] != _QUOTE:
        return -1
    i += 1
    while i < end:
        c = buf[i]
        if c == _QUOTE:
            return i + 1
        if c == _BACKSLASH or c < 32 or c > 126:
            return -1
        i += 1
    return -1


@njit(inline="always")
def _id_list(buf, i, end, keys, n):
    """The integers of a JSON list up to its "]" (at i: after "[" and spaces) into keys[n:]:
    (position after "]", new n), position -1 where the list is not one the scanner takes.
    The hot loop of the reader: one compare per digit, ", " taken without a call."""
    ten = np.uint64(10)
    while True:
        if i >= end:
            return -1, n
        d = np.uint64(buf[i]) - np.uint64(48)
        if d > 9:
            return -1, n
        v = d
        i += 1
        digits = 1
        while i < end:
            d = np.uint64(buf[i]) - np.uint64(48)
            if d > 9:
                break
            if digits == 19:  # a 20th digit: only up to 2^64 - 1 = 18446744073709551615
                if v > np.uint64(1844674407370955161) or (v == np.uint64(1844674407370955161) and d > 5):
                    return -1, n
            elif digits == 20:
                return -1, n
            v = v * ten + d
            digits += 1
            i += 1
        if digits > 1 and buf[i - digits] == 48:
            return -1, n  # a leading zero
        keys[n] = v
        n += 1
        if i >= end:
            return -1, n
        c = buf[i]
        if c == _COMMA:
            i += 1
            if i < end and buf[i] == _SPACE:
                i += 1
                if i < end and buf[i] == _SPACE:
                    i = _spaces(buf, i, end)
            continue
        if c == _RBRACKET:
            return i + 1, n
        if c == _SPACE:
            i = _spaces(buf, i, end)
            if i < end and buf[i] == _RBRACKET:
                return i + 1, n
            if i < end and buf[i] == _COMMA:
                i = _spaces(buf, i + 1, end)
                continue
        return -1, n


@njit(inline="always")
def _line_end(buf, i, end):
    while i < end and buf[i] != _NEWLINE:
        i += 1
    return i


@njit(nogil=True, cache=True)
def scan_lines(
    buf, pos, end, units, first_line, keys, n_keys, counts, input_lengths, stamps, line_numbers, n_req
):
    """Scan whole lines of buf[pos:end] until one it cannot take or the end.

    Appends to keys[n_keys:] and to the per-request arrays at n_req (the caller sizes them:
    a line of k ids holds at least 2k bytes, a request line at least 30). units: timestamp
    units per second, for the range check; first_line: the number of the line at pos. Returns (reason, position, lines passed, n_keys, n_req);
    with FALLBACK the position is the start of the line it could not take.
    """
    lines = 0
    while pos < end:
        line_start = pos
        if buf[pos] == _NEWLINE:  # blank line: carries nothing
            pos += 1
            lines += 1
            continue
        k0 = n_keys
        seen = 0
        stamp = np.nan
        input_length = 0
        ok = False
        i = _spaces(buf, pos, end)
        if i < end and buf[i] == _LBRACE:
            i = _spaces(buf, i + 1, end)
            while True:
                # a "name": value pair
                if i >= end or buf[i] != _QUOTE:
                    break
                j = i + 1
                while j < end and buf[j] != _QUOTE and buf[j] != _BACKSLASH and buf[j] != _NEWLINE:
                    j += 1
                if j >= end or buf[j] != _QUOTE:
                    break
                f = _field_of(buf, i + 1, j)
                if f < 0 or (seen >> f) & 1:
                    break
                seen |= 1 << f
                i = _spaces(buf, j + 1, end)
                if i >= end or buf[i] != _COLON:
                    break
                i = _spaces(buf, i + 1, end)
                if i >= end:
                    break
                if f == F_HASH_IDS:
                    if buf[i] != _LBRACKET:
                        break
                    i, n_keys = _id_list(buf, _spaces(buf, i + 1, end), end, keys, n_keys)
                    if i < 0:
                        break
                elif f == F_INPUT_LENGTH:
                    v, i = _uint(buf, i, end)
                    if i < 0 or v > np.uint64(MAX_TOKENS):
                        break
                    input_length = np.int64(v)
                elif f == F_TIMESTAMP:
                    if (
                        end - i >= 4
                        and buf[i] == 110
                        and buf[i + 1] == 117
                        and buf[i + 2] == 108
                        and buf[i + 3] == 108
                    ):
                        i += 4  # null: no timestamp
                    else:
                        stamp, i = _number(buf, i, end)
                        if i < 0 or not abs(stamp / units) <= MAX_TIMESTAMP_SECONDS:
                            break
                elif buf[i] == _QUOTE:
                    i = _string(buf, i, end)
                    if i < 0:
                        break
                else:
                    _, i = _number(buf, i, end)
                    if i < 0:
                        break
                i = _spaces(buf, i, end)
                if i < end and buf[i] == _COMMA:
                    i = _spaces(buf, i + 1, end)
                    continue
                if i < end and buf[i] == _RBRACE:
                    i = _spaces(buf, i + 1, end)
                    if i < end and buf[i] == 13 and i + 1 < end and buf[i + 1] == _NEWLINE:
                        i += 1  # CRLF
                    ok = i >= end or buf[i] == _NEWLINE
                break
        needed = (1 << F_INPUT_LENGTH) | (1 << F_HASH_IDS)
        if not ok or (seen & needed) != needed or n_keys == k0:
            return FALLBACK, line_start, lines, k0, n_req
        counts[n_req] = n_keys - k0
        input_lengths[n_req] = input_length
        stamps[n_req] = stamp
        line_numbers[n_req] = first_line + lines
        n_req += 1
        lines += 1
        pos = i + 1 if i < end else end
    return END, pos, lines, n_keys, n_req


@njit(nogil=True, cache=True)
def split_tokens_into(counts, input_lengths, block, tokens):
    """Tokens of each access: full blocks of `block`, the last one partial, none past input_length.

    The same split as kvset.formats.parsed_requests.split_tokens, without its temporaries.
    """
    j = 0
    for r in range(counts.shape[0]):
        left = np.int64(input_lengths[r])
        for _ in range(counts[r]):
            t = min(max(left, 0), block)
            tokens[j] = t
            left -= block
            j += 1


@njit(nogil=True, cache=True)
def count_mismatches(counts, input_lengths, block, floor):
    """Requests whose id count is not ceil(input_length / block) (floor: input_length // block)."""
    out = np.empty(counts.shape[0], dtype=np.int64)
    n = 0
    up = 0 if floor else block - 1
    for r in range(counts.shape[0]):
        if counts[r] != (input_lengths[r] + up) // block:
            out[n] = r
            n += 1
    return out[:n]


def line_end(buf: np.ndarray, pos: int, end: int) -> int:
    return int(_line_end_py(buf, pos, end))


@njit(nogil=True, cache=True)
def _line_end_py(buf, pos, end):
    return _line_end(buf, pos, end)
