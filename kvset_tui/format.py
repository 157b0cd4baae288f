"""Number formatting for the panels: every number leaves here with its unit."""

from __future__ import annotations

import math

GIB = 1 << 30
SPARK_BARS = "▁▂▃▄▅▆▇█"


def count(n: float | int | None) -> str:
    """1234 -> '1,234'; 1_234_567 -> '1.23M'. Compact enough for a table cell."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "–"
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
    if per_second is None or math.isnan(per_second):
        return "–"
    return f"{count(per_second)}{what}"


def binary_bytes(n: float | int | None) -> str:
    """Bytes with a binary unit: '512 MiB', '80.0 GiB', '1.21 TiB'."""
    if n is None:
        return "–"
    n = float(n)
    for shift, unit in ((50, "PiB"), (40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if abs(n) >= (1 << shift):
            v = n / (1 << shift)
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"


def gib(n_bytes: float | int | None) -> str:
    """Bytes as GiB with three significant digits (the unit the `u` key selects)."""
    if n_bytes is None:
        return "–"
    v = float(n_bytes) / GIB
    if v >= 100:
        return f"{v:,.0f} GiB"
    return f"{v:.3g} GiB"


def percent(x: float | None, digits: int = 1) -> str:
    if x is None or math.isnan(x):
        return "–"
    return f"{100.0 * x:.{digits}f} %"


def points(x: float | None) -> str:
    """A difference of two hit rates, in percentage points, with its sign."""
    if x is None or math.isnan(x):
        return "–"
    return f"{100.0 * x:+.1f} pt"


def target(t: float, mode: str) -> str:
    """0.95 coverage -> '95 % cov'; 0.999 -> '99.9 % cov'; absolute -> '70 % abs'."""
    pct = f"{100.0 * t:.3f}".rstrip("0").rstrip(".")
    return f"{pct} % {'cov' if mode == 'coverage' else 'abs'}"


def age(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
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
    if seconds is None:
        return "all time"
    s = float(seconds)
    if s < 60:
        return f"{s:g} s"
    if s < 3600:
        return f"{s / 60:g} min"
    return f"{s / 3600:g} h"


def sparkline(values, width: int, low: float | None = 0.0) -> str:
    """The last `width` values as block characters scaled from `low` (None: their minimum) to their
    maximum; gaps (nan) as spaces."""
    if width <= 0:
        return ""
    vals = [float(v) for v in values][-width:]
    finite = [v for v in vals if not math.isnan(v)]
    if not finite:
        return " " * len(vals)
    hi = max(finite)
    lo = min(finite) if low is None else min(low, min(finite))
    span = hi - lo
    out = []
    for v in vals:
        if math.isnan(v):
            out.append(" ")
        elif span <= 0:
            out.append(SPARK_BARS[len(SPARK_BARS) // 2] if hi > 0 else SPARK_BARS[0])
        else:
            out.append(SPARK_BARS[min(len(SPARK_BARS) - 1, int((v - lo) / span * len(SPARK_BARS)))])
    return "".join(out)
