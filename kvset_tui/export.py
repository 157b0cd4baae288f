"""`e`: write what is on screen to disk: the snapshot as JSON (kvset.report's schema, the same as
`--once --json`), the screen as an SVG screenshot, and the hit-rate curve as CSV (kvset.report's,
the same as `--once --csv`), for the all-time curve and the window on screen."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple

from kvset.api import Snapshot, curve_csv, snapshot_json


class ExportPaths(NamedTuple):
    json: Path
    svg: Path
    csv: Path


def export_names(snapshot: Snapshot, now: float) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"kvset-top-{stamp}-seq{snapshot.seq}"


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
    paths.csv.write_text(curve_csv(snapshot, ("all", window)), encoding="utf-8")
    return paths
