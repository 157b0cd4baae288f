"""Sparklines: a series as block characters, and the direction the eye reads in them (the one purely
visual number form; every unit formatter lives in kvset.quantities)."""

from __future__ import annotations

import math
from collections.abc import Iterable

SPARK_BARS = "▁▂▃▄▅▆▇█"
UP, DOWN, FLAT = "↑", "↓", "→"


def spark_levels(values: Iterable[float], width: int, low: float | None = 0.0) -> list[int | None]:
    """The bar (0..7) each of the last `width` values is drawn as, scaled from `low` (None: their
    minimum) to their maximum; None for a gap (nan)."""
    if width <= 0:
        return []
    vals = [float(v) for v in values][-width:]
    finite = [v for v in vals if not math.isnan(v)]
    if not finite:
        return [None] * len(vals)
    hi = max(finite)
    lo = min(finite) if low is None else min(low, min(finite))
    span = hi - lo
    top = len(SPARK_BARS) - 1
    out: list[int | None] = []
    for v in vals:
        if math.isnan(v):
            out.append(None)
        elif span <= 0:
            out.append(len(SPARK_BARS) // 2 if hi > 0 else 0)
        else:
            out.append(min(top, int((v - lo) / span * len(SPARK_BARS))))
    return out


def sparkline(values: Iterable[float], width: int, low: float | None = 0.0) -> str:
    """The last `width` values as block characters (spark_levels); gaps as spaces."""
    return "".join(" " if b is None else SPARK_BARS[b] for b in spark_levels(values, width, low))


def trend_arrow(values: Iterable[float], width: int, low: float | None = 0.0) -> str | None:
    """The direction of what the sparkline of the same arguments draws: its last step where the last two
    bars differ, else from its first bar to its last; None with fewer than two bars drawn."""
    bars = [b for b in spark_levels(values, width, low) if b is not None]
    if len(bars) < 2:
        return None
    before = bars[-2] if bars[-2] != bars[-1] else bars[0]
    return UP if bars[-1] > before else DOWN if bars[-1] < before else FLAT
