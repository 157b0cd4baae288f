"""`e`: write what is on screen to disk: the snapshot as JSON (kvset.report's schema, the same as
`--once --json`) and the screen as an SVG screenshot."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kvset.report.as_json import snapshot_json
from kvset.snapshot import Snapshot


def export_names(snapshot: Snapshot, now: float) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"kvset-top-{stamp}-seq{snapshot.seq}"


def export_snapshot(snapshot: Snapshot, screenshot_svg: str, directory: Path, now: float) -> tuple[Path, Path]:
    """Write `<name>.json` and `<name>.svg` into `directory` (created if missing); return both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / export_names(snapshot, now)
    json_path = base.with_suffix(".json")
    svg_path = base.with_suffix(".svg")
    json_path.write_text(json.dumps(snapshot_json(snapshot), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    svg_path.write_text(screenshot_svg, encoding="utf-8")
    return json_path, svg_path
