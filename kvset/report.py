"""Turning curves into tables, text and JSON: shared by `kvset analyze`, `--once` and exports.

Every number carries its unit: capacities in blocks, tokens and (with a model) GiB, binary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kvset.curve import HitRateCurve

CAVEATS = (
    "LRU only: a policy with foresight (Belady MIN) needs at most these capacities.",
    "Full attention only: hybrid layers (sliding window, linear attention, SSM) are sized separately.",
    "Today's trace: the working set drifts as the workload changes.",
)

GIB = 1 << 30


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
            raise ValueError(f"{what} {part!r} must lie in (0, 1] (or (0 %, 100 %])")
        out.append(value)
    if not out:
        raise ValueError(f"no {what} given")
    return tuple(out)


def parse_capacities(text: str) -> tuple[int, ...]:
    out = []
    for part in str(text).split(","):
        part = part.strip().replace("_", "")
        if not part:
            continue
        try:
            value = int(float(part)) if "e" in part.lower() else int(part)
        except ValueError:
            raise ValueError(f"capacity {part!r} is not a whole number of blocks") from None
        if value < 1:
            raise ValueError(f"capacity {part!r} must be at least 1 block")
        out.append(value)
    if not out:
        raise ValueError("no capacity given")
    return tuple(sorted(set(out)))


def percent(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f} %"


def target_label(t: float) -> str:
    s = f"{100 * t:.3f}".rstrip("0").rstrip(".")
    return f"{s} %"


def gib(n_bytes: int | None) -> float | None:
    return None if n_bytes is None else n_bytes / GIB


def human_count(n: int | float | None) -> str:
    if n is None:
        return "-"
    return f"{int(n):,}"


def curve_rows(
    curve: HitRateCurve,
    capacities: Iterable[int],
    block_tokens: int | None,
    bytes_per_block: int | None = None,
) -> list[dict]:
    caps = [int(c) for c in capacities]
    block_rates = curve.hit_rates(caps, "blocks")
    token_rates = curve.hit_rates(caps, "tokens")
    rows = []
    for c, br, tr in zip(caps, block_rates, token_rates, strict=True):
        row = {
            "capacity_blocks": c,
            "capacity_tokens": c * block_tokens if block_tokens else None,
            "block_hit_rate": float(br),
            "token_hit_rate": float(tr),
        }
        if bytes_per_block:
            row["capacity_bytes"] = c * bytes_per_block
            row["capacity_gib"] = c * bytes_per_block / GIB
        if c > curve.horizon:
            row["beyond_horizon"] = True
        rows.append(row)
    return rows


def working_set_rows(
    curve: HitRateCurve,
    targets: Sequence[float],
    mode: str,
    block_tokens: int | None,
    bytes_per_block: int | None = None,
    unit: str = "blocks",
) -> list[dict]:
    rows = []
    for t in targets:
        ws = curve.working_set(t, mode=mode, unit=unit)
        row = {
            "target": t,
            "mode": mode,
            "unit": unit,
            "capacity_blocks": ws,
            "capacity_tokens": ws * block_tokens if ws is not None and block_tokens else None,
            "reached": ws is not None,
        }
        if bytes_per_block:
            row["capacity_bytes"] = ws * bytes_per_block if ws is not None else None
            row["capacity_gib"] = ws * bytes_per_block / GIB if ws is not None else None
        rows.append(row)
    return rows


def default_capacities(curve: HitRateCurve, n: int = 16) -> np.ndarray:
    return curve.log_capacities(n)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """Plain monospace table; `align` is one of 'l'/'r' per column (default: first left, rest right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align, strict=True))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]).rstrip()


def fmt_gib(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:,.0f} GiB"
    if x >= 1:
        return f"{x:.2f} GiB"
    return f"{x * 1024:.1f} MiB"
