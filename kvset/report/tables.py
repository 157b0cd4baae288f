"""The rows of a hit-rate curve and of the working sets, as JSON-ready dicts and as plain-text tables.

`kvset analyze` and `kvset-top --once` build their tables here, so the two print the same columns
the same way. Capacities carry their unit: blocks, tokens and (with a model) GiB, binary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kvset.core.curve import KNEE_MIN_GAIN, HitRateCurve, TargetMode, Unit
from kvset.core.policy_gap import CapacityGap
from kvset.core.sampling_curve import ERROR_Z, working_set_bounds
from kvset.quantities import GIB, SHORT_DIGITS, format_gib, percent, plus_minus_points, points, target_label

NOT_KNOWN = "-"  # plain-text tables stay ASCII


def curve_rows(
    curve: HitRateCurve,
    capacities: Iterable[int],
    block_tokens: int | None,
    bytes_per_block: int | None = None,
    opt: HitRateCurve | None = None,
) -> list[dict]:
    """One row per capacity: its sizes and the curve's hit rates there; with `opt` (Belady MIN's curve
    of the same accesses) MIN's hit rates too."""
    caps = [int(c) for c in capacities]
    block_rates = curve.hit_rates(caps, "blocks")
    token_rates = curve.hit_rates(caps, "tokens")
    opt_rates = (opt.hit_rates(caps, "blocks"), opt.hit_rates(caps, "tokens")) if opt is not None else None
    # an estimate's error bound at each capacity, where the sample gives one
    block_errors = curve.hit_rate_stderrs(caps, "blocks")
    token_errors = curve.hit_rate_stderrs(caps, "tokens")
    rows = []
    for i, (c, br, tr) in enumerate(zip(caps, block_rates, token_rates, strict=True)):
        row = {
            "capacity_blocks": c,
            "capacity_tokens": c * block_tokens if block_tokens else None,
            "block_hit_rate": float(br),
            "token_hit_rate": float(tr),
        }
        if opt_rates is not None:
            row["opt_block_hit_rate"] = float(opt_rates[0][i])
            row["opt_token_hit_rate"] = float(opt_rates[1][i])
        if block_errors is not None and token_errors is not None:
            row["block_hit_rate_error"] = ERROR_Z * float(block_errors[i])
            row["token_hit_rate_error"] = ERROR_Z * float(token_errors[i])
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
    mode: TargetMode,
    block_tokens: int | None,
    bytes_per_block: int | None = None,
    unit: Unit = "blocks",
    opt_gaps: Sequence[CapacityGap] | None = None,
) -> list[dict]:
    """One row per target; with `opt_gaps` (kvset.core.policy_gap.capacity_gaps for the same targets)
    the capacity Belady MIN needs too."""
    rows = []
    for i, t in enumerate(targets):
        ws = curve.working_set(t, mode=mode, unit=unit)
        row = {
            "target": t,
            "mode": mode,
            "unit": unit,
            "capacity_blocks": ws,
            "capacity_tokens": ws * block_tokens if ws is not None and block_tokens else None,
            "reached": ws is not None,
        }
        if opt_gaps is not None:
            row["opt_capacity_blocks"] = opt_gaps[i].opt_blocks
        if curve.errors is not None:
            # the working sets of the curve ERROR_Z standard errors above and below the estimate
            row["capacity_blocks_low"], row["capacity_blocks_high"] = working_set_bounds(curve, t, mode, unit)
        if bytes_per_block:
            row["capacity_bytes"] = ws * bytes_per_block if ws is not None else None
            row["capacity_gib"] = ws * bytes_per_block / GIB if ws is not None else None
        rows.append(row)
    return rows


def snapshot_working_set_json(r) -> dict:
    """One of a snapshot's working-set rows (kvset.snapshot.WorkingSetRow) as JSON."""
    return {
        "target": r.target,
        "mode": r.mode,
        "window": r.window,
        "capacity_blocks": r.capacity_blocks,
        "capacity_tokens": r.capacity_tokens,
        "capacity_bytes": r.capacity_bytes,
        "reached": r.reached,
        "trend_blocks": list(r.trend_blocks),
        "fits_pool": r.fits_pool,
        "exact": r.exact,
        "opt_capacity_blocks": r.opt_capacity_blocks,
    }


def default_capacities(curve: HitRateCurve, n: int = 16, knee: int | None = None) -> np.ndarray:
    """The capacities every report's curve table shows: n log-spaced ones, plus the knee."""
    caps = curve.log_capacities(n)
    return caps if knee is None else np.union1d(caps, [knee])


def report_curve_rows(
    curve: HitRateCurve,
    block_tokens: int | None,
    bytes_per_block: int | None = None,
    knee: int | None = None,
    opt: HitRateCurve | None = None,
) -> list[dict]:
    """The curve rows every report shows of a curve (text, JSON and CSV alike): the default capacities
    with the knee among them; with `opt`, Belady MIN's hit rates beside LRU's."""
    if not curve.accesses:
        return []
    return curve_rows(curve, default_capacities(curve, knee=knee), block_tokens, bytes_per_block, opt)


KNEE_MEANING = (
    f"past it, doubling the capacity gains less than {points(KNEE_MIN_GAIN, 0).lstrip('+')} of block hit rate"
)


def knee_row(
    curve: HitRateCurve,
    block_tokens: int | None,
    bytes_per_block: int | None = None,
    opt: HitRateCurve | None = None,
) -> dict | None:
    """The curve's knee (HitRateCurve.knee) as a curve row with what it means, or None."""
    knee = curve.knee()
    if knee is None:
        return None
    row = curve_rows(curve, [knee], block_tokens, bytes_per_block, opt)[0]
    return {**row, "min_gain": KNEE_MIN_GAIN, "meaning": KNEE_MEANING}


def knee_line(knee: dict | None) -> str:
    """One line saying where the knee is, for the text reports."""
    if knee is None:
        return f"knee: none (no doubling of the capacity gains {points(KNEE_MIN_GAIN, 0).lstrip('+')})"
    gib = f", {gib_cell(knee['capacity_bytes'])}" if knee.get("capacity_bytes") is not None else ""
    return (
        f"knee at {knee['capacity_blocks']:,} blocks{gib} ({percent_cell(knee['block_hit_rate'])} block hit "
        f"rate): {knee['meaning']}"
    )


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """Plain monospace table; `align` is one of 'l'/'r' per column (default: first left, rest right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(
            c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align, strict=True)
        ).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]).rstrip()


def gib_cell(n_bytes: int | float | None) -> str:
    return format_gib(n_bytes, significant=SHORT_DIGITS) if n_bytes is not None else NOT_KNOWN


def percent_cell(x: float | None, digits: int = 2) -> str:
    return percent(x, digits, NOT_KNOWN)


def _count_cell(n: int | None) -> str:
    return f"{n:,}" if n else NOT_KNOWN


def curve_table(rows: Sequence[dict], with_gib: bool, knee: int | None = None) -> str:
    """The curve rows (from curve_rows) as a table: capacity in blocks, tokens, GiB; both hit rates
    (an estimate's with their error bounds; Belady MIN's beside them where the rows hold them); the row
    at the `knee` capacity marked."""
    errors = bool(rows) and "block_hit_rate_error" in rows[0]
    opt = bool(rows) and "opt_block_hit_rate" in rows[0]
    rates = ["block hit rate", "±", "token hit rate", "±"] if errors else ["block hit rate", "token hit rate"]
    rates += ["MIN block hit rate", "MIN token hit rate"] if opt else []
    headers = ["capacity (blocks)", "tokens"] + (["GiB"] if with_gib else []) + rates
    cells = []
    for row in rows:
        line = [f"{row['capacity_blocks']:,}", _count_cell(row["capacity_tokens"])]
        if with_gib:
            line.append(gib_cell(row.get("capacity_bytes")))
        for unit in ("block", "token"):
            line.append(percent_cell(row[f"{unit}_hit_rate"]))
            if errors:
                line.append(plus_minus_points(row[f"{unit}_hit_rate_error"], 2, NOT_KNOWN))
        if opt:
            line += [percent_cell(row["opt_block_hit_rate"]), percent_cell(row["opt_token_hit_rate"])]
        if knee is not None:
            line.append("<- knee" if row["capacity_blocks"] == knee else "")
        cells.append(line)
    return format_table(
        headers + ([""] if knee is not None else []),
        cells,
        None if knee is None else "l" + "r" * (len(headers) - 1) + "l",
    )


def working_set_table(
    rows: Sequence[dict],
    with_gib: bool,
    extra_headers: Sequence[str] = (),
    extra_cells: Sequence[Sequence[str]] = (),
) -> str:
    """Working-set rows (dicts with target, capacity_blocks, capacity_tokens, capacity_bytes) as a
    table; `extra_cells` holds, per row, the cells of the `extra_headers` columns after them."""
    ranges = bool(rows) and "capacity_blocks_low" in rows[0]
    headers = (
        ["target", "blocks", "tokens"]
        + (["GiB"] if with_gib else [])
        + (["range (blocks)"] if ranges else [])
        + list(extra_headers)
    )
    cells = []
    for i, row in enumerate(rows):
        if row["capacity_blocks"] is None:
            line = [target_label(row["target"]), "not reached", NOT_KNOWN] + ([NOT_KNOWN] if with_gib else [])
        elif row["capacity_blocks"] == 0:  # a coverage target of no hits at all: nothing is re-read
            line = [target_label(row["target"]), "0 (no re-references)", "0"] + (["0"] if with_gib else [])
        else:
            line = [
                target_label(row["target"]),
                f"{row['capacity_blocks']:,}",
                _count_cell(row["capacity_tokens"]),
            ]
            if with_gib:
                line.append(gib_cell(row.get("capacity_bytes")))
        if ranges:
            low, high = row["capacity_blocks_low"], row["capacity_blocks_high"]
            line.append(
                f"{'not reached' if low is None else f'{low:,}'} - {'not reached' if high is None else f'{high:,}'}"
            )
        cells.append(line + list(extra_cells[i] if extra_cells else ()))
    return format_table(headers, cells)
