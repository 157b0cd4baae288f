"""The one JSON object kvset prints of a snapshot: `kvset analyze --json`, `kvset-top --once --json` and
the app's `e` export alike. A header (what was read and how, the totals, the sources) and then every
figure's keys (kvset.figures: each figure writes its own), null where a figure does not apply. The
keys are documented in the README's "JSON" section; change them there too."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kvset.core import ERROR_Z
from kvset.figures import FIGURES
from kvset.figures.base import Json
from kvset.rejects import Rejection
from kvset.report.caveats import caveat_lines
from kvset.snapshot import Snapshot
from kvset.text import printable

if TYPE_CHECKING:  # the reports are imported by kvset-top's command line before it reads anything
    from kvset.core.curve import SampleInfo


def _rejections(items: Iterable[Rejection]) -> list[Json]:
    return [{"reason": r.reason, "count": r.count, "examples": list(r.examples)} for r in items]


def estimate_json(info: SampleInfo | None) -> Json | None:
    """What a sampled analysis sampled (None: every block was analyzed, the numbers are measured)."""
    if info is None:
        return None
    from kvset.core.sampling import (  # the sampled analyzer (numba): loaded when one sampled
        METHOD,
        PLAIN_METHOD,
    )

    return {
        "method": METHOD if info.head_boost else PLAIN_METHOD,
        "sample_rate": info.rate,
        "sample_size": info.size,
        "seed": info.seed,
        "tracked_blocks": info.tracked_blocks,
        "tracked_accesses": info.tracked_accesses,
        "tracked_share": info.tracked_share,
        "head_boost": info.head_boost,  # False: block positions vary, plain spatial sample
        "positions_moved_share": info.moved_share,
        "meaningful": info.meaningful,  # False: fewer than MIN_SAMPLE_BLOCKS blocks, and no interval
        "error_bound": f"{ERROR_Z:g} standard errors (about 95 %) from the spread of the sample's random groups"
        if info.meaningful
        else None,
    }


def _source_json(h: Any) -> Json:
    return {
        "source": h.source,
        "kind": h.kind,
        "connected": h.connected,
        "state": h.state,
        "retry_in_s": h.retry_in,
        "last_data_at": h.last_data_at,
        "received": h.received,
        "accesses": h.accesses,
        "rejected": h.rejected_total,
        "rejections": _rejections(h.rejected),
        "notes": list(h.notes),
        "finished": h.finished,
        "details": dict(h.details),
    }


def header_json(s: Snapshot) -> Json:
    """What every snapshot says before its figures: what was read and how, the totals, the sources."""
    read = s.input
    t = s.totals
    return {
        "seq": s.seq,
        "taken_at": s.taken_at,
        "data_time": s.data_time,
        "demo": s.demo,
        "input": printable(read.name)
        if read is not None
        else None,  # a file name can hold control characters
        "format": printable(read.format) if read is not None else None,
        "block_tokens": s.block_tokens,
        "units": dataclasses.asdict(s.units) if s.units is not None else None,
        "bytes_per_block": s.bytes_per_block,
        "order": s.order,
        "horizon": s.horizon,
        "horizon_reached": s.horizon_reached,
        "curve_scope": s.curve_scope,
        "estimate": estimate_json(s.sample),
        "requests": t.requests,
        "accesses": t.accesses,
        "tokens": t.tokens,
        "distinct_blocks": t.first_time,
        "rereferences": t.rereferences,
        "beyond_horizon": t.beyond_horizon,
        "misses_split_exact": t.misses_split_exact,  # false: distinct_blocks at most, beyond_horizon at least
        "tracked_blocks": t.tracked_blocks,
        "late_accesses": t.late_accesses,
        "accesses_per_second": s.accesses_per_second,
        "targets": {mode: list(targets) for mode, targets in s.targets.by_mode.items()},
        "main_mode": s.main_mode,
        "sources": [_source_json(h) for h in s.sources],
        "rejected_total": s.rejected_total,
        "rejections": _rejections(
            read.rejected if read is not None else (r for h in s.sources for r in h.rejected)
        ),
        "warnings": _rejections(read.warnings) if read is not None else [],
        "notes": [printable(n) for n in read.notes] if read is not None else [],
        "events": [{"at": e.at, "kind": e.kind, "text": e.text} for e in s.events],
        "seconds": {"read": round(read.read_seconds, 4), "analyze": round(read.analyze_seconds, 4)}
        if read is not None
        else None,
    }


def snapshot_json(snapshot: Snapshot) -> Json:
    """A JSON-ready dict of everything a snapshot holds: its header, then each figure's keys."""
    out = header_json(snapshot)
    sizes = snapshot.sizes
    for figure in FIGURES:
        part = figure.json_of(snapshot.get(figure.result), sizes)
        clash = out.keys() & part.keys()
        if clash:
            raise AssertionError(f"figure {figure.name} writes keys the report has already: {sorted(clash)}")
        out.update(part)
    out["caveats"] = caveat_lines()
    return out
