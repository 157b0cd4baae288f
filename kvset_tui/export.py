"""`e`: write what is on screen to disk: the snapshot as JSON (kvset.report's schema, the same as
`--once --json`), the screen as an SVG screenshot, and the hit-rate curve as CSV.

The CSV holds the very rows of the JSON's curves (kvset.report's curve rows), for the all-time curve
and the window on screen, so a spreadsheet and a script read the same numbers."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path
from typing import NamedTuple

from kvset.report.as_json import snapshot_json
from kvset.snapshot import Snapshot

CSV_COLUMNS = ("window", "capacity_blocks", "capacity_tokens", "capacity_gib", "block_hit_rate", "token_hit_rate")


class ExportPaths(NamedTuple):
    json: Path
    svg: Path
    csv: Path


def export_names(snapshot: Snapshot, now: float) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"kvset-top-{stamp}-seq{snapshot.seq}"


def curve_csv(data: dict, window: str) -> str:
    """The curve rows of a snapshot's JSON (`data`) for the all-time curve and `window`, one CSV row
    each; a capacity the input cannot state (tokens without a block size, GiB without a model) is empty."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    labels = ["all"] + ([window] if window != "all" and window in data["windows"] else [])
    for label in labels:
        for row in data["windows"][label]["curve"]:
            writer.writerow([label, *("" if row.get(col) is None else row[col] for col in CSV_COLUMNS[1:])])
    return out.getvalue()


def export_snapshot(
    snapshot: Snapshot, screenshot_svg: str, directory: Path, now: float, window: str = "all"
) -> ExportPaths:
    """Write `<name>.json`, `<name>.svg` and `<name>.csv` into `directory` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / export_names(snapshot, now)
    paths = ExportPaths(base.with_suffix(".json"), base.with_suffix(".svg"), base.with_suffix(".csv"))
    data = snapshot_json(snapshot)
    paths.json.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    paths.svg.write_text(screenshot_svg, encoding="utf-8")
    paths.csv.write_text(curve_csv(data, window), encoding="utf-8")
    return paths
