"""The pipeline: sources in worker threads -> analyzer -> snapshots, published at a steady pace.

    monitor = Monitor([DemoSource()], analyzer=new_analyzer, builder=SnapshotBuilder(SnapshotConfig()))
    monitor.run(stop, publish)      # blocking: call it from a worker thread
    snapshot = monitor.collect(10)  # or: run until the sources finish (or 10 s), return the last snapshot

The analyzer is made (by the factory given) once the stream's units are known: from the first
source that says them (at the start, or with its first accesses: a trace's settled block size, the
first KV event's; a lone source's as soon as it says them, before its first accesses); accesses of
a source that has not said its units yet wait for it. A batch whose
block size is not the stream's is refused and counted against its source, never mixed in.
Until then snapshots are of an empty analyzer in provisional units (a source's, the engine's
/metrics', or vLLM's default).

Only the thread that calls run/collect touches the analyzer. Accesses that carry a data-parallel
rank (a KV-events source with several endpoints) are also fed to one analyzer per rank, each rank's
own cache, kept beside the merged one: it costs each rank's tracked blocks again (about 70 bytes a
block) and tracks all time only, without the time windows.

Each source runs in its own thread and hands SourceUpdates over a bounded queue
(kvset.sources.threads), so a fast replay waits for the analyzer instead of filling memory. A source
that raises is reported in its health and the monitor keeps going.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from kvset.core.analyzed_stream import AnalyzedStream
from kvset.core.analyzer import Analyzer
from kvset.core.feed_args import MAX_TIMESTAMP
from kvset.core.opt import opt_histogram
from kvset.core.pool_replay import PoolTrace
from kvset.core.principals import LivePrincipals, PrincipalStream
from kvset.core.stack_distance import StackDistanceAnalyzer
from kvset.engine_model import EngineModel
from kvset.figures.inputs import OptCurve
from kvset.formats.record import TraceRecorder
from kvset.quantities import plural
from kvset.rejects import RejectCounter
from kvset.snapshot import Snapshot
from kvset.snapshot.builder import Readings, SnapshotBuilder
from kvset.sources.base import Source
from kvset.sources.threads import Finished, SourceThreads, Wake
from kvset.types import AccessBatch, EngineReading, KvCacheGroup, SourceHealth, SourceUpdate, TimelineEvent
from kvset.units import DEFAULT_UNITS, StreamUnits

LIVE_KINDS = ("events", "log", "metrics")  # sources stamped with the engine's clock, not a trace's
FUTURE_TOLERANCE_SECONDS = 300.0
MAX_EVENTS = 200
ENGINE_HISTORY = 600  # readings kept for the engine's hit-rate history
HEARTBEAT_SECONDS = 5.0  # publish at least this often, so ages and staleness stay current
WAKE_SECONDS = 0.25  # a snapshot waiting for a change is built this soon after one comes
OPT_WAITING = "Belady MIN: once the whole trace is replayed"
OPT_COMPUTING = "Belady MIN: computing the whole trace's curve…"
NEVER_SAID_UNITS = "the source never said its block size: accesses not analyzed"

# Makes the stream's analyzer from its units: factory(units, preallocate=True), and factory(units,
# fine_slots=1, coarse_slots=1) for a rank's all-time one (kvset.core.stack_distance.new_analyzer, its horizon,
# order and sampling bound with functools.partial).
AnalyzerFactory = Callable[..., StackDistanceAnalyzer]


class Monitor:
    def __init__(
        self,
        sources: Sequence[Source],
        analyzer: AnalyzerFactory,
        builder: SnapshotBuilder,
        interval: float = 1.0,
        recorder: TraceRecorder | None = None,
        opt: bool = False,
        principals: LivePrincipals | None = None,
    ) -> None:
        """analyzer: makes the analyzer once the stream's units are known (see AnalyzerFactory);
        recorder: saves every delivered access as a trace file (closed when the monitor stops);
        opt: keep a copy of every access analyzed and, once every source has finished (a whole trace
        file), compute Belady MIN's curve of them here, in the pipeline thread, for every later
        snapshot (kvset.core.opt; 12-16 bytes an access until then); principals (--by): the last --by-window
        accesses kept with their stack distances for the principals' figures (kvset.core.principals)."""
        if not sources:
            raise ValueError("a monitor needs at least one source")
        self.sources = list(sources)
        self.new_analyzer = analyzer
        self.analyzer: StackDistanceAnalyzer | None = None  # made once the stream's units are known
        self.units: StreamUnits | None = None  # the stream's
        self._source_units: list[StreamUnits | None] = [s.units for s in self.sources]
        self._held: deque[tuple[int, AccessBatch]] = deque()  # accesses of sources yet to say their units
        self._placeholder: StackDistanceAnalyzer | None = None  # empty, for snapshots until then
        self.builder = builder
        self.recorder = recorder
        self._threads = SourceThreads(self.sources)
        self.interval = float(interval)
        self._health: list[SourceHealth] = [
            SourceHealth(source=s.name, kind=s.kind, connected=False, state="starting") for s in self.sources
        ]
        self._engine: dict[int, EngineReading] = {}
        # the block-pool replay's figures, from hit-reporting KV events (per principal with --by)
        self.engine_model = EngineModel(by_principal=principals is not None)
        self._pipeline_rejects = [
            RejectCounter() for _ in self.sources
        ]  # refused by the pipeline, per source
        self._engine_history: deque[EngineReading] = deque(maxlen=ENGINE_HISTORY)
        self._events: deque[TimelineEvent] = deque(maxlen=MAX_EVENTS)
        self._finished: set[int] = set()
        self._rate_window: deque[tuple[float, int]] = deque()
        self._changed = True
        self._stopping = False  # set once the monitor itself stops the sources
        self._listeners: list[Callable[[Snapshot], None]] = []
        # data-parallel rank -> the analyzer of that rank's own accesses
        self.rank_analyzers: dict[int, StackDistanceAnalyzer] = {}
        # a hybrid model's KV cache groups: each one's description and the analyzer of its own accesses
        self.kv_cache_groups: dict[int, KvCacheGroup] = {}
        self.group_analyzers: dict[int, StackDistanceAnalyzer] = {}
        self.opt = opt
        self._opt_stream: AnalyzedStream | None = None  # made with the analyzer
        self._opt: OptCurve | None = None
        self._opt_note: str | None = OPT_WAITING if opt else None
        self._opt_done = False
        self.principals = principals

    @property
    def interval(self) -> float:
        return self._interval  # seconds between snapshots

    @interval.setter
    def interval(self, seconds: float) -> None:
        """From the UI's thread (a paused display): the pipeline and the sources take the pace now."""
        self._interval = float(seconds)
        for source in self.sources:  # a duck-typed source may lack pace
            getattr(source, "pace", lambda _s: None)(self._interval)
        self._threads.wake()

    # -- the pipeline thread -----------------------------------------------
    def _apply(self, index: int, update: SourceUpdate) -> None:
        if update.units is not None and self._source_units[index] is None:
            self._source_units[index] = update.units
            if self.analyzer is None and len(self.sources) == 1:
                # the stream's only source said its units before its first accesses (a KV-event
                # stream's first store comes about 40 batches before its first finished request):
                # the analyzer is made now, not when those wait for it (40 ms under a flood)
                self._start_analysis(update.units)
            self._release_held()
        if update.accesses is not None and len(update.accesses):
            self._intake(index, update.accesses)
        for group in update.kv_cache_groups:
            self.kv_cache_groups[group.group_idx] = group
        if self.units is not None:  # (a group's accesses come with or after the stream's first)
            for group_idx, part in update.group_accesses:
                self._group_analyzer(group_idx).feed_batch(part)
                self._changed = True
        if update.health is not None:
            self._health[index] = update.health
            self._changed = True
        if update.engine is not None:
            if update.engine.token_hit_rate is not None or update.engine.kv_usage is not None:
                # the history is of what the engine measured; readings without it would crowd it out
                self._engine_history.append(update.engine)
            self._engine[index] = update.engine
            self._changed = True
        if update.events:
            self._events.extend(update.events)
            self._changed = True
        if update.engine_model is not None:
            self.engine_model.add(index, update.engine_model)
            self._changed = True

    # -- the stream's units ------------------------------------------------
    def _intake(self, index: int, batch: AccessBatch) -> None:
        """A batch in: held while its source has not said its units, else analyzed."""
        units = self._source_units[index]
        if units is None:
            self._held.append((index, batch))
            return
        if self.analyzer is None:
            self._start_analysis(units)
        self._feed(index, batch)

    def _start_analysis(self, units: StreamUnits) -> None:
        """The stream's units are known: make its analyzer (and MIN's copy of the stream)."""
        self.units = units
        self.analyzer = self.new_analyzer(units, preallocate=True)  # the stream's: its growth would stall it
        self._placeholder = None
        if self.opt:
            self._opt_stream = AnalyzedStream(self.analyzer.order, units.block_size)
        self._changed = True

    def _release_held(self) -> None:
        """Feed, in their order, the held accesses of the sources that have said their units now."""
        held, self._held = self._held, deque()
        for index, batch in held:
            self._intake(index, batch)

    def _drop_held(self, index: int) -> None:
        """A source that ended without saying its units: its held accesses are refused, counted."""
        dropped = [b for i, b in self._held if i == index]
        if dropped:
            self._held = deque((i, b) for i, b in self._held if i != index)
            self._pipeline_rejects[index].reject(NEVER_SAID_UNITS, count=sum(len(b) for b in dropped))

    def provisional_units(self) -> StreamUnits:
        """The units snapshots are in before the stream's are known: a source's that said them, else
        the engine's block size where its /metrics say it, else vLLM's default."""
        if self.units is not None:
            return self.units
        said = next((u for u in self._source_units if u is not None), None)
        if said is not None:
            return said
        for index, reading in self._engine.items():
            if self.sources[index].kind == "metrics" and reading.block_size:
                return StreamUnits(reading.block_size, "metrics")
        return DEFAULT_UNITS

    def _snapshot_analyzer(self) -> StackDistanceAnalyzer:
        if self.analyzer is not None:
            return self.analyzer
        units = self.provisional_units()
        if self._placeholder is None or self._placeholder.units != units:
            self._placeholder = self.new_analyzer(units)
        return self._placeholder

    # -- analysis ----------------------------------------------------------
    def _feed(self, index: int, batch: AccessBatch) -> None:
        """Analyze one batch; accesses the analyzer cannot take are counted against their source."""
        analyzer, units, source_units = self.analyzer, self.units, self._source_units[index]
        assert analyzer is not None and units is not None and source_units is not None
        block_size = batch.block_size or source_units.block_size  # the batch's, else its source's
        if block_size != units.block_size:
            self._pipeline_rejects[index].reject(
                f"blocks of {block_size:,} tokens in a stream of {units.block_size:,}-token blocks: "
                "accesses refused",
                count=len(batch),
            )
            self._changed = True
            return
        kind = self.sources[index].kind
        if batch.timestamps is not None:
            batch = self._drop_unusable_times(index, batch)
            if kind in LIVE_KINDS:
                batch = self._clamp_future(index, batch)
        if not len(batch):
            return
        try:
            if self.principals is not None and isinstance(analyzer, Analyzer):
                self.principals.feed(analyzer, batch)
            else:
                analyzer.feed_batch(batch)
        except ValueError as exc:
            self._pipeline_rejects[index].reject(f"batch refused by the analyzer: {exc}", count=len(batch))
            self._changed = True
            return
        for rank, part in batch.by_rank():
            self._rank_analyzer(rank).feed_batch(part)
        if self._opt_stream is not None:
            self._opt_stream.add(batch)
        if self.recorder is not None:
            self.recorder.write(batch, block_size=units.block_size)
            if self.recorder.failure is not None:  # counted where the source's rejections are shown
                self._pipeline_rejects[index].reject(
                    f"not recorded: {self.recorder.failure}; the recording is discarded", count=len(batch)
                )
        self._rate_window.append((time.monotonic(), len(batch)))
        self._changed = True

    def _group_analyzer(self, group_idx: int) -> StackDistanceAnalyzer:
        analyzer = self.group_analyzers.get(group_idx)
        if analyzer is None:
            assert self.units is not None
            analyzer = self.new_analyzer(self.units, fine_slots=1, coarse_slots=1)  # all time, as a rank's
            self.group_analyzers[group_idx] = analyzer
        return analyzer

    def _rank_analyzer(self, rank: int) -> StackDistanceAnalyzer:
        analyzer = self.rank_analyzers.get(rank)
        if analyzer is None:
            # all time only (the per-rank views are all-time): one slot per ring instead of hundreds;
            # sampled as the merged stream is, so a rank's curve is as good as the merged one's
            assert self.units is not None  # a rank's accesses come after the stream's units
            analyzer = self.new_analyzer(self.units, fine_slots=1, coarse_slots=1)
            self.rank_analyzers[rank] = analyzer
        return analyzer

    def _drop_unusable_times(self, index: int, batch: AccessBatch) -> AccessBatch:
        """Accesses stamped outside the analyzer's time range (or nan) are refused, the rest analysed."""
        ts = np.asarray(batch.timestamps, dtype=np.float64)
        usable = np.abs(ts) <= MAX_TIMESTAMP  # false for nan
        if usable.all():
            return batch
        refused = len(batch) if ts.ndim == 0 else int((~usable).sum())
        self._pipeline_rejects[index].reject(
            f"timestamp not within ±{MAX_TIMESTAMP:g} s: access refused",
            count=refused,
            example=f"timestamp {float(ts.flat[int(np.argmin(usable))])!r}",  # a float, not a numpy repr
        )
        self._changed = True
        if ts.ndim == 0:
            return batch.subset(np.zeros(len(batch), dtype=bool))
        return batch.subset(usable)

    def _clamp_future(self, index: int, batch: AccessBatch) -> AccessBatch:
        """A live engine's clock ahead of ours would freeze the time windows: use arrival time instead."""
        now = time.time()
        ts = np.asarray(batch.timestamps, dtype=np.float64)
        ahead = ~(ts <= now + FUTURE_TOLERANCE_SECONDS)  # nan counts as ahead
        if not ahead.any():
            return batch
        self._pipeline_rejects[index].reject(
            f"timestamps more than {FUTURE_TOLERANCE_SECONDS:g} s ahead of this clock: arrival time used",
            count=int(ahead.sum()) if ts.ndim else len(batch),
        )
        return replace(batch, timestamps=np.where(ahead, now, ts) if ts.ndim else now)

    def _health_with_pipeline_rejects(self, index: int) -> SourceHealth:
        """The source's health as the views see it: with what the pipeline refused, its backlog (in
        words and counted) and where it reads."""
        h = self._health[index]
        extra = self._pipeline_rejects[index]
        if extra:
            h = replace(h, rejected=h.rejected + extra.summary())
        queued, accesses = self._threads.backlog(index)
        if queued > 0:
            waiting = f"{plural(queued, 'batch', 'batches')} ({plural(accesses, 'access', 'accesses')}) waiting for the analyzer"
            details = dict(h.details)
            details["backlog"] = f"{details['backlog']}; {waiting}" if details.get("backlog") else waiting
            h = replace(h, details=tuple(details.items()))
        counts = dict(h.counts)
        counts["backlog_batches"] = counts.get("backlog_batches", 0) + queued
        counts["backlog_accesses"] = counts.get("backlog_accesses", 0) + accesses
        address = h.address or getattr(self.sources[index], "address", "")  # a duck-typed source may lack it
        return replace(h, address=address, counts=tuple(counts.items()))

    def _drain(self, timeout: float) -> None:
        """Apply queued items for up to `timeout` seconds; timeout 0: everything queued now."""
        deadline = time.monotonic() + timeout
        while True:
            taken = self._threads.take(max(0.0, deadline - time.monotonic()))
            if taken is None:
                return
            index, item = taken
            if isinstance(item, Wake):  # stopped, or the interval changed: look again (0: take all)
                if timeout > 0:
                    return
                continue
            if isinstance(item, Finished):
                self._finished.add(item.index)
                self._drop_held(item.index)
                h = self._health[item.index]
                if not h.finished and not self._stopping:
                    # the source ended on its own; one we stopped keeps its last state ("down: ...")
                    state = h.state if h.state.startswith("failed") else "finished"
                    self._health[item.index] = replace(h, finished=True, connected=False, state=state)
                self._changed = True
            else:
                self._apply(index, item)
            if timeout > 0 and time.monotonic() >= deadline:
                return

    def accesses_per_second(self) -> float:
        now = time.monotonic()
        while self._rate_window and now - self._rate_window[0][0] > 5.0:
            self._rate_window.popleft()
        if not self._rate_window:
            return 0.0
        span = max(1.0, now - self._rate_window[0][0])
        return sum(n for _, n in self._rate_window) / span

    def engine_reading(self) -> EngineReading | None:
        """The engine's readings from every source merged: the newest value of each field wins."""
        readings = sorted(self._engine.values(), key=lambda r: r.at)
        if not readings:
            return None
        merged = readings[0]
        for r in readings[1:]:
            updates = {k: v for k, v in r.__dict__.items() if v is not None and k not in ("label", "stale")}
            merged = replace(merged, **updates)
        labels = [r.label for r in readings if r.label]
        stale = any(r.stale for r in readings if r.capacity_blocks or r.token_hit_rate is not None)
        return replace(merged, label=", ".join(dict.fromkeys(labels)), stale=stale)

    def add_listener(self, listener: Callable[[Snapshot], None]) -> None:
        """Hand every snapshot built to `listener` too (an exporter beside the UI). It is called in the
        pipeline thread, so it must return at once."""
        self._listeners.append(listener)

    def snapshot(self) -> Snapshot:
        streams, trace = self._principal_readings()
        snap = self.builder.build(
            self._snapshot_analyzer(),
            Readings(
                sources=tuple(self._health_with_pipeline_rejects(i) for i in range(len(self.sources))),
                engine=self.engine_reading(),
                events=tuple(self._events),
                accesses_per_second=self.accesses_per_second(),
                engine_history=tuple(self._engine_history),
                engine_model=self.engine_model if self.engine_model.updates else None,
                ranks=self.rank_analyzers,
                kv_cache_groups={
                    g: (self.kv_cache_groups[g], a)
                    for g, a in self.group_analyzers.items()
                    if g in self.kv_cache_groups
                },
                opt=self._opt,
                opt_note=self._opt_note,
                principals=streams,
                principal_pool=trace,
            ),
        )
        self._changed = False
        for listener in self._listeners:
            listener(snap)
        return snap

    def _principal_readings(self) -> tuple[dict[str, tuple[PrincipalStream, ...]], PoolTrace | None]:
        """--by: the principals' streams, read at most every few seconds (kvset.core.principals)."""
        analyzer = self.analyzer
        if self.principals is None or not isinstance(analyzer, Analyzer):
            return {}, None
        return self.principals.read(analyzer, time.monotonic(), final=self.all_finished)

    @property
    def all_finished(self) -> bool:
        return len(self._finished) == len(self.sources)

    def run(self, stop: threading.Event, publish: Callable[[Snapshot], None]) -> None:
        """Until `stop` is set: ingest, and publish a snapshot every `interval` when something changed."""
        self._threads.start(stop)
        last = 0.0
        try:
            while not stop.is_set():
                # wait for the next snapshot's time, applying what comes (a stop or a new interval
                # wakes it at once); past it, for the next change
                due = last + self.interval - time.monotonic()
                self._drain(due if due > 0 else WAKE_SECONDS)
                if self.opt and not self._opt_done and self.all_finished:
                    self._opt_note = OPT_COMPUTING
                    publish(self.snapshot())  # say so first: a long trace takes a while
                    self._finish_opt()
                now = time.monotonic()
                if now - last >= self.interval and (self._changed or now - last >= HEARTBEAT_SECONDS):
                    publish(self.snapshot())
                    last = now
        finally:
            self._stopping = True
            stop.set()
            self._join()

    def change_replay_speed(self, factor: float) -> list[float]:
        """Multiply every paced replay's speed; the new speeds (none: no source has the control)."""
        speeds = [getattr(s, "change_speed", lambda _f: None)(factor) for s in self.sources]
        return [v for v in speeds if v is not None]

    def toggle_replay_pause(self) -> list[bool]:
        """Pause (or resume) every paced replay's reading; whether each is now paused."""
        states = [getattr(s, "toggle_pause", lambda: None)() for s in self.sources]
        return [v for v in states if v is not None]

    def collect(
        self, seconds: float | None = None, give_up: Callable[[list[SourceHealth]], bool] | None = None
    ) -> Snapshot:
        """Run until every source finished (or `seconds` of wall time passed, or `give_up` says the
        sources' health will not get better); return the final snapshot."""
        stop = threading.Event()
        self._threads.start(stop)
        deadline = None if seconds is None else time.monotonic() + seconds
        try:
            while not self.all_finished and (deadline is None or time.monotonic() < deadline):
                self._drain(0.1)
                if give_up is not None and give_up(list(self._health)):
                    break
        finally:
            self._stopping = True
            stop.set()
            # take what is already queued, then the final picture
            self._drain(0.0)
            self._join()
            self._drain(0.0)
        if self.opt and not self._opt_done:
            self._finish_opt()
        return self.snapshot()

    def _finish_opt(self) -> None:
        """Belady MIN's curve of every access analyzed, once: only when the sources read their whole
        input (MIN needs the future of every access); the copy of the accesses is let go after."""
        stream, self._opt_stream = self._opt_stream, None
        self._opt_done = True
        self._changed = True
        if not all(h.finished for h in self._health):  # stopped (a --duration, a quit) before its end
            self._opt_note = "Belady MIN not computed: the trace was not read to its end"
        elif any(h.state.startswith("failed") for h in self._health):
            self._opt_note = "Belady MIN not computed: the trace could not be read to its end"
        elif stream is None or not len(stream):
            self._opt_note = "Belady MIN not computed: no block access"
        else:
            keys, tokens = stream.arrays()
            started = time.perf_counter()
            histogram = opt_histogram(keys, tokens)
            self._opt = OptCurve(histogram.curve(), histogram.distinct_blocks, time.perf_counter() - started)
            self._opt_note = None

    def _join(self) -> None:
        self._threads.join()
        if self.recorder is not None:
            self.recorder.close()
