"""A snapshot as Prometheus metric families, and the collector that serves the latest one.

Each figure gives its own metrics as plain data (kvset.figures: MetricFamily); this module adds the
snapshot header's (counters, source health, the sample) and makes prometheus_client's families of them.
The monitor publishes each snapshot whole (an immutable value); `SnapshotCollector.publish` swaps a
reference (and wakes the textfile writer), so ingestion never waits for a scrape, and a scrape reads
one snapshot from start to end, never half of one and half of the next.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kvset.figures import FIGURES
from kvset.figures.base import MetricFamily, MetricSample, MetricsView, gauge
from kvset.figures.curve import stack_distance_edges
from kvset.snapshot import Snapshot
from kvset.text import printable
from kvset.types import SourceHealth

__all__ = ["SnapshotCollector", "label_value", "snapshot_families", "stack_distance_edges"]


def label_value(text: object) -> str:
    """Input text (a source name, a rejection reason) as a label value: control and invisible format
    characters escaped by kvset.text.printable, so no byte of the input reaches the exposition raw
    (prometheus_client passes CR and ESC through; it escapes only backslashes, quotes and LF)."""
    return printable(text)


def _unique(names: Iterable[str]) -> list[str]:
    """Label values made unique (two sources of one name would be one series twice: a bad scrape)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return out


# The counts of SourceHealth.counts exported per source, each as (count, metric, type, help); a
# source that does not count one has no series of it.
SOURCE_COUNTS = (
    (
        "batches_lost",
        "kvset_batches_lost",
        "counter",
        "KV event batches lost in sequence gaps (not recovered)",
    ),
    ("sequence_gaps", "kvset_sequence_gaps", "counter", "gaps in the KV event sequence numbers"),
    (
        "batches_shed",
        "kvset_batches_shed",
        "counter",
        "KV event batches dropped undecoded because kvset could not keep up with the publisher",
    ),
    ("backlog_batches", "kvset_backlog_batches", "gauge", "batches received and not analysed yet"),
    ("backlog_accesses", "kvset_backlog_accesses", "gauge", "block accesses received and not analysed yet"),
)


def source_families(sources: Sequence[SourceHealth]) -> list[MetricFamily]:
    """Each source's health, refused input and counts, labelled by `kind` and `address` (where it reads:
    stable whatever the flags' wording) and rejections by `code` (kvset.rejects.REASON_CODES, a fixed
    set). The reasons in words are in kvset_rejection_reason_info: one series per source and code (the
    most frequent reason of that code), so their number is bounded however the reasons vary."""
    pairs = list(zip(_unique(label_value(h.address or h.source) for h in sources), sources, strict=True))
    up, rejected, reasons = [], [], []
    counted: dict[str, list[MetricSample]] = {name: [] for name, *_ in SOURCE_COUNTS}
    for address, health in pairs:
        labels = (label_value(health.kind), address)
        up.append(MetricSample(labels, 1.0 if health.connected else 0.0))
        by_code: dict[str, int] = {}
        for r in health.rejected:  # most frequent first
            if r.code not in by_code:
                reasons.append(MetricSample((*labels, r.code, label_value(r.reason)), 1.0))
            by_code[r.code] = by_code.get(r.code, 0) + r.count
        rejected += [MetricSample((*labels, code), n) for code, n in by_code.items()]
        counts = dict(health.counts)
        for name, samples in counted.items():
            if name in counts:
                samples.append(MetricSample(labels, counts[name]))
    source = ("kind", "address")
    out = [
        MetricFamily(
            "kvset_source_up", "gauge", "1 while the source is connected and delivering", source, tuple(up)
        ),
        MetricFamily(
            "kvset_rejected",
            "counter",
            "input refused, by source and reason code",
            (*source, "code"),
            tuple(rejected),
        ),
        MetricFamily(
            "kvset_rejection_reason_info",
            "gauge",
            "the most frequent reason in words of each source's rejections of a code",
            (*source, "code", "reason"),
            tuple(reasons),
        ),
    ]
    for name, metric, kind, what in SOURCE_COUNTS:
        if counted[name]:
            out.append(MetricFamily(metric, kind, what, source, tuple(counted[name])))
    return out


def header_families(snap: Snapshot) -> list[MetricFamily]:
    """The header's metrics: the stream's counters, each source's health and refused input, the sample."""
    t = snap.totals
    out = [
        MetricFamily(
            "kvset_accesses", "counter", "block accesses analyzed", (), (MetricSample((), t.accesses),)
        ),
        MetricFamily(
            "kvset_first_time_blocks",
            "counter",
            "accesses to blocks never seen before",
            (),
            (MetricSample((), t.first_time),),
        ),
        MetricFamily(
            "kvset_beyond_horizon",
            "counter",
            "re-references of blocks forgotten at the horizon",
            (),
            (MetricSample((), t.beyond_horizon),),
        ),
        MetricFamily(
            "kvset_misses_split_exact",
            "gauge",
            "1: kvset_first_time_blocks and kvset_beyond_horizon are exact; 0: an upper and a lower bound "
            "(not every forgotten block could be remembered)",
            (),
            (MetricSample((), 1.0 if t.misses_split_exact else 0.0),),
        ),
    ]
    out += source_families(snap.sources)
    if snap.sample is not None:  # then every other kvset_ metric but kvset_accesses is an estimate
        out.append(
            gauge(
                "kvset_sample_rate",
                "present when the numbers are estimates from a spatial sample of the blocks: the rate blocks "
                "past the request heads are kept at",
                snap.sample.rate,
            )
        )
        out.append(gauge("kvset_sample_tracked_blocks", "blocks in the sample", snap.sample.tracked_blocks))
        out.append(
            gauge(
                "kvset_sample_head_boost",
                "1 while request heads are sampled more; 0 once block positions were seen to vary (keys not "
                "prefix-chained) and the sample fell back to plain spatial sampling",
                float(snap.sample.head_boost),
            )
        )
    return out


def families(snap: Snapshot, capacities: Sequence[int] = ()) -> Iterator[MetricFamily]:
    """The header's metrics, then every figure's, as plain data."""
    view = MetricsView(snap.sizes, snap.horizon, tuple(capacities))
    head = header_families(snap)
    yield from head[:3]  # the stream's counters first, the sources and the sample after the figures
    for figure in FIGURES:
        result = snap.get(figure.result)
        if result is not None:
            yield from figure.metrics(result, view)
    yield from head[3:]


def prometheus_family(family: MetricFamily) -> Metric:
    """prometheus_client's family of one plain-data family."""
    labels = list(family.labels)
    metric: GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily
    if family.kind == "histogram":
        metric = HistogramMetricFamily(family.name, family.help, labels=labels)
        for s in family.samples:
            metric.add_metric(list(s.labels), [(floatToGoString(le), n) for le, n in s.buckets], s.value)
        return metric
    if family.kind == "counter":
        metric = CounterMetricFamily(family.name, family.help, labels=labels)
    else:
        metric = GaugeMetricFamily(family.name, family.help, labels=labels)
    for s in family.samples:
        metric.add_metric(list(s.labels), s.value)
    return metric


def snapshot_families(snap: Snapshot, capacities: Sequence[int] = ()) -> list[Metric]:
    """Every metric of one snapshot; `capacities`: where kvset_hit_rate is given besides the engine's pool."""
    return [prometheus_family(f) for f in families(snap, capacities)]


class SnapshotCollector(Collector):
    """Serves the newest published snapshot. publish() may be called from any thread."""

    def __init__(self, capacities: Sequence[int] = ()) -> None:
        self.capacities = tuple(capacities)
        self._latest: Snapshot | None = None
        self._families: tuple[Snapshot, list[Metric]] | None = None
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
        if snap is None:
            return
        # The families of one snapshot, made once for every scrape of it (two thirds of a scrape's
        # CPU): a reference swap, like publish, so a scrape never sees another snapshot's families.
        made = self._families
        if made is None or made[0] is not snap:
            made = (snap, snapshot_families(snap, self.capacities))
            self._families = made
        yield from made[1]
