"""`e`: write what is on screen to disk: the snapshot as JSON and the screen as an SVG screenshot."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from kvset.snapshot import Snapshot


def _plain(value: Any) -> Any:
    """Dataclasses, numpy arrays and tuples as JSON values; nan and inf as null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fallback_snapshot_json(snapshot: Snapshot) -> dict:
    """Every field of the snapshot, as stored; used until the library's report schema is present."""
    return {"schema": "kvset-top/fallback-snapshot", **_plain(snapshot)}


def snapshot_json(snapshot: Snapshot) -> dict:
    """The snapshot's JSON: the library's schema (kvset.report) when available, else every field."""
    try:
        from kvset.report import snapshot_json as library_snapshot_json
    except ImportError:
        return fallback_snapshot_json(snapshot)
    return library_snapshot_json(snapshot)


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
