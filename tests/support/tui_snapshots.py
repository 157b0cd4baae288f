"""Snapshots and fake monitors for the kvset-top tests: real pipeline values, a fixed clock, no threads racing.

Every snapshot here is made the way the monitor makes one: the seeded agentic workload
(kvset.workload) is fed to a real Analyzer, and kvset.snapshot.builder.SnapshotBuilder builds the
snapshot from it with engine readings and source healths the real sources produce (the engine's
readings come from kvset's own /metrics tracker reading a real vLLM exposition). The wall clock is
fixed (NOW), so ages and screenshots are stable. Each builder runs once per test process.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from kvset.core.analyzed_stream import AnalyzedStream
from kvset.core.analyzer import Analyzer
from kvset.core.opt import opt_histogram
from kvset.core.stack_distance import new_analyzer
from kvset.engine.kv_event_health import HITS_REPORTED_NOTE, MISSES_ONLY_NOTE
from kvset.engine.metrics_tracker import MetricsTracker
from kvset.figures.inputs import OptCurve
from kvset.formats.traces import read_trace
from kvset.geometry import load_model
from kvset.rejects import Rejection
from kvset.snapshot import Snapshot
from kvset.snapshot.builder import Readings, SnapshotBuilder, SnapshotConfig
from kvset.sources.demo import DEMO_POOL_BLOCKS, repeating_phases
from kvset.types import AccessBatch, EngineReading, SourceHealth, SourceUpdate, TimelineEvent
from kvset.units import EnginePool, StreamUnits
from kvset.workload import AgenticWorkload, WorkloadConfig
from tests.support.engine_metrics_server import vllm_exposition
from tests.support.paths import MOONCAKE_TRACE

NOW = 1_767_225_600.0  # fixed "now" (2026-01-01T00:00:00Z) for ages in screenshots
BLOCK_TOKENS = 16  # the workload's and vLLM's block size

# The demo as `kvset-top --demo` plays it: its phases, 5 minutes of trace time (three phases seen).
DEMO_SECONDS = 300.0
DEMO_SPEED = 3.0  # the demo source's name says its speed

# A vLLM engine serving Qwen3-Next (hybrid: linear-attention layers beside the full-attention ones):
# its pool of 12,000 blocks holds the 95 % working set in blocks, not with the hybrid reserve its 48
# running requests need, and it thrashes.
ENGINE_MODEL = "qwen3-next-80b-a3b"
ENGINE_POOL_BLOCKS = 12_000
ENGINE_RUNNING = 48
ENGINE_SECONDS = 360.0  # the engine's traffic so far, ending just before NOW
ENGINE_LAST_ACCESS = NOW - 1.2
ENGINE_MEASURED_HIT_RATE = 0.86  # what its /metrics counters give: Δhits / Δqueries
METRICS_POLL_SECONDS = 10.0
METRICS_DOWN_SINCE = NOW - 94.0  # the /metrics poller lost the engine 94 s ago
EVENTS_URL = "tcp://127.0.0.1:5557"
METRICS_URL = "http://127.0.0.1:8000/metrics"

TRACE_NAME = "agent.jsonl"


# -- feeding the analyzer ------------------------------------------------------------------------
def workload_batches(
    wl: AgenticWorkload, seconds: float, offset: float = 0.0, step: float = 5.0
) -> Iterator[AccessBatch]:
    """The workload's requests up to `seconds` of its own time, in batches of `step` seconds, with
    `offset` added to every timestamp (0: trace time; else a live engine's wall clock)."""
    until = 0.0
    while until < seconds:
        until = min(seconds, until + step)
        batch = wl.batch(1 << 20, until=until)
        if len(batch):
            yield dataclasses.replace(batch, timestamps=batch.timestamps + offset)


def fed_snapshot(
    batches: Iterable[AccessBatch],
    config: SnapshotConfig,
    sources: tuple[SourceHealth, ...],
    *,
    engine: EngineReading | None = None,
    events: tuple[TimelineEvent, ...] = (),
    engine_history: tuple[EngineReading, ...] = (),
    accesses_per_second: float = 0.0,
    now: float = NOW,
    build_every: float = 30.0,
) -> Snapshot:
    """Feed the batches to a fresh Analyzer, building a snapshot every `build_every` seconds of their
    time as the monitor would (the all-time working sets' trend is sampled once a minute from them),
    and return the last one."""
    analyzer = Analyzer(units=units_of(batches))  # as the monitor makes it, in its source's units
    builder = SnapshotBuilder(config)
    readings = Readings(
        sources=sources,
        engine=engine,
        events=events,
        accesses_per_second=accesses_per_second,
        engine_history=engine_history,
    )
    built_at = None
    for batch in batches:
        analyzer.feed_batch(batch)
        t = float(batch.timestamps[-1])
        if built_at is None or t - built_at >= build_every:
            builder.build(analyzer, readings, now=now)
            built_at = t
    return builder.build(analyzer, readings, now=now)


def units_of(batches: list[AccessBatch]) -> StreamUnits:
    """The units the batches' source would say: their block size (the workload's 16, Mooncake's 512)."""
    return StreamUnits((batches[0].block_size if batches else None) or BLOCK_TOKENS, "format")


def misses_only(batches: list[AccessBatch], pool: int) -> list[AccessBatch]:
    """The accesses that miss an LRU cache of `pool` blocks: all an engine publishes without its hits."""
    shadow = Analyzer(units=units_of(batches))
    out = []
    for batch in batches:
        d = shadow.feed_batch(batch, return_distances=True)
        out.append(batch.subset((d == 0) | (d < 0) | (d > pool)))
    return out


# -- the engine's own readings -----------------------------------------------------------------
def engine_exposition(queries: float, hits: float, usage: float) -> str:
    """vLLM 0.13's real /metrics body, for this engine's pool, block size and running requests."""
    body = vllm_exposition(queries, hits, usage)
    # vLLM counts its null block in num_gpu_blocks: one more than the blocks that can cache
    body = re.sub(r'num_gpu_blocks="\d+"', f'num_gpu_blocks="{ENGINE_POOL_BLOCKS + 1}"', body)
    return re.sub(
        r"^(vllm:num_requests_running\{[^}]*\}) \S+$", rf"\g<1> {float(ENGINE_RUNNING)!r}", body, flags=re.M
    )


def metrics_readings(start: float, end: float, tokens_per_second: float) -> list[EngineReading]:
    """kvset's /metrics tracker on one poll every METRICS_POLL_SECONDS: the engine's counters grow
    with its traffic at ENGINE_MEASURED_HIT_RATE, its KV use creeps up to full."""
    tracker = MetricsTracker(window_s=60.0, label="/metrics")
    readings = []
    polls = int((end - start) // METRICS_POLL_SECONDS)
    for i in range(polls + 1):
        at = start + i * METRICS_POLL_SECONDS
        queries = 1000.0 + tokens_per_second * (at - start)
        wobble = 0.01 * ((i * 7) % 3)  # per-poll variation, as a real engine has
        hits = queries * (ENGINE_MEASURED_HIT_RATE - wobble)
        result = tracker.update(engine_exposition(queries, hits, min(0.99, 0.80 + 0.004 * i)), at)
        assert result.error is None and result.reading is not None, result.error
        readings.append(result.reading)
    return readings


def metrics_down_health(last_good_at: float) -> SourceHealth:
    """The /metrics poller after the engine stopped answering: what kvset.sources.metrics reports."""
    return SourceHealth(
        source=f"metrics {METRICS_URL}",
        kind="metrics",
        connected=False,
        state="down: connection refused",
        retry_in=8.0,
        last_data_at=last_good_at,
        received=31,
        rejected=(
            Rejection(
                "truncated response (the body does not end with a newline)",
                3,
                ("poll 12 at 23:57:10", "poll 19 at 23:58:20", "poll 25 at 23:59:20"),
            ),
            Rejection("no vllm: or sglang: metrics in the response", 1, ("poll 27 at 23:59:40",)),
        ),
        notes=("showing the last good values (stale)",),
    )


def events_health(accesses: int, batches: int, hits_reported: bool) -> SourceHealth:
    """The KV-events source of a vLLM engine (kvset.sources.kv_events) that has heard `batches` batches."""
    return SourceHealth(
        source=f"events {EVENTS_URL}",
        kind="events",
        connected=True,
        state="connected",
        last_data_at=ENGINE_LAST_ACCESS,
        received=batches,
        accesses=accesses,
        notes=(HITS_REPORTED_NOTE if hits_reported else MISSES_ONLY_NOTE,),
        details=(("block size", f"{BLOCK_TOKENS} tokens"),),
        reports_hits=hits_reported,
    )


# -- the snapshots -------------------------------------------------------------------------------
def _with_seq(snapshot: Snapshot, seq: int | None) -> Snapshot:
    return snapshot if seq is None else dataclasses.replace(snapshot, seq=seq)


@functools.cache
def _demo() -> Snapshot:
    wl = AgenticWorkload(WorkloadConfig(), repeating_phases())
    batches, phases = [], []  # phases: (trace time it began, name), as the demo source announces them
    for batch in workload_batches(wl, DEMO_SECONDS):
        batches.append(batch)
        if not phases or phases[-1][1] != wl.phase_name:
            phases.append((float(batch.timestamps[0]), wl.phase_name))
    accesses = sum(len(b) for b in batches)
    wall = DEMO_SECONDS / DEMO_SPEED  # the demo source plays trace time at DEMO_SPEED
    health = SourceHealth(
        source=f"demo: built-in agentic workload at {DEMO_SPEED:g}x",
        kind="demo",
        connected=True,
        state=f"running: {wl.phase_name}",
        last_data_at=NOW - 0.4,
        received=wl.requests_made,
        accesses=accesses,
        notes=("DEMO: synthetic agent sessions, not an engine; the pool is a pretend one",),
        details=(("phase", wl.phase_name), ("sessions", str(wl.concurrency))),
    )
    pool = EngineReading(
        at=NOW - wall, pools=(EnginePool(DEMO_POOL_BLOCKS, BLOCK_TOKENS),), label="demo pool (pretend)"
    )
    timeline = tuple(
        TimelineEvent(NOW - wall + at / DEMO_SPEED, "phase", f"demo phase: {name}") for at, name in phases
    )
    return fed_snapshot(
        batches,
        SnapshotConfig(demo=True),
        (health,),
        engine=pool,
        events=timeline,
        accesses_per_second=accesses / wall,
    )


def demo_snapshot(seq: int | None = None) -> Snapshot:
    """`kvset-top --demo` five minutes (of trace time) in: DEMO banner, its pretend pool, no model."""
    return _with_seq(_demo(), seq)


def _engine_run(hits_reported: bool, config: SnapshotConfig | None = None) -> Snapshot:
    offset = ENGINE_LAST_ACCESS - ENGINE_SECONDS
    batches = list(
        workload_batches(AgenticWorkload(WorkloadConfig(seed=3)), ENGINE_SECONDS, offset=offset, step=1.0)
    )
    tokens = sum(len(b) for b in batches) * BLOCK_TOKENS
    readings = metrics_readings(offset, METRICS_DOWN_SINCE, tokens / ENGINE_SECONDS)
    engine = dataclasses.replace(readings[-1], stale=True)  # the poller repeats its last good reading
    if not hits_reported:
        batches = misses_only(batches, ENGINE_POOL_BLOCKS)
    delivered = sum(len(b) for b in batches)
    sources = (events_health(delivered, len(batches), hits_reported), metrics_down_health(readings[-1].at))
    down = TimelineEvent(
        METRICS_DOWN_SINCE + METRICS_POLL_SECONDS, "source-down", f"{METRICS_URL}: connection refused"
    )
    config = config or SnapshotConfig(geometry=load_model(ENGINE_MODEL))
    return fed_snapshot(
        batches,
        config,
        sources,
        engine=engine,
        events=(down,),
        engine_history=tuple(readings),
        accesses_per_second=delivered / ENGINE_SECONDS,
    )


@functools.cache
def _engine(hits_reported: bool) -> Snapshot:
    return _engine_run(hits_reported)


def engine_snapshot(seq: int | None = None) -> Snapshot:
    """A vLLM engine with a model whose events report its hits: the operating point, the reserve, a pool
    that thrashes, and a /metrics source that went down after rejecting some responses."""
    return _with_seq(_engine(True), seq)


def misses_only_snapshot(seq: int | None = None) -> Snapshot:
    """The same engine publishing the stores of its misses only (vLLM's default): the curve is of its
    misses, so it is not compared with the engine's hit rate."""
    return _with_seq(_engine(False), seq)


# The same engine asked for tiers (`--tiers 3GiB,2GiB --size-next-tier 0.99`): 3 GiB of its HBM, 2 GiB of
# host DRAM behind it (exclusive), and the third tier that reaches 99 % coverage.
TIER_SIZES = ("3GiB", "2GiB")
NEXT_TIER_TARGET = 0.99


@functools.cache
def _tiers() -> Snapshot:
    from kvset.figures.tiers import NEXT_TIER, TIERS

    tiers = TIERS.read(",".join(TIER_SIZES))  # as the command line reads --tiers
    config = SnapshotConfig(
        geometry=load_model(ENGINE_MODEL), options={TIERS.dest: tiers, NEXT_TIER.dest: NEXT_TIER_TARGET}
    )
    return _engine_run(True, config)


# The same engine counted in GPUs: `--gpu H100 --tp 4 --weights 160GB` (the model's 80B weights in bf16);
# its 2 KV heads split over 4 GPUs are held twice.
GPU_FLAGS = {"gpu": "H100", "tp": 4, "weights": 160 * 10**9}


@functools.cache
def _gpus() -> Snapshot:
    from kvset.geometry.gpus import gpu_named

    options = {**GPU_FLAGS, "gpu": gpu_named(str(GPU_FLAGS["gpu"]))}
    return _engine_run(True, SnapshotConfig(geometry=load_model(ENGINE_MODEL), options=options))


def gpus_snapshot(seq: int | None = None) -> Snapshot:
    """The engine with a model, its working sets also in H100s (GPU_FLAGS)."""
    return _with_seq(_gpus(), seq)


def tiers_snapshot(seq: int | None = None) -> Snapshot:
    """The engine with a model and --tiers 3GiB,2GiB --size-next-tier 0.99."""
    return _with_seq(_tiers(), seq)


# kvset analyze --by tenant,session of a multi-tenant trace: a flood tenant writing blocks it never
# reads again, two tenants re-reading their own prefixes, all behind one shared system prompt.
PRINCIPAL_TENANTS = (("flood", 0.4), ("acme", 0.35), ("zeta", 0.2), (None, 0.05))


def principal_batches(requests: int = 1500, seed: int = 5) -> list[AccessBatch]:
    """The multi-tenant trace as one batch, every request of 16-token blocks stamped 0.5 s apart."""
    from kvset.types import PrincipalNames

    rng = np.random.default_rng(seed)
    names = PrincipalNames()
    keys: list[int] = []
    starts, ids, stamps = [], [], []
    tenants = [t for t, _ in PRINCIPAL_TENANTS]
    weights = [w for _, w in PRINCIPAL_TENANTS]
    for i in range(requests):
        tenant = tenants[int(rng.choice(len(tenants), p=weights))]
        if tenant == "flood":
            own = [10_000_000 + 8 * i + j for j in range(8)]
            session = f"flood-{i % 200}"
        else:
            base = {"acme": 1_000, "zeta": 2_000, None: 3_000}[tenant]
            session = f"{tenant}-{int(rng.integers(0, 6))}"
            own = [base + 100 * int(session[-1]) + int(k) for k in rng.integers(0, 40, 4)]
        starts.append(len(keys))
        request = [1, 2, 3, *own]  # the system prompt first
        keys += request
        stamps += [0.5 * i] * len(request)
        ids += [[names.id(tenant), names.id(session if tenant else None), 0]] * len(request)
    return [
        AccessBatch(
            keys=np.asarray(keys, dtype=np.uint64),
            request_starts=np.asarray(starts, dtype=np.int64),
            timestamps=np.asarray(stamps),
            block_size=BLOCK_TOKENS,
            principals=np.asarray(ids, dtype=np.int32),
            principal_names=names,
        )
    ]


@functools.cache
def principals_snapshot() -> Snapshot:
    """`kvset analyze --by tenant,session --top-principals 6` of the multi-tenant trace."""
    from kvset.figures.base import ANALYZE
    from kvset.offline import InputSummary, analysis_snapshot, analyze_batches

    units = StreamUnits(BLOCK_TOKENS, "flag")
    result = analyze_batches(
        principal_batches(),
        InputSummary(TRACE_NAME, "jsonl", units),
        by=("tenant", "session"),
        top_principals=6,
    )
    result.analyze_seconds = 1.0  # not the time this run took: the screenshots stay the same
    return analysis_snapshot(result, SnapshotConfig(command=ANALYZE))


# Three data-parallel ranks behind one router that spreads requests round robin, each rank with its
# own pool of RANK_POOL_BLOCKS (--capacity), seen through one --events source with three endpoints.
RANKS = 3
RANK_POOL_BLOCKS = 3_000
RANK_SECONDS = 240.0


class ListSource:
    """A source that hands over the given updates, then finishes (kvset.sources.base.Source)."""

    kind = "events"
    units = StreamUnits(BLOCK_TOKENS, "event")

    def __init__(self, name: str, updates: Sequence) -> None:
        self.name = name
        self._updates = list(updates)

    def updates(self, stop):
        yield from self._updates

    def close(self) -> None:
        pass


def round_robin_ranks(batch: AccessBatch, first_request: int, ranks: int) -> AccessBatch:
    """The batch with each request's accesses marked with rank (request number mod `ranks`)."""
    starts = np.asarray(batch.request_starts, dtype=np.int64)
    lengths = np.diff(np.append(starts, len(batch)))
    request_rank = (first_request + np.arange(len(starts))) % ranks
    return dataclasses.replace(batch, rank=np.repeat(request_rank, lengths))


@functools.cache
def _ranks() -> Snapshot:
    from kvset.monitor import Monitor

    offset = NOW - 1.0 - RANK_SECONDS
    batches, requests = [], 0
    for batch in workload_batches(AgenticWorkload(WorkloadConfig(seed=11)), RANK_SECONDS, offset=offset):
        batches.append(round_robin_ranks(batch, requests, RANKS))
        requests += len(batch.request_starts)
    accesses = sum(len(b) for b in batches)
    endpoints = ", ".join(f"tcp://127.0.0.1:{5557 + r}" for r in range(RANKS))
    health = SourceHealth(
        source=f"events {EVENTS_URL} (+{RANKS - 1})",
        kind="events",
        connected=True,
        state="connected",
        last_data_at=NOW - 1.0,
        received=len(batches) * RANKS,
        accesses=accesses,
        notes=(HITS_REPORTED_NOTE,),
        details=(("endpoints", endpoints),),
        reports_hits=True,
    )
    config = SnapshotConfig(options={"capacity": RANK_POOL_BLOCKS})
    # the monitor's own feeding: the merged analyzer and one per rank
    monitor = Monitor(
        [ListSource(health.source, [SourceUpdate(accesses=b) for b in batches])],
        new_analyzer,
        SnapshotBuilder(config),
    )
    monitor.collect()
    return monitor.builder.build(
        monitor.analyzer,
        Readings(
            sources=(health,), accesses_per_second=accesses / RANK_SECONDS, ranks=monitor.rank_analyzers
        ),
        now=NOW,
    )


def ranks_snapshot(seq: int | None = None) -> Snapshot:
    """Three data-parallel ranks, round robin, 3,000 blocks each (--capacity): the pooling gain."""
    return _with_seq(_ranks(), seq)


@functools.cache
def _replay() -> Snapshot:
    batches = list(workload_batches(AgenticWorkload(WorkloadConfig(seed=5)), 240.0))
    accesses = sum(len(b) for b in batches)
    health = SourceHealth(
        source=f"replay {TRACE_NAME} (as fast as possible)",
        kind="replay",
        connected=False,
        state=f"finished: {accesses:,} accesses replayed",
        last_data_at=NOW - 3.0,
        received=len(batches),
        accesses=accesses,
        finished=True,
    )
    return fed_snapshot(batches, SnapshotConfig(), (health,))


def replay_snapshot(seq: int | None = None) -> Snapshot:
    """A plain trace file replayed to its end: no engine, no --capacity, no model."""
    return _with_seq(_replay(), seq)


def _mooncake_replayed(trace) -> SourceHealth:
    """The replay source's health at the end of the Mooncake trace."""
    return SourceHealth(
        source=f"replay {MOONCAKE_TRACE.name} (as fast as possible)",
        kind="replay",
        connected=False,
        state=f"finished: {trace.accesses:,} accesses replayed",
        last_data_at=NOW - 1.0,
        received=trace.lines,
        accesses=trace.accesses,
        notes=tuple(trace.notes),
        finished=True,
    )


@functools.cache
def _mooncake() -> Snapshot:
    trace = read_trace(MOONCAKE_TRACE)
    analyzer = Analyzer(units=trace.units)
    for batch in trace.batches(1 << 16):
        analyzer.feed_batch(batch)
    return SnapshotBuilder(SnapshotConfig()).build(
        analyzer, Readings(sources=(_mooncake_replayed(trace),)), now=NOW
    )


def mooncake_snapshot(seq: int | None = None) -> Snapshot:
    """The Mooncake FAST'25 trace (512-token blocks) replayed to its end: a real trace's curve."""
    return _with_seq(_mooncake(), seq)


OPT_CAPACITY_BLOCKS = 10_000  # --capacity of the --opt replay: the policy gap is read there


@functools.cache
def _mooncake_opt() -> Snapshot:
    trace = read_trace(MOONCAKE_TRACE)
    analyzer, stream = Analyzer(units=trace.units), AnalyzedStream(block_size=trace.block_size)
    for batch in trace.batches(1 << 16):  # as the monitor does with --opt: each batch analyzed and kept
        analyzer.feed_batch(batch)
        stream.add(batch)
    histogram = opt_histogram(*stream.arrays())
    opt = OptCurve(histogram.curve(), histogram.distinct_blocks)
    builder = SnapshotBuilder(SnapshotConfig(options={"capacity": OPT_CAPACITY_BLOCKS}))
    return builder.build(analyzer, Readings(sources=(_mooncake_replayed(trace),), opt=opt), now=NOW)


def mooncake_opt_snapshot(seq: int | None = None) -> Snapshot:
    """`kvset-top --replay mooncake.jsonl --opt --capacity 10000` at the end of the file: Belady MIN's
    curve of the whole trace beside LRU's, and the gap between them at the chosen capacity."""
    return _with_seq(_mooncake_opt(), seq)


def empty_snapshot(seq: int = 0) -> Snapshot:
    """Right after start: a replay that is still reading its trace and has delivered nothing."""
    health = SourceHealth(
        source=f"replay {TRACE_NAME} (1x)", kind="replay", connected=True, state="reading trace"
    )
    snap = fed_snapshot((), SnapshotConfig(), (health,))
    return dataclasses.replace(snap, seq=seq)


def first_accesses_snapshot() -> Snapshot:
    """The first blocks an engine stored, none of them re-read yet, with its pool known."""
    health = SourceHealth(
        source="events tcp://127.0.0.1:5557", kind="events", connected=True, state="connected"
    )
    engine = EngineReading(at=NOW - 1.0, pools=(EnginePool(12_000, 16),))
    batch = AccessBatch(np.arange(500, dtype=np.uint64), timestamps=np.full(500, NOW - 2.0), block_size=16)
    return fed_snapshot((batch,), SnapshotConfig(), (health,), engine=engine)


def metrics_only_snapshot(seq: int = 3) -> Snapshot:
    """Only the engine's /metrics: no block accesses, just its operating point and history."""
    readings = metrics_readings(NOW - 400.0, NOW - 3.0, 40_000.0)
    health = SourceHealth(
        source=f"metrics {METRICS_URL}",
        kind="metrics",
        connected=True,
        state="connected",
        last_data_at=readings[-1].at,
        received=len(readings),
    )
    snap = fed_snapshot((), SnapshotConfig(), (health,), engine=readings[-1], engine_history=tuple(readings))
    return dataclasses.replace(snap, seq=seq)


def fixed_clock(now: float = NOW) -> Callable[[], float]:
    return lambda: now


# -- one panel alone ---------------------------------------------------------------------------
def panel_app(panel_type: type, snapshot: Snapshot | None, view=None, theme: str = "dark", clock=None):
    """A small app holding one kvset-top panel, filled with `snapshot`, with the app's own style and
    breakpoints (so an 80x24 terminal gives the short, narrow forms): the panels' own tests use it."""
    from textual.app import App, ComposeResult

    from kvset_tui.app import APP_CSS, KvsetTopApp
    from kvset_tui.theming import load_theme
    from kvset_tui.view_state import ViewState
    from kvset_tui.widgets.demo_banner import DemoBanner
    from kvset_tui.widgets.status_line import StatusLine

    palette = load_theme(theme)
    ids = {
        "HitRateCurvePlot": "curve",
        "ThrashingPanel": "thrashing",
        "WorkingSetTable": "working-sets",
        "ReservePanel": "reserve",
        "TiersPanel": "tiers",
        "PrincipalsPanel": "principals",
        "EventsPanel": "events",
        "ChurnPanel": "churn",
        "StatusLine": "status",
        "DemoBanner": "banner",
    }

    class PanelApp(App[int]):
        CSS = APP_CSS
        HORIZONTAL_BREAKPOINTS = KvsetTopApp.HORIZONTAL_BREAKPOINTS
        VERTICAL_BREAKPOINTS = KvsetTopApp.VERTICAL_BREAKPOINTS

        def __init__(self) -> None:
            super().__init__(ansi_color=True if palette.monochrome else None)
            self.register_theme(palette.textual_theme())
            self.theme = palette.textual_name
            self.view = view or ViewState()
            kw = {"clock": clock or fixed_clock()} if panel_type is StatusLine else {}
            self.panel = panel_type(palette, id=ids[panel_type.__name__], **kw)

        def compose(self) -> ComposeResult:
            yield self.panel

        def on_mount(self) -> None:
            if panel_type not in (DemoBanner, StatusLine):
                self.panel.add_class("panel")
            self.show(snapshot)

        def show(self, new_snapshot: Snapshot | None, new_view=None) -> None:
            """Give the panel another snapshot (and view), as the app does on each frame or key."""
            self.snapshot = new_snapshot
            self.view = new_view or self.view
            self.panel.show(new_snapshot, self.view)

        def set_view(self, new_view) -> None:
            self.show(self.snapshot, new_view)

    return PanelApp()


async def wait_until(pilot, predicate, timeout: float = 5.0) -> None:
    """Let the app run until `predicate()` holds (then one more frame is painted), or fail."""
    for _ in range(int(timeout / 0.02)):
        if predicate():
            await pilot.pause()
            return
        await pilot.pause(0.02)
    raise AssertionError("condition not reached in time")


# -- fake monitors -------------------------------------------------------------------------------
class ScriptedMonitor:
    """Publishes the given snapshots one by one (every `interval` s), then idles until stopped."""

    def __init__(self, snapshots: Sequence[Snapshot], interval: float = 0.0) -> None:
        self.snapshots = list(snapshots)
        self.interval = interval
        self.published = 0
        self.stopped = threading.Event()

    def run(self, stop: threading.Event, publish: Callable[[Snapshot], None]) -> None:
        for snap in self.snapshots:
            if stop.is_set():
                break
            publish(snap)
            self.published += 1
            if self.interval:
                stop.wait(self.interval)
        stop.wait()
        self.stopped.set()


class ContinuousMonitor:
    """Keeps publishing fresh snapshots (a new object and seq each time) until stopped: analysis goes on."""

    def __init__(self, base: Snapshot, interval: float = 0.02) -> None:
        self.build = lambda seq: dataclasses.replace(base, seq=seq)
        self.interval = interval
        self.period = interval  # fixed: frames keep coming while the app has slowed `interval` (paused)
        self.published = 0

    def run(self, stop: threading.Event, publish: Callable[[Snapshot], None]) -> None:
        seq = 0
        while not stop.is_set():
            seq += 1
            publish(self.build(seq))
            self.published += 1
            stop.wait(self.period)


class CrashingMonitor:
    """Publishes one snapshot, then fails the way a bug in the pipeline would."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.interval = 0.0

    def run(self, stop: threading.Event, publish: Callable[[Snapshot], None]) -> None:
        publish(self.snapshot)
        raise RuntimeError("analyzer state corrupted")


def screen_text(app) -> str:
    """The current screen as plain text (what a user reads), from the running app's compositor."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)
