"""Byte quantities in binary units (KiB = 1024 B), formatted with their unit always written out.

Operators buy memory in GiB and engines report pools in bytes; every number kvset prints goes
through here so a figure is never shown without its unit.
"""

from __future__ import annotations

import math
import re

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
PIB = 1024**5

_UNITS: tuple[tuple[str, int], ...] = (("PiB", PIB), ("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB))

# Accepted suffixes for parse_bytes. Decimal SI suffixes are accepted too (people write "80GB" for an
# 80 GB card), and mean what they say: 10**9, not 2**30.
_SUFFIX_FACTORS: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": KIB,
    "kib": KIB,
    "m": MIB,
    "mib": MIB,
    "g": GIB,
    "gib": GIB,
    "t": TIB,
    "tib": TIB,
    "p": PIB,
    "pib": PIB,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")


def format_bytes(n: int | float, precision: int = 1) -> str:
    """Largest binary unit that keeps the value >= 1: 327680 -> "320.0 KiB", 512 -> "512 B"."""
    if isinstance(n, float) and not math.isfinite(n):
        raise ValueError(f"cannot format a non-finite byte count: {n!r}")
    sign = "-" if n < 0 else ""
    size = abs(n)
    for unit, factor in _UNITS:
        if size >= factor:
            return f"{sign}{size / factor:.{precision}f} {unit}"
    if isinstance(size, float) and not size.is_integer():
        return f"{sign}{size:.{precision}f} B"
    return f"{sign}{int(size)} B"


def format_gib(n: int | float, precision: int = 2) -> str:
    """Always in GiB, the unit capacities are bought in: 10737418240 -> "10.00 GiB"."""
    return f"{n / GIB:.{precision}f} GiB"


def parse_bytes(text: str) -> int:
    """Read "1.5GiB", "512 MiB", "80GB" (decimal) or a bare byte count; raises ValueError otherwise."""
    match = _QUANTITY.match(str(text))
    if not match:
        raise ValueError(f"not a byte quantity: {text!r} (examples: 4096, 512MiB, 1.5GiB, 80GB)")
    number, suffix = match.groups()
    factor = _SUFFIX_FACTORS.get(suffix.lower())
    if factor is None:
        raise ValueError(
            f"unknown byte unit {suffix!r} in {text!r} (use B, KiB, MiB, GiB, TiB or KB, MB, GB, TB)"
        )
    return int(round(float(number) * factor))
