"""The hit-rate curve as CSV: `kvset analyze --csv` and `kvset-top --once --csv`.

One row per capacity, the same capacities as the text tables (kvset.report.tables.default_capacities,
the knee included), hit rates as fractions, and a `knee` column that is 1 on the knee's row. Sizes
in bytes and GiB are filled with a model and empty without one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from kvset.report.tables import curve_rows, default_capacities

COLUMNS = ("capacity_blocks", "capacity_tokens", "capacity_bytes", "capacity_gib", "block_hit_rate",
           "token_hit_rate", "knee")  # fmt: skip


def curve_rows_csv(rows: Iterable[dict], knee: int | None) -> str:
    """Curve rows (kvset.report.tables.curve_rows) as CSV text with a header line."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        cells = {**row, "knee": int(knee is not None and row["capacity_blocks"] == knee)}
        writer.writerow(["" if cells.get(name) is None else cells[name] for name in COLUMNS])
    return out.getvalue()


def curve_csv(snapshot, window: str = "all") -> str:
    """A snapshot's curve (all time by default) as CSV."""
    c = snapshot.curve(window)
    if not c.accesses:
        return curve_rows_csv([], None)
    knee = c.knee()
    caps = default_capacities(c, knee=knee)
    return curve_rows_csv(curve_rows(c, caps, snapshot.block_tokens, snapshot.bytes_per_block), knee)
