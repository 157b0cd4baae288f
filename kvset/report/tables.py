"""The rows of a hit-rate curve and of the working sets, as JSON-ready dicts and as plain-text tables.

`kvset analyze` and `kvset-top --once` build their tables here, so the two print the same columns
the same way. Capacities carry their unit: blocks, tokens and (with a model) GiB, binary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kvset.core.curve import HitRateCurve
from kvset.quantities import GIB, SHORT_DIGITS, format_gib, percent, target_label

NOT_KNOWN = "-"  # plain-text tables stay ASCII


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


def gib_cell(n_bytes: int | float | None) -> str:
    return format_gib(n_bytes, significant=SHORT_DIGITS) if n_bytes is not None else NOT_KNOWN


def percent_cell(x: float | None, digits: int = 2) -> str:
    return percent(x, digits, NOT_KNOWN)


def _count_cell(n: int | None) -> str:
    return f"{n:,}" if n else NOT_KNOWN


def curve_table(rows: Sequence[dict], with_gib: bool) -> str:
    """The curve rows (from curve_rows) as a table: capacity in blocks, tokens, GiB; both hit rates."""
    headers = ["capacity (blocks)", "tokens"] + (["GiB"] if with_gib else []) + ["block hit rate", "token hit rate"]
    cells = []
    for row in rows:
        line = [f"{row['capacity_blocks']:,}", _count_cell(row["capacity_tokens"])]
        if with_gib:
            line.append(gib_cell(row.get("capacity_bytes")))
        line += [percent_cell(row["block_hit_rate"]), percent_cell(row["token_hit_rate"])]
        cells.append(line)
    return format_table(headers, cells)


def working_set_table(
    rows: Sequence[dict],
    with_gib: bool,
    extra_headers: Sequence[str] = (),
    extra_cells: Sequence[Sequence[str]] = (),
) -> str:
    """Working-set rows (dicts with target, capacity_blocks, capacity_tokens, capacity_bytes) as a
    table; `extra_cells` holds, per row, the cells of the `extra_headers` columns after them."""
    headers = ["target", "blocks", "tokens"] + (["GiB"] if with_gib else []) + list(extra_headers)
    cells = []
    for i, row in enumerate(rows):
        if row["capacity_blocks"] is None:
            line = [target_label(row["target"]), "not reached", NOT_KNOWN] + ([NOT_KNOWN] if with_gib else [])
        else:
            line = [target_label(row["target"]), f"{row['capacity_blocks']:,}", _count_cell(row["capacity_tokens"])]
            if with_gib:
                line.append(gib_cell(row.get("capacity_bytes")))
        cells.append(line + list(extra_cells[i] if extra_cells else ()))
    return format_table(headers, cells)
