"""Sparklines: a series as block characters, the one purely visual number form (every unit
formatter lives in kvset.quantities)."""

from __future__ import annotations

import math

SPARK_BARS = "▁▂▃▄▅▆▇█"


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
