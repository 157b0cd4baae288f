"""Every unit kvset prints or reads: bytes (binary units), GiB, percent, percentage points, counts,
axis numbers, durations, ages and hit-rate targets. The bottom floor: every layer may import it.

Operators buy memory in GiB and engines report pools in bytes; every number kvset shows goes
through one formatter here, so a figure never appears without its unit and one unit is never
rounded two ways.
"""

from __future__ import annotations

import math
import re

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
PIB = 1024**5

MISSING = "–"  # what a formatter shows for an unknown value (plain-text reports pass "-")
SHORT_DIGITS = 3  # significant digits of the short forms: panels and report table cells

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


def _is_nan(x: float) -> bool:
    return x != x  # a numpy nan too


def _digits(value: float, precision: int, significant: int | None) -> str:
    """`precision` decimals, or `significant` digits with no exponent and thousands grouped."""
    if significant is None:
        return f"{value:.{precision}f}"
    if abs(value) >= 10 ** (significant - 1):
        return f"{value:,.0f}"
    return f"{value:.{significant}g}"


# -- bytes -----------------------------------------------------------------------------------------
def format_bytes(n: int | float | None, precision: int = 1, *, significant: int | None = None) -> str:
    """Largest binary unit that keeps the value >= 1: 327680 -> "320.0 KiB", 512 -> "512 B".

    significant=3 gives the panels' short form instead: 327680 -> "320 KiB", 5 TiB -> "5 TiB".
    """
    if n is None:
        return MISSING
    if isinstance(n, float) and not math.isfinite(n):
        raise ValueError(f"cannot format a non-finite byte count: {n!r}")
    sign = "-" if n < 0 else ""
    size = abs(n)
    for unit, factor in _UNITS:
        if size >= factor:
            return f"{sign}{_digits(size / factor, precision, significant)} {unit}"
    if significant is not None:
        return f"{sign}{size:.0f} B"
    if isinstance(size, float) and not size.is_integer():
        return f"{sign}{size:.{precision}f} B"
    return f"{sign}{int(size)} B"


def format_gib(
    n: int | float | None, precision: int = 2, *, significant: int | None = None, with_unit: bool = True
) -> str:
    """Always in GiB, the unit capacities are bought in: 10737418240 -> "10.00 GiB".

    significant=3 (the capacity columns and panels): "80 GiB", "1.37 GiB", "1,536 GiB".
    with_unit=False leaves " GiB" off, for a column or an axis whose title carries it.
    """
    if n is None or _is_nan(n):
        return MISSING
    text = _digits(float(n) / GIB, precision, significant)
    return f"{text} GiB" if with_unit else text


def format_gpus(n: float | None, *, at_least: bool = False, with_unit: bool = True) -> str:
    """GPUs' worth of KV cache, 3 significant digits: 2.3125 -> "2.31 GPUs", 0.4 -> "0.4 GPUs";
    at_least: a lower bound ("≥2.31 GPUs"). with_unit=False for a column titled GPUs."""
    if n is None or _is_nan(n):
        return MISSING
    text = ("≥" if at_least else "") + _digits(float(n), 0, SHORT_DIGITS)
    return f"{text} {'GPU' if n == 1 else 'GPUs'}" if with_unit else text


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
    value = float(number) * factor
    if value > MAX_COUNT:  # infinity too
        raise ValueError(f"{text!r} is too large (at most {MAX_COUNT:,} bytes)")
    return int(round(value))


# -- hit rates and targets -------------------------------------------------------------------------
def percent(x: float | None, digits: int = 1, missing: str = MISSING) -> str:
    """A share as a percentage: 0.6234 -> "62.3 %"."""
    if x is None or _is_nan(x):
        return missing
    return f"{100.0 * x:.{digits}f} %"


def points(x: float | None, digits: int = 1, missing: str = MISSING) -> str:
    """A difference of two hit rates, in percentage points, with its sign: 0.041 -> "+4.1 pt"."""
    if x is None or _is_nan(x):
        return missing
    return f"{100.0 * x:+.{digits}f} pt"


def plus_minus_points(x: float | None, digits: int = 1, missing: str = MISSING) -> str:
    """An error bound on a hit rate, in percentage points: 0.0041 -> "±0.4 pt"."""
    if x is None or _is_nan(x):
        return missing
    return f"±{100.0 * x:.{digits}f} pt"


def times(x: float | None, digits: int = 2, missing: str = MISSING) -> str:
    """How many times one quantity is another: 2.125 -> "2.13x"."""
    if x is None or _is_nan(x):
        return missing
    return f"{x:.{digits}f}x"


def target_label(t: float, mode: str | None = None) -> str:
    """0.95 -> "95 %"; 0.999 -> "99.9 %"; with its mode: "99.9 % cov", "70 % abs"."""
    pct = f"{100.0 * t:.3f}".rstrip("0").rstrip(".")
    if mode is None:
        return f"{pct} %"
    return f"{pct} % {'cov' if mode == 'coverage' else 'abs'}"


def parse_fractions(text: str, what: str = "target") -> tuple[float, ...]:
    """'0.95,0.99' or '95%,99%' -> (0.95, 0.99); every value in (0, 1]."""
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = float(part[:-1]) / 100 if part.endswith("%") else float(part)
        except ValueError:
            raise ValueError(f"{what} {part!r} is not a number") from None
        if not 0 < value <= 1:
            hint = f": did you mean {part}%?" if 1 < value <= 100 and not part.endswith("%") else ""
            raise ValueError(f"{what} {part!r} must lie in (0, 1] (or (0 %, 100 %]){hint}")
        out.append(value)
    if not out:
        raise ValueError(f"no {what} given")
    return tuple(out)


def parse_fraction(text: str, flag: str, what: str = "share") -> float:
    """One value of parse_fractions: '0.4' or '40%' -> 0.4; a list is refused naming `flag`."""
    values = parse_fractions(text, f"{flag} {what}")
    if len(values) != 1:
        raise ValueError(f"{flag} takes one {what}, got {text!r}")
    return values[0]


# -- counts ----------------------------------------------------------------------------------------
def count(n: float | int | None) -> str:
    """1234 -> '1,234'; 12_345 -> '12.3k'; 1_234_567 -> '1.23M'. Compact enough for a table cell."""
    if n is None or _is_nan(n):
        return MISSING
    n = float(n)
    a = abs(n)
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if a >= limit:
            return f"{n / limit:.3g}{suffix}"
    if a >= 1e5:
        return f"{n / 1e3:.0f}k"
    if a >= 1e4:
        return f"{n / 1e3:.1f}k"
    if a >= 1000 or a == int(a):
        return f"{n:,.0f}"
    return f"{n:.3g}"


def compact(n: float) -> str:
    """An axis label: 1, 10, 100, 1k, 10k, 2.5M (no trailing zeros)."""
    a = abs(float(n))
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= limit:
            return f"{n / limit:.3g}{suffix}"
    return f"{n:.3g}"


def rate(per_second: float | None, what: str = "/s") -> str:
    """A count per second: 27_200 -> '27.2k/s'."""
    if per_second is None or _is_nan(per_second):
        return MISSING
    return f"{count(per_second)}{what}"


# The largest count or size any flag takes: numpy's int64 holds it with room for sums, so a huge
# number is a one-line error where it is read, not an overflow deep in the analysis.
MAX_COUNT = 2**62


def check_count(value: int, what: str) -> int:
    """`value` if it is at most MAX_COUNT, else a ValueError naming `what`."""
    if value > MAX_COUNT:
        raise ValueError(f"{what} is too large (at most {MAX_COUNT:,})")
    return value


def parse_capacities(text: str) -> tuple[int, ...]:
    """'1000,10_000,1e5' -> (1000, 10000, 100000): whole numbers of blocks, sorted, each at least 1."""
    out = []
    for part in str(text).split(","):
        part = part.strip().replace("_", "")
        if not part:
            continue
        try:
            value = int(float(part)) if "e" in part.lower() else int(part)
        except (ValueError, OverflowError):  # OverflowError: 1e400 reads as infinity
            raise ValueError(f"capacity {part!r} is not a whole number of blocks") from None
        if value < 1:
            raise ValueError(f"capacity {part!r} must be at least 1 block")
        out.append(check_count(value, f"capacity {part!r}"))
    if not out:
        raise ValueError("no capacity given")
    return tuple(sorted(set(out)))


_BARE_NUMBER = re.compile(r"^\s*[0-9_]+(?:\.[0-9]*)?(?:[eE][0-9]+)?\s*$")


def parse_sizes(text: str, what: str = "size") -> tuple[tuple[int, ...], str]:
    """A list of sizes in the order given, all in blocks or all in bytes: '1000,20000' ->
    ((1000, 20000), "blocks"); '80GiB,512GiB' -> ((85899345920, 549755813888), "bytes"). A bare number
    is a count of blocks (parse_capacities), one with a unit is bytes (parse_bytes)."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ValueError(f"no {what} given")
    units = {"blocks" if _BARE_NUMBER.match(p) else "bytes" for p in parts}
    if len(units) > 1:
        raise ValueError(
            f"give every {what} in blocks (1000) or every one in bytes (80GiB), not both: {text!r}"
        )
    unit = units.pop()
    if unit == "blocks":
        return tuple(parse_capacities(p)[0] for p in parts), unit
    values = tuple(parse_bytes(p) for p in parts)
    if any(v < 1 for v in values):
        raise ValueError(f"a {what} must be at least 1 byte: {text!r}")
    return values, unit


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """A count with its noun: 1 -> '1 line', 2 -> '2 lines', 12345 -> '12,345 lines'."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


# -- time ------------------------------------------------------------------------------------------
def age(seconds: float | None) -> str:
    """How long ago: '0.4 s', '94 s', '10 min', '3.0 h', '2.5 d'; 'never' for no data yet."""
    if seconds is None or _is_nan(seconds):
        return "never"
    s = max(0.0, seconds)
    if s < 10:
        return f"{s:.1f} s"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s // 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def duration(seconds: float | None) -> str:
    """A window's length: '30 s', '5 min', '1 h'; None is the all-time window."""
    if seconds is None:
        return "all time"
    s = float(seconds)
    if s < 60:
        return f"{s:g} s"
    if s < 3600:
        return f"{s / 60:g} min"
    return f"{s / 3600:g} h"
