"""A snapshot as Prometheus metric families, and the collector that serves the latest one.

The monitor publishes each snapshot whole (an immutable value); `SnapshotCollector.publish` swaps a
reference (and wakes the textfile writer), so ingestion never waits for a scrape, and a scrape reads
one snapshot from start to end, never half of one and half of the next.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kvset.core.curve import HitRateCurve, Unit
from kvset.snapshot import Snapshot
from kvset.text import printable

UNITS: tuple[Unit, ...] = ("blocks", "tokens")


def label_value(text: object) -> str:
    """Input text (a source name, a rejection reason) as a label value: control and invisible format
    characters escaped by kvset.text.printable, so no byte of the input reaches the exposition raw
    (prometheus_client passes CR and ESC through; it escapes only backslashes, quotes and LF)."""
    return printable(text)


def target_label(target: float) -> str:
    """A target as a label: 0.95 -> "0.95" (the shortest text that reads back as the same number)."""
    return repr(float(target))


def stack_distance_edges(horizon: int) -> list[int]:
    """Bucket edges of the stack-distance histogram: 1, 2, 3, 4, 6, 8, 12, 16, ... (two a doubling) up
    to the horizon, which ends them. Fixed by the horizon alone, so engines analyzed with the same
    horizon have the same buckets and PromQL can sum them."""
    edges, power = [], 1
    while power <= horizon:
        edges.append(power)
        if power * 3 // 2 <= horizon and power >= 2:
            edges.append(power * 3 // 2)
        power *= 2
    if edges[-1] != horizon:
        edges.append(horizon)
    return edges


def _unique(names: Iterable[str]) -> list[str]:
    """Label values made unique (two sources of one name would be one series twice: a bad scrape)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return out


def _hit_rates(snap: Snapshot, capacities: Sequence[int]) -> Iterator[Metric]:
    hit = GaugeMetricFamily(
        "kvset_hit_rate",
        "LRU hit rate at a capacity (share of accesses or tokens); "
        "windowed curves are lower bounds between grid points",
        labels=["capacity_blocks", "unit", "window"],
    )
    attainable = GaugeMetricFamily(
        "kvset_attainable_hit_rate",
        "hit rate of an infinite cache inside the horizon",
        labels=["unit", "window"],
    )
    caps = sorted(
        {int(c) for c in capacities}
        | ({snap.engine_capacity_blocks} if snap.engine_capacity_blocks else set())
    )
    for window, curve in snap.curves.items():
        if not curve.accesses:
            continue
        for unit in UNITS:
            attainable.add_metric([unit, window], curve.attainable(unit))
            for cap, rate in zip(caps, curve.hit_rates(caps, unit), strict=True):
                hit.add_metric([str(cap), unit, window], float(rate))
    yield hit
    yield attainable


def _working_sets(snap: Snapshot) -> Iterator[Metric]:
    labels = ["target", "mode", "window"]
    blocks = GaugeMetricFamily(
        "kvset_working_set_blocks",
        "smallest LRU capacity reaching the target (absent while not reached inside the horizon)",
        labels=labels,
    )
    in_bytes = GaugeMetricFamily(
        "kvset_working_set_bytes", "the working set in full-attention KV bytes of the model", labels=labels
    )
    for row in snap.working_sets:
        if row.capacity_blocks is None:
            continue
        key = [target_label(row.target), row.mode, row.window]
        blocks.add_metric(key, row.capacity_blocks)
        if row.capacity_bytes is not None:
            in_bytes.add_metric(key, row.capacity_bytes)
    yield blocks
    if snap.bytes_per_block:
        yield in_bytes


def add_stack_distances(
    histogram: HistogramMetricFamily, labels: list[str], curve: HitRateCurve, horizon: int
) -> None:
    """The curve's stack distances as one histogram series: bucket le=C is hits(C), +Inf every access."""
    buckets = [(floatToGoString(c), curve.hits(c)) for c in stack_distance_edges(horizon)]
    buckets.append(("+Inf", curve.accesses))
    histogram.add_metric(labels, buckets, math.inf if curve.accesses > curve.attainable_hits() else 0.0)


def _stack_distances(curve: HitRateCurve, horizon: int) -> Metric:
    histogram = HistogramMetricFamily(
        "kvset_stack_distance_blocks",
        "LRU stack distances of all accesses (all time): bucket le=C counts the hits of a C-block cache, +Inf "
        "every access; first accesses have an infinite distance, so the sum is +Inf",
    )
    add_stack_distances(histogram, [], curve, horizon)
    return histogram


def _engine(snap: Snapshot) -> Iterator[Metric]:
    if snap.engine_capacity_blocks:
        yield GaugeMetricFamily(
            "kvset_engine_capacity_blocks",
            "the engine's KV pool, in the analyzed stream's blocks",
            value=snap.engine_capacity_blocks,
        )
    engine = snap.engine
    if engine is not None and engine.token_hit_rate is not None and not engine.stale:
        yield GaugeMetricFamily(
            "kvset_engine_token_hit_rate",
            "the prefix-cache token hit rate the engine measures",
            value=engine.token_hit_rate,
        )
    op = snap.operating_point
    if op is not None and op.comparable and op.predicted("all") is not None:
        yield GaugeMetricFamily(
            "kvset_predicted_token_hit_rate",
            "the predicted token hit rate at the engine's "
            "pool: the engine model's, else the all-time LRU curve's",
            value=op.predicted("all"),
        )


def _sources(snap: Snapshot) -> Iterator[Metric]:
    up = GaugeMetricFamily(
        "kvset_source_up", "1 while the source is connected and delivering", labels=["source"]
    )
    rejected = CounterMetricFamily(
        "kvset_rejected", "input refused, by source and reason", labels=["source", "reason"]
    )
    names = _unique(label_value(h.source) for h in snap.sources)
    for name, health in zip(names, snap.sources, strict=True):
        up.add_metric([name], 1.0 if health.connected else 0.0)
        by_reason: dict[str, int] = {}
        for r in health.rejected:
            reason = label_value(r.reason)
            by_reason[reason] = by_reason.get(reason, 0) + r.count
        for reason, n in by_reason.items():
            rejected.add_metric([name, reason], n)
    yield up
    yield rejected


def _tiers(snap: Snapshot) -> Iterator[Metric]:
    plan = snap.tiers
    if plan is None:
        return
    rate = GaugeMetricFamily(
        "kvset_tier_hit_rate",
        f"share of all accesses each cache tier serves ({plan.mode} tiers, all-time curve, blocks)",
        labels=["tier"],
    )
    size = GaugeMetricFamily("kvset_tier_capacity_blocks", "the size of each cache tier", labels=["tier"])
    for t in plan.tiers:
        rate.add_metric([str(t.index)], t.block_hit_rate)
        size.add_metric([str(t.index)], t.capacity_blocks)
    yield rate
    yield size


def _ranks(snap: Snapshot, capacities: Sequence[int]) -> Iterator[Metric]:
    """Each data-parallel rank's own cache (all time), under names of their own: a `rank` label on the
    merged stream's metrics would make every sum over them count each access twice."""
    if not snap.ranks:
        return
    accesses = CounterMetricFamily(
        "kvset_rank_accesses", "block accesses of each data-parallel rank", labels=["rank"]
    )
    ws = GaugeMetricFamily(
        "kvset_rank_working_set_blocks",
        "smallest LRU capacity reaching the target on the "
        "rank's own accesses (all time; absent while not reached)",
        labels=["rank", "target", "mode"],
    )
    ws_bytes = GaugeMetricFamily(
        "kvset_rank_working_set_bytes",
        "the rank's working set in full-attention KV bytes",
        labels=["rank", "target", "mode"],
    )
    hit = GaugeMetricFamily(
        "kvset_rank_hit_rate",
        "LRU hit rate of the rank's own accesses at a capacity (all time)",
        labels=["rank", "capacity_blocks", "unit"],
    )
    pool = GaugeMetricFamily(
        "kvset_rank_capacity_blocks", "each rank's own pool the pooling gain assumes", labels=["rank"]
    )
    distances = HistogramMetricFamily(
        "kvset_rank_stack_distance_blocks",
        "LRU stack distances of the rank's own accesses (all time), as kvset_stack_distance_blocks",
        labels=["rank"],
    )
    for view in snap.ranks:
        rank = str(view.rank)
        accesses.add_metric([rank], view.accesses)
        for row in view.working_sets:
            if row.capacity_blocks is not None:
                ws.add_metric([rank, target_label(row.target), row.mode], row.capacity_blocks)
                if row.capacity_bytes is not None:
                    ws_bytes.add_metric([rank, target_label(row.target), row.mode], row.capacity_bytes)
        caps = sorted({int(c) for c in capacities} | ({view.pool_blocks} if view.pool_blocks else set()))
        if view.accesses:
            for unit in UNITS:
                for cap, rate in zip(caps, view.curve.hit_rates(caps, unit), strict=True):
                    hit.add_metric([rank, str(cap), unit], float(rate))
        if view.pool_blocks is not None:
            pool.add_metric([rank], view.pool_blocks)
        add_stack_distances(distances, [rank], view.curve, snap.horizon)
    yield from (accesses, ws, hit, pool, distances)
    if snap.bytes_per_block:
        yield ws_bytes
    p = snap.pooling
    if p is None:
        return
    shared = GaugeMetricFamily(
        "kvset_pooling_shared_hit_rate",
        "hit rate of one shared LRU pool of the ranks' pools added up, on the merged stream (all time)",
        labels=["unit"],
    )
    separate = GaugeMetricFamily(
        "kvset_pooling_separate_hit_rate",
        "hit rate of the ranks each on its own pool, their hits added up over all accesses (all time)",
        labels=["unit"],
    )
    gain = GaugeMetricFamily(
        "kvset_pooling_gain", "shared minus separate hit rate at the same total capacity", labels=["unit"]
    )
    for unit in UNITS:
        shared.add_metric([unit], p.shared_hit_rate[unit])
        separate.add_metric([unit], p.separate_hit_rate[unit])
        gain.add_metric([unit], p.gain(unit))
    yield from (shared, separate, gain)
    yield GaugeMetricFamily(
        "kvset_pooling_capacity_blocks",
        "the shared pool the gain is computed at: the ranks' pools added up",
        value=p.capacity_blocks,
    )


def _sample(snap: Snapshot) -> Iterator[Metric]:
    """A sampled analyzer's sample: then every other kvset_ metric but kvset_accesses is an estimate."""
    if snap.sample is None:
        return
    yield GaugeMetricFamily(
        "kvset_sample_rate",
        "present when the numbers are estimates from a spatial sample of "
        "the blocks: the rate blocks past the request heads are kept at",
        value=snap.sample.rate,
    )
    yield GaugeMetricFamily(
        "kvset_sample_tracked_blocks", "blocks in the sample", value=snap.sample.tracked_blocks
    )


def snapshot_families(snap: Snapshot, capacities: Sequence[int] = ()) -> list[Metric]:
    """Every metric of one snapshot; `capacities`: where kvset_hit_rate is given besides the engine's pool."""
    t = snap.totals
    families: list[Metric] = [
        CounterMetricFamily("kvset_accesses", "block accesses analyzed", value=t.accesses),
        CounterMetricFamily(
            "kvset_first_time_blocks", "accesses to blocks never seen before", value=t.first_time
        ),
        CounterMetricFamily(
            "kvset_beyond_horizon", "re-references of blocks forgotten at the horizon", value=t.beyond_horizon
        ),
    ]
    families += _working_sets(snap)
    families += _hit_rates(snap, capacities)
    families.append(_stack_distances(snap.curve("all"), snap.horizon))
    families += _engine(snap)
    families += _sources(snap)
    families += _tiers(snap)
    families += _ranks(snap, capacities)
    families += _sample(snap)
    return families


class SnapshotCollector(Collector):
    """Serves the newest published snapshot. publish() may be called from any thread."""

    def __init__(self, capacities: Sequence[int] = ()) -> None:
        self.capacities = tuple(capacities)
        self._latest: Snapshot | None = None
        self._published = threading.Condition()

    def publish(self, snapshot: Snapshot) -> None:
        self._latest = snapshot  # one reference swap: a scrape holds the old one or the new one
        with self._published:
            self._published.notify_all()

    @property
    def latest(self) -> Snapshot | None:
        return self._latest

    def wait_for_newer(self, seq: int, timeout: float) -> Snapshot | None:
        """The latest snapshot once it is newer than `seq` (None when none came within `timeout`)."""
        with self._published:
            self._published.wait_for(lambda: self._latest is not None and self._latest.seq > seq, timeout)
        snap = self._latest
        return snap if snap is not None and snap.seq > seq else None

    def describe(self) -> list[Metric]:
        return []  # the families depend on the snapshot; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        snap = self._latest
        if snap is not None:
            yield from snapshot_families(snap, self.capacities)
