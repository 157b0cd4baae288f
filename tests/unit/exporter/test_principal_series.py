"""The exporter's per-principal series (kvset_principal_*): one per reported principal up to the cap
(--principal-series), whatever the number of sessions in the stream; label values escaped and cut."""

from __future__ import annotations

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from kvset.core.analyzer import Analyzer
from kvset.core.principals import PrincipalCollector
from kvset.exporter.collector import snapshot_families
from kvset.figures.base import ANALYZE
from kvset.figures.principals import LABEL_CHARACTERS
from kvset.offline import InputSummary, analysis_snapshot, analyze_batches
from kvset.snapshot.builder import SnapshotConfig
from kvset.types import AccessBatch, PrincipalNames
from kvset.units import StreamUnits

UNITS = StreamUnits(16, "flag")
LOUD = "\x1b[31mtenant-" + "x" * 200  # a session named with an escape sequence, far too long


def sessions_snapshot(sessions: int, cap: int, window: int | None = None):
    """`--by session,tenant --principal-series cap` of a stream of `sessions` sessions, two turns
    each over a shared prompt; the loud session has the most accesses, so it is exported. With a
    window: the principals read as the live collector of the last `window` accesses reads them."""
    names = PrincipalNames()
    rng = np.random.default_rng(sessions)
    keys, starts, ids = [], [], []
    for _turn in range(2):
        for s in range(sessions):
            name = LOUD if s == 0 else f"s{s}"
            length = 6 if s == 0 else 2
            starts.append(len(keys))
            keys += [1, 2, *(int(k) for k in rng.integers(10, 10 + 4 * sessions, length))]
            ids += [[names.id(f"t{s % 3}"), names.id(name), 0]] * (length + 2)
    batch = AccessBatch(
        keys=np.asarray(keys, dtype=np.uint64),
        request_starts=np.asarray(starts),
        timestamps=np.linspace(0.0, 100.0, len(keys)),
        block_size=16,
        principals=np.asarray(ids, dtype=np.int32),
        principal_names=names,
    )
    result = analyze_batches(
        [batch], InputSummary("t", "t", UNITS), by=("session", "tenant"), top_principals=20
    )
    if window is not None:  # the same stream through a second analyzer: the same distances
        live = PrincipalCollector(("session", "tenant"), 20, window)
        live.feed(Analyzer(units=UNITS), batch)
        result.principals = live.streams(Analyzer(units=UNITS))
        result.principal_pool = live.pool_trace()
    return analysis_snapshot(result, SnapshotConfig(options={"principal_series": cap}, command=ANALYZE))


def principal_samples(snap):
    return {f.name: f.samples for f in snapshot_families(snap) if f.name.startswith("kvset_principal")}


def test_the_series_count_is_bounded_by_the_cap_not_by_the_sessions():
    counts = []
    for sessions in (100, 10_000):
        found = principal_samples(sessions_snapshot(sessions, cap=5))
        rates = found["kvset_principal_hit_rate"]
        # each level: its first 5 principals and (other); tenant has 3 principals only
        assert len([s for s in rates if s.labels["by"] == "session"]) == 6
        assert len([s for s in rates if s.labels["by"] == "tenant"]) == 3
        (capped,) = [s for s in found["kvset_principal_series_capped"] if s.labels["by"] == "session"]
        assert capped.value == 20 - 5  # the report's top 20, five of them exported
        counts.append(sum(len(v) for v in found.values()))
    assert counts[0] == counts[1]


def test_label_values_are_escaped_and_cut():
    snap = sessions_snapshot(200, cap=3)
    found = principal_samples(snap)
    names = {s.labels["principal"] for s in found["kvset_principal_cache_share"]}
    (loud,) = [n for n in names if "tenant-" in n]
    assert "\x1b" not in loud and loud.startswith("\\x1b[31mtenant-")
    assert len(loud) == LABEL_CHARACTERS and loud.endswith("...")
    shares = [s.value for s in found["kvset_principal_cache_share"] if s.labels["by"] == "tenant"]
    assert abs(sum(shares) - 1.0) < 1e-9  # every tenant exported: the shares of the whole pool

    class One(Collector):
        def collect(self):
            return snapshot_families(snap)

    registry = CollectorRegistry()
    registry.register(One())
    assert b"\x1b" not in generate_latest(registry)


def test_the_exporter_says_the_window_the_principals_figures_cover():
    whole = principal_samples(sessions_snapshot(300, cap=5))
    (covered,) = whole["kvset_principal_window_accesses"]
    (seconds,) = whole["kvset_principal_window_seconds"]
    assert covered.value == 2 * (299 * 4 + 8)  # a file read whole: all of its accesses
    found = principal_samples(sessions_snapshot(300, cap=5, window=500))
    (covered,) = found["kvset_principal_window_accesses"]
    (window_seconds,) = found["kvset_principal_window_seconds"]
    assert covered.value == 500 and 0 < window_seconds.value < seconds.value / 3
    assert len([s for s in found["kvset_principal_hit_rate"] if s.labels["by"] == "session"]) == 6
