"""Offline analysis of a whole access stream: what `kvset analyze` and `kvset verify` compute.

The analyzer of a whole stream is read into a snapshot by the same builder as the live monitor's
(`analysis_snapshot`): the figures are computed once, in kvset.figures, for both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from queue import Full, Queue

import numpy as np

from kvset.core.analyzed_stream import AnalyzedStream
from kvset.core.analyzer import Analyzer
from kvset.core.curve import HitRateCurve
from kvset.core.feed_args import DEFAULT_HORIZON, Order
from kvset.core.opt import OptHistogram, opt_histogram
from kvset.core.pool_replay import PoolTrace
from kvset.core.principals import PrincipalCollector, PrincipalStream
from kvset.core.stack_distance import Sampling, StackDistanceAnalyzer, new_analyzer
from kvset.figures.inputs import OptCurve
from kvset.formats import read_trace
from kvset.formats.byte_input import INPUT_ENDS_EARLY
from kvset.formats.stream import NeedsWholeTrace, TraceStream
from kvset.rejects import RejectCounter
from kvset.snapshot import InputRead, Snapshot
from kvset.snapshot.builder import Readings, SnapshotBuilder, SnapshotConfig
from kvset.types import DEFAULT_TOP_PRINCIPALS, AccessBatch
from kvset.units import StreamUnits

DEFAULT_TARGETS = (0.95, 0.99, 0.999)


@dataclass
class InputSummary:
    """What was read, whatever the source (trace file, log, demo)."""

    name: str
    format: str
    units: StreamUnits | None  # the stream's (None until a trace read as a stream settles them)
    requests: int = 0
    lines: int = 0
    rejects: RejectCounter = field(default_factory=RejectCounter)
    warnings: RejectCounter = field(default_factory=RejectCounter)
    notes: list[str] = field(default_factory=list)
    read_seconds: float = 0.0

    @property
    def ended_early(self) -> str | None:
        """Where and why the input stopped before its end (a truncated or corrupt gzip), else None:
        the figures are then of the part before it."""
        found = next((r for r in self.rejects.summary() if r.reason == INPUT_ENDS_EARLY), None)
        return None if found is None else (found.examples[0] if found.examples else found.reason)


@dataclass
class AnalysisResult:
    input: InputSummary
    analyzer: StackDistanceAnalyzer
    curve: HitRateCurve
    analyze_seconds: float
    opt: OptAnalysis | None = None  # Belady MIN's curve of the same stream, when asked for (--opt)
    # with --by: each level's top principals (kvset.core.principals), "other" last
    principals: dict[str, tuple[PrincipalStream, ...]] | None = None
    principal_pool: PoolTrace | None = None  # the same stream for the pool replay (kvset.core.pool_replay)

    @property
    def accesses(self) -> int:
        return self.analyzer.accesses

    @property
    def distinct_blocks(self) -> int:
        # first-time accesses are distinct blocks; beyond-horizon ones were seen before
        return self.analyzer.first_time

    @property
    def horizon_reached(self) -> bool:
        return self.analyzer.forgotten_blocks > 0


def analyze_batches(
    batches: Iterable[AccessBatch],
    summary: InputSummary,
    horizon: int = DEFAULT_HORIZON,
    order: Order = "forward",
    *,
    sampling: Sampling | None = None,
    by: tuple[str, ...] = (),
    top_principals: int = DEFAULT_TOP_PRINCIPALS,
) -> AnalysisResult:
    """The analysis of an access stream in summary.units; with `sampling` a sampled one (estimates).
    A TraceStream is parsed on a thread of its own while the analyzer runs on this one, and read
    whole when it has to be (its notes say so). `by`: the principal levels to attribute it to."""
    if by and sampling is not None:
        raise ValueError(
            "--by needs the exact analyzer's stack distances: not with --sample or --sample-size"
        )
    if isinstance(batches, TraceStream):
        return analyze_stream(batches, summary, horizon, order, sampling, by, top_principals)
    assert summary.units is not None, "the units of a stream read whole are known before its analysis"
    analyzer = new_analyzer(summary.units, horizon, order, sampling)
    collector = PrincipalCollector(by, top_principals) if by else None
    t0 = time.perf_counter()
    requests = 0
    for batch in batches:
        _feed(analyzer, collector, batch)
        requests += len(batch.request_starts) if batch.request_starts is not None else 0
    if not summary.requests:
        summary.requests = requests
    curve = analyzer.curve()
    result = AnalysisResult(summary, analyzer, curve, time.perf_counter() - t0)
    result.principals = _principals(analyzer, collector)
    result.principal_pool = collector.pool_trace() if collector is not None else None
    return result


def _feed(analyzer: StackDistanceAnalyzer, collector: PrincipalCollector | None, batch: AccessBatch) -> None:
    if collector is None:
        analyzer.feed_batch(batch)
    else:
        assert isinstance(analyzer, Analyzer)  # sampling with --by is refused above
        collector.feed(analyzer, batch)


def _principals(
    analyzer: StackDistanceAnalyzer, collector: PrincipalCollector | None
) -> dict[str, tuple[PrincipalStream, ...]] | None:
    if collector is None:
        return None
    assert isinstance(analyzer, Analyzer)
    return collector.streams(analyzer)


_QUEUED = 2  # batches parsed ahead of the analyzer: memory stays at a few chunks
_END = object()


def _parse_into(stream: TraceStream, queue: Queue, stop: threading.Event) -> None:
    """The parsing thread: batches into the queue, then _END or the exception that ended it."""
    try:
        for batch in stream:
            while not stop.is_set():
                try:
                    queue.put(batch, timeout=0.1)
                    break
                except Full:
                    continue
            if stop.is_set():
                return
        queue.put(_END)
    except BaseException as e:  # handed to the analyzing thread, which raises it
        queue.put(e)


def analyze_stream(
    stream: TraceStream,
    summary: InputSummary,
    horizon: int = DEFAULT_HORIZON,
    order: Order = "forward",
    sampling: Sampling | None = None,
    by: tuple[str, ...] = (),
    top_principals: int = DEFAULT_TOP_PRINCIPALS,
) -> AnalysisResult:
    """Parse on one thread, analyze on this one (the kernel and the scanner release the GIL). The
    analyzer is made with the first batch: the stream has settled its units by then."""
    t0 = time.perf_counter()
    analyzer: StackDistanceAnalyzer | None = None
    queue: Queue = Queue(maxsize=_QUEUED)
    stop = threading.Event()
    worker = threading.Thread(target=_parse_into, args=(stream, queue, stop), name="kvset-parse", daemon=True)
    worker.start()
    first_batch_at = None
    collector = PrincipalCollector(by, top_principals) if by else None
    try:
        while True:
            item = queue.get()
            if item is _END:
                break
            if isinstance(item, BaseException):
                raise item
            if analyzer is None:
                first_batch_at = time.perf_counter()
                assert stream.units is not None
                analyzer = new_analyzer(stream.units, horizon, order, sampling)
            _feed(analyzer, collector, item)
    except NeedsWholeTrace as why:
        stop.set()
        worker.join()
        return _analyze_whole(stream, summary, horizon, order, str(why), t0, sampling, by, top_principals)
    finally:
        stop.set()
    worker.join()
    _summarize(
        summary,
        stream,
        stream.notes
        + [
            "read as a stream: parsed on one thread while analyzed on another "
            "(read: until the first batch; analyze: from then on)"
        ],
    )
    # the two overlap: "read" is the time before the analysis could start, "analyze" the rest
    started = first_batch_at or t0
    summary.read_seconds = started - t0
    assert analyzer is not None  # a stream without a request raised when it ended
    curve = analyzer.curve()
    result = AnalysisResult(summary, analyzer, curve, time.perf_counter() - started)
    result.principals = _principals(analyzer, collector)
    result.principal_pool = collector.pool_trace() if collector is not None else None
    return result


def _summarize(summary: InputSummary, read, notes: list[str]) -> None:
    summary.format = read.format
    summary.units = read.units
    summary.requests = read.requests
    summary.lines = read.lines
    summary.rejects = read.rejects
    summary.warnings = read.warnings
    summary.notes = notes


def _analyze_whole(
    stream: TraceStream,
    summary: InputSummary,
    horizon: int,
    order: Order,
    why: str,
    t0: float,
    sampling: Sampling | None,
    by: tuple[str, ...] = (),
    top_principals: int = DEFAULT_TOP_PRINCIPALS,
) -> AnalysisResult:
    """The whole-file path: read_trace (sorts all requests, settles the block size on all of them)."""
    p = stream.parser
    trace = read_trace(
        stream.path,
        format=stream.given_format,
        block_size=stream.given_block_size,
        strict=p.strict,
        hash_algo=p.hash_algo,
        python_hash_seed=p.python_hash_seed,
    )
    _summarize(summary, trace, trace.notes + [f"read whole, not as a stream: {why}"])
    result = analyze_batches(
        trace.batches(), summary, horizon, order, sampling=sampling, by=by, top_principals=top_principals
    )
    result.analyze_seconds = time.perf_counter() - t0
    return result


def verify_capacities(
    curve: HitRateCurve,
    targets: Iterable[float] = DEFAULT_TARGETS,
    n: int = 20,
    also: Iterable[HitRateCurve] = (),
) -> list[int]:
    """20 log-spaced capacities plus the working-set capacities of the targets (both modes), of `curve`
    and of the curves `also` given (Belady MIN's), each with the capacity just below it; all within
    `curve`'s horizon."""
    targets = list(targets)
    caps = set(int(c) for c in curve.log_capacities(n))
    for c in [curve, *also]:
        for t in targets:
            for mode in ("coverage", "absolute"):
                ws = c.working_set(t, mode=mode)
                if ws:
                    caps.add(ws)
                    if ws > 1:
                        caps.add(ws - 1)  # the capacity just short of the target must miss it
    return sorted(c for c in caps if 1 <= c <= curve.horizon)


def keys_in_analyzed_order(batches: Iterable[AccessBatch], order: str) -> tuple[np.ndarray, np.ndarray]:
    """The access stream exactly as the analyzer sees it (reverse order applied), for the naive replay."""
    stream = AnalyzedStream(order)
    for b in batches:
        stream.add(b)
    return stream.arrays()


@dataclass
class OptAnalysis:
    """Belady MIN's curve of a whole access stream (kvset.core.opt), and what it took."""

    histogram: OptHistogram
    curve: HitRateCurve
    seconds: float


def opt_analysis(batches: Iterable[AccessBatch], order: str) -> OptAnalysis:
    """MIN's stack distances of the stream, in the order the analyzer takes it, in one pass."""
    t0 = time.perf_counter()
    keys, tokens = keys_in_analyzed_order(batches, order)
    histogram = opt_histogram(keys, tokens)
    return OptAnalysis(histogram, histogram.curve(), time.perf_counter() - t0)


def analysis_snapshot(result: AnalysisResult, config: SnapshotConfig) -> Snapshot:
    """The snapshot of a whole stream, as the live monitor would build it, with what was read."""
    s = result.input
    read = InputRead(
        name=s.name,
        format=s.format,
        lines=s.lines,
        rejected=s.rejects.summary(),
        warnings=s.warnings.summary(),
        notes=tuple(s.notes),
        read_seconds=s.read_seconds,
        analyze_seconds=result.analyze_seconds,
    )
    opt = None
    if result.opt is not None:
        opt = OptCurve(result.opt.curve, result.opt.histogram.distinct_blocks, result.opt.seconds)
    rate = result.accesses / result.analyze_seconds if result.analyze_seconds > 0 else 0.0
    readings = Readings(
        accesses_per_second=rate,
        opt=opt,
        input=read,
        principals=result.principals or {},
        principal_pool=result.principal_pool,
    )
    return SnapshotBuilder(config).build(result.analyzer, readings)
