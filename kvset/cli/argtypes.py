"""argparse value types shared by every command: numbers that must be positive, speeds, dtypes.

A value a type refuses is a usage error: argparse prints it on one line and exits with code 2.
"""

from __future__ import annotations

import argparse

from kvset.geometry.dtypes import canonical_dtype
from kvset.geometry.errors import GeometryError
from kvset.quantities import MAX_COUNT, parse_bytes, parse_fractions


def _number(text: str, kind: type, what: str):
    try:
        value = kind(str(text).replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
    if kind is int and abs(value) > MAX_COUNT:  # it would overflow numpy's int64 further on
        raise argparse.ArgumentTypeError(f"too large: {text} (at most {MAX_COUNT:,})")
    return value


def positive_int(text: str) -> int:
    value = _number(text, int, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = _number(text, int, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def positive_float(text: str) -> float:
    value = _number(text, float, "a number")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


MAX_SECONDS = 366 * 86_400.0  # a duration, interval or timeout longer than a year is a typo


def seconds(text: str) -> float:
    """A positive duration in seconds, at most MAX_SECONDS (larger ones overflow the clocks' waits)."""
    value = positive_float(text)
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"at most {MAX_SECONDS:,.0f} s (a year), got {text}")
    return value


def sample_rate(text: str) -> float:
    """One fraction in (0, 1]: 0.01 or 1%."""
    try:
        values = parse_fractions(text, "sample rate")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"one sample rate, got {text!r}")
    from kvset.core.sampling_rates import rate_limit  # here: the parser loads no kernels

    try:
        rate_limit(values[0])  # the analyzer's own bounds, said before anything is read
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return values[0]


def speed(text: str) -> float | None:
    """Trace seconds per second; 'max' (or inf): as fast as possible (None). 0 is refused like any
    other speed that is not positive: it reads as "stopped", not as "as fast as possible"."""
    if text.lower() in ("max", "inf"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed must be a number or 'max', got {text!r}") from None
    if not value > 0:  # nan too
        raise argparse.ArgumentTypeError(f"speed must be positive (or 'max'), got {text}")
    return value


def byte_quantity(text: str) -> int:
    """A size in bytes: 16MiB, 1.5GiB, 80GB (decimal) or a bare count (kvset.quantities.parse_bytes)."""
    try:
        value = parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text}")
    return value


def dtype_name(text: str) -> str:
    try:
        return canonical_dtype(text)
    except GeometryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def listen_address(text: str) -> tuple[str, int]:
    """[HOST:]PORT -> (host, port); HOST defaults to 127.0.0.1, an IPv6 host goes in brackets ([::1]:9400)."""
    host, sep, port = str(text).strip().rpartition(":")
    if not sep:
        host = ""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise argparse.ArgumentTypeError(f"an IPv6 address goes in brackets, e.g. [::1]:9400, got {text!r}")
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not [HOST:]PORT: {text!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port must lie in 0..65535, got {port}")
    return host or "127.0.0.1", number
