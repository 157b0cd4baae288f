"""The hit-rate curve as CSV: `kvset analyze --csv`, `kvset-top --once --csv` and the app's export.

One row per capacity, the same capacities as the text tables (kvset.figures.curve.default_capacities,
the knee included), hit rates as fractions, and a `knee` column that is 1 on the knee's row. Sizes
in bytes and GiB are filled with a model and empty without one. `estimate` is 1 on the rows of a
sampled analyzer's curve, with its error bounds (2 standard errors) where the sample gives them. A snapshot's CSV can hold several
windows, one after the other, named in the `window` column. `opt_block_hit_rate` and `opt_token_hit_rate`
are Belady MIN's hit rates at the row's capacity (`--opt`; all-time rows only), empty without it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from kvset.figures import principals
from kvset.figures.base import Json
from kvset.figures.curve import Curves, row_json
from kvset.snapshot import Snapshot
from kvset.text import printable

COLUMNS = (
    "window",
    "capacity_blocks",
    "capacity_tokens",
    "capacity_bytes",
    "capacity_gib",
    "block_hit_rate",
    "token_hit_rate",
    "knee",
    "estimate",
    "block_hit_rate_error",
    "token_hit_rate_error",
    "opt_block_hit_rate",
    "opt_token_hit_rate",
)


def curve_rows_csv(
    rows: Iterable[Json], knee: int | None, window: str = "all", header: bool = True, estimate: bool = False
) -> str:
    """Curve rows as the JSON has them (kvset.figures.curve.row_json) as CSV text, with a header line
    unless asked not to; `estimate`: the rows are a sampled analyzer's."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(COLUMNS)
    for row in rows:
        on_knee = int(knee is not None and row["capacity_blocks"] == knee)
        cells = {**row, "window": window, "knee": on_knee, "estimate": int(estimate)}
        writer.writerow(["" if cells.get(name) is None else cells[name] for name in COLUMNS])
    return out.getvalue()


def curve_csv(snapshot: Snapshot, windows: Iterable[str] = ("all",)) -> str:
    """A snapshot's curves as CSV: the all-time one by default, or each window named (once each)."""
    curves = snapshot.get(Curves)
    if curves is None:
        return curve_rows_csv((), None)
    parts = []
    sizes = snapshot.sizes
    for i, window in enumerate(dict.fromkeys(windows)):
        w = curves.window(window)
        knee = w.knee.capacity_blocks if w.knee is not None else None
        rows = [row_json(r, sizes) for r in w.rows]
        parts.append(curve_rows_csv(rows, knee, window, header=i == 0, estimate=w.curve.estimate))
    return "".join(parts)


PRINCIPAL_COLUMNS = (
    "by",
    "principal",
    "accesses",
    "hit_share",
    "cache_share",
    "holds_more_than_it_earns",
    "capacity_blocks",
    "block_hit_rate",
    "token_hit_rate",
    "isolated_block_hit_rate",
    "isolated_token_hit_rate",
)


def principals_csv(snapshot: Snapshot) -> str:
    """`kvset analyze --by LEVEL --csv`: one row per principal and capacity, its curve in the shared
    cache and alone (empty for (other)) beside its shares, read off the principals' JSON rows (the
    one serializer of them, kvset.figures.principals)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(PRINCIPAL_COLUMNS)
    result = snapshot.get(principals.Principals)
    rows = [] if result is None else principals.to_json(result, snapshot.sizes)["principals"]
    for p in rows:
        alone = {c["capacity_blocks"]: c for c in p["isolated_curve"] or ()}
        for c in p["curve"]:
            own = alone.get(c["capacity_blocks"], {})
            cells = {
                **c,
                "by": p["by"],
                "principal": printable(p["name"]),
                "accesses": p["accesses"],
                "hit_share": p["hit_share"],
                "cache_share": p["cache_share"],
                "holds_more_than_it_earns": int(p["holds_more_than_it_earns"]),
                "isolated_block_hit_rate": own.get("block_hit_rate"),
                "isolated_token_hit_rate": own.get("token_hit_rate"),
            }
            writer.writerow(["" if cells.get(name) is None else cells[name] for name in PRINCIPAL_COLUMNS])
    return out.getvalue()
