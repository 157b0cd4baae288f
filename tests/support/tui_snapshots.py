"""Fixed snapshots and fake monitors for the kvset-top tests (no analyzer, no clock, no threads racing).

The snapshots are built directly from the contract dataclasses with fixed, realistic numbers:
a curve shaped like agent traffic (a shared prefix reused at short distances, conversation
histories at medium ones, a long tail), at a demo-like ingest rate of about a million accesses/s.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence

import numpy as np

from kvset.core.curve import HitRateCurve
from kvset.rejects import Rejection
from kvset.snapshot import (
    ChurnSeries,
    Reserve,
    Snapshot,
    Totals,
    WorkingSetRow,
)
from kvset.snapshot.builder import thrashing_at
from kvset.types import EngineReading, SourceHealth, TimelineEvent

NOW = 1_767_225_600.0  # fixed "now" (2026-01-01T00:00:00Z) for ages in screenshots
BLOCK_TOKENS = 16
LLAMA70B_BYTES_PER_TOKEN = 327_680  # 80 layers x 8 KV heads x 128 dims x 2 (K, V) x 2 bytes
HORIZON = 1_000_000


def agent_curve(
    accesses: int,
    attainable: float,
    max_capacity: int,
    *,
    scales: Sequence[tuple[float, float]] = ((0.45, 40.0), (0.35, 1_500.0), (0.20, 12_000.0)),
    grid: bool = False,
    horizon: int = HORIZON,
    window_seconds: float | None = None,
    token_share: float = 0.985,
    bump: tuple[float, float, float] | None = None,
) -> HitRateCurve:
    """A hit-rate curve whose hits rise as a mix of exponentials of capacity and reach exactly
    `attainable * accesses` at `max_capacity` (a few scales: prefix, history, tail)."""
    if grid:
        caps = np.unique(np.round(np.geomspace(1, max_capacity, 48)).astype(np.int64))
    else:
        caps = np.arange(1, max_capacity + 1, dtype=np.int64)
    shape = np.zeros(len(caps))
    for weight, scale in scales:
        shape += weight * (1.0 - np.exp(-caps / scale))
    if bump is not None:  # a mass of reuse at one distance: what a pool just too small thrashes on
        weight, centre, width = bump
        shape += weight / (1.0 + np.exp(-(caps - centre) / width))
    shape /= shape[-1]
    total_hits = int(round(attainable * accesses))
    block_hits = np.floor(shape * total_hits).astype(np.int64)
    block_hits[-1] = total_hits
    tokens = accesses * BLOCK_TOKENS
    token_hits = np.floor(block_hits * BLOCK_TOKENS * token_share).astype(np.int64)
    return HitRateCurve(
        capacities=caps,
        block_hits=block_hits,
        token_hits=token_hits,
        accesses=accesses,
        tokens=tokens,
        horizon=horizon,
        exact=not grid,
        window_seconds=window_seconds,
    )


def _rows(
    curves: dict[str, HitRateCurve],
    targets: dict[str, tuple[float, ...]],
    bytes_per_block: int | None,
    pool_blocks: int | None,
) -> tuple[WorkingSetRow, ...]:
    rows = []
    for window, curve in curves.items():
        for mode, ts in targets.items():
            for t in ts:
                blocks = curve.working_set(t, mode)  # type: ignore[arg-type]
                trend = tuple(
                    None if blocks is None else int(blocks * f) for f in (0.82, 0.88, 0.93, 0.97, 1.0, 1.04)
                )
                rows.append(
                    WorkingSetRow(
                        target=t,
                        mode=mode,
                        window=window,
                        capacity_blocks=blocks,
                        capacity_tokens=None if blocks is None else blocks * BLOCK_TOKENS,
                        capacity_bytes=None if blocks is None or not bytes_per_block else blocks * bytes_per_block,
                        trend_blocks=trend,
                        fits_pool=None if blocks is None or pool_blocks is None else blocks <= pool_blocks,
                        exact=curve.exact,
                    )
                )
    return tuple(rows)


_thrashing = thrashing_at  # the library's own figures


def _churn(n: int, rate: float, capacity: int | None, ws_main: float, phase_at: int | None = None) -> ChurnSeries:
    i = np.arange(n, dtype=float)
    wobble = 1.0 + 0.08 * np.sin(i / 3.0) + 0.04 * np.cos(i / 1.7)
    slot = 5.0
    accesses = np.round(rate * slot * wobble)
    first_share = 0.12 + 0.03 * np.sin(i / 5.0)
    if phase_at is not None:
        first_share[phase_at:] += 0.06  # a phase change: new users bring new prefixes
    first = np.round(accesses * first_share)
    beyond = np.round(accesses * 0.01)
    reref = accesses - first - beyond
    hit = reref / accesses * 0.86
    ws = ws_main * (1.0 + 0.1 * np.sin(i / 8.0))
    if phase_at is not None:
        ws[phase_at:] *= 1.35
    ws = ws[:: max(1, n // 20)]
    return ChurnSeries(
        slot_seconds=slot,
        end_time=NOW - 0.4,
        accesses=accesses,
        first_time=first,
        rereferences=reref,
        beyond_horizon=beyond,
        hit_rate_at_capacity=hit,
        capacity_blocks=capacity,
        working_set_main=np.round(ws),
        working_set_step_seconds=60.0,
    )


TARGETS = {"coverage": (0.95, 0.99, 0.999), "absolute": (0.50, 0.70, 0.90)}


def demo_snapshot(seq: int = 42, *, phase_changed: bool = True) -> Snapshot:
    """Like the built-in demo: ~1M accesses/s, no engine, no model (so no GiB and no reserve)."""
    accesses = 61_234_567
    curves = {
        "all": agent_curve(accesses, 0.83, 60_000),
        "1m": agent_curve(60_800_000 // 60 * 1, 0.78, 40_000, grid=True, window_seconds=60.0),
        "5m": agent_curve(5_000_000, 0.81, 52_000, grid=True, window_seconds=300.0),
        "1h": agent_curve(accesses, 0.83, 60_000, grid=True, window_seconds=3600.0),
    }
    rows = _rows(curves, TARGETS, None, None)
    main = curves["all"].working_set(0.95, "coverage") or 1
    thrash = {w: _thrashing(c, main, "working-set", w) for w, c in curves.items()}
    health = SourceHealth(
        source="demo: agent workload",
        kind="demo",
        connected=True,
        state="running (phase 2: compaction)" if phase_changed else "running",
        last_data_at=NOW - 0.4,
        received=12_240,
        accesses=accesses,
    )
    return Snapshot(
        seq=seq,
        taken_at=NOW - 0.4,
        data_time=NOW - 0.4,
        horizon=HORIZON,
        block_tokens=BLOCK_TOKENS,
        bytes_per_block=None,
        totals=Totals(
            accesses=accesses,
            tokens=accesses * BLOCK_TOKENS,
            requests=81_020,
            first_time=7_702_113,
            rereferences=52_911_337,
            beyond_horizon=621_117,
            tracked_blocks=HORIZON,
        ),
        curves=curves,
        working_sets=rows,
        churn=_churn(60, 1_020_000, main, main, phase_at=40 if phase_changed else None),
        thrashing=thrash,
        reserve=None,
        engine=None,
        sources=(health,),
        events=(TimelineEvent(at=NOW - 100, kind="phase", text="compaction: histories shortened"),),
        accesses_per_second=1_018_422.0,
        demo=True,
        targets=TARGETS,
    )


def empty_snapshot(seq: int = 0) -> Snapshot:
    """Right after start: a source that has delivered nothing yet."""
    empty = HitRateCurve(
        capacities=np.zeros(0, dtype=np.int64),
        block_hits=np.zeros(0, dtype=np.int64),
        token_hits=np.zeros(0, dtype=np.int64),
        accesses=0,
        tokens=0,
        horizon=HORIZON,
    )
    churn = ChurnSeries(
        slot_seconds=5.0,
        end_time=NOW,
        accesses=np.zeros(0),
        first_time=np.zeros(0),
        rereferences=np.zeros(0),
        beyond_horizon=np.zeros(0),
        hit_rate_at_capacity=np.zeros(0),
        capacity_blocks=None,
        working_set_main=np.zeros(0),
    )
    return Snapshot(
        seq=seq,
        taken_at=NOW,
        data_time=0.0,
        horizon=HORIZON,
        block_tokens=None,
        bytes_per_block=None,
        totals=Totals(0, 0, 0, 0, 0, 0, 0),
        curves={"all": empty},
        working_sets=(),
        churn=churn,
        thrashing={},
        reserve=None,
        engine=None,
        sources=(
            SourceHealth(
                source="replay traces/agent.jsonl", kind="replay", connected=True, state="waiting for data"
            ),
        ),
        events=(),
        accesses_per_second=0.0,
        targets=TARGETS,
    )


ENGINE_POOL_BLOCKS = 17_000  # an 80 GiB-class pool of 16-token blocks of a 70B model (~83 GiB)


def engine_snapshot(seq: int = 7) -> Snapshot:
    """A vLLM engine with a model: operating point, reserve, thrashing at its pool, and a failing
    /metrics source with rejected input."""
    accesses = 8_402_112
    bytes_per_block = BLOCK_TOKENS * LLAMA70B_BYTES_PER_TOKEN
    scales = ((0.40, 60.0), (0.30, 5_000.0), (0.10, 30_000.0))
    bump = (0.45, 19_000.0, 700.0)  # many re-reads just beyond the 17k-block pool: it thrashes
    curves = {
        "all": agent_curve(accesses, 0.79, 90_000, scales=scales, bump=bump),
        "5m": agent_curve(1_900_000, 0.77, 80_000, scales=scales, bump=bump, grid=True, window_seconds=300.0),
    }
    rows = _rows(curves, TARGETS, bytes_per_block, ENGINE_POOL_BLOCKS)
    thrash = {w: _thrashing(c, ENGINE_POOL_BLOCKS, "engine", w) for w, c in curves.items()}
    ws95 = curves["all"].working_set(0.95, "coverage")
    engine = EngineReading(
        at=NOW - 2.0,
        capacity_blocks=ENGINE_POOL_BLOCKS,
        capacity_tokens=ENGINE_POOL_BLOCKS * BLOCK_TOKENS,
        block_size=BLOCK_TOKENS,
        token_hit_rate=0.581,
        hit_rate_window_s=None,
        kv_usage=0.97,
        running_requests=48,
        label="vllm /metrics",
    )
    events_src = SourceHealth(
        source="events tcp://127.0.0.1:5557",
        kind="events",
        connected=True,
        state="connected",
        last_data_at=NOW - 1.2,
        received=93_114,
        accesses=accesses,
        notes=("engine reports misses only: the curve counts stores, not hits",),
    )
    metrics_src = SourceHealth(
        source="metrics http://127.0.0.1:8000/metrics",
        kind="metrics",
        connected=False,
        state="down: connection refused",
        last_data_at=NOW - 94.0,
        received=31,
        rejected=(
            Rejection("unparsable exposition line", 3, ("line 17: 'vllm:kv_cache_usage_perc{' ...",)),
            Rejection("unknown metric family", 1, ()),
        ),
    )
    reserve = Reserve(
        model="Qwen3-Next-80B-A3B (hybrid)",
        full_attention_bytes_per_token=LLAMA70B_BYTES_PER_TOKEN,
        full_attention_bytes_per_block=bytes_per_block,
        working_set_target=0.95,
        working_set_bytes=None if ws95 is None else ws95 * bytes_per_block,
        hybrid_reserve_bytes=48 * 301_989_888,
        concurrency=48,
        concurrency_source="measured",
        pool_bytes=ENGINE_POOL_BLOCKS * bytes_per_block,
        notes=("linear-attention state: 288 MiB per running request (from config.json)",),
    )
    history = engine_history(engine, 30)
    return Snapshot(
        seq=seq,
        taken_at=NOW - 1.2,
        data_time=NOW - 1.2,
        horizon=HORIZON,
        block_tokens=BLOCK_TOKENS,
        bytes_per_block=bytes_per_block,
        totals=Totals(
            accesses=accesses,
            tokens=accesses * BLOCK_TOKENS,
            requests=21_004,
            first_time=1_764_443,
            rereferences=6_637_669,
            beyond_horizon=0,
            tracked_blocks=402_118,
        ),
        curves=curves,
        working_sets=rows,
        churn=_churn(48, 28_000, ENGINE_POOL_BLOCKS, float(ws95 or 0)),
        thrashing=thrash,
        reserve=reserve,
        engine=engine,
        sources=(events_src, metrics_src),
        events=(),
        accesses_per_second=27_941.0,
        model="Qwen3-Next-80B-A3B",
        targets=TARGETS,
        engine_history=history,
    )


def engine_history(latest: EngineReading, n: int) -> tuple[EngineReading, ...]:
    """The engine's readings every 10 s, its hit rate sagging as the pool starts to thrash."""
    out = []
    for i in range(n):
        back = n - 1 - i
        out.append(
            dataclasses.replace(
                latest,
                at=latest.at - 10.0 * back,
                token_hit_rate=round(latest.token_hit_rate + 0.004 * back - (0.01 * ((i * 7) % 3) if back else 0.0), 4),
                kv_usage=round(latest.kv_usage - 0.004 * back, 4),
            )
        )
    return tuple(out)


def metrics_only_snapshot(seq: int = 3) -> Snapshot:
    """Only the engine's /metrics: no block accesses, just its operating point and history."""
    base = empty_snapshot(seq)
    engine = EngineReading(
        at=NOW - 3.0, capacity_tokens=ENGINE_POOL_BLOCKS * BLOCK_TOKENS, block_size=BLOCK_TOKENS,
        token_hit_rate=0.62, kv_usage=0.91, running_requests=31, label="vllm /metrics",
    )  # fmt: skip
    metrics = SourceHealth(
        source="metrics http://127.0.0.1:8000/metrics", kind="metrics", connected=True, state="polling every 1 s",
        last_data_at=NOW - 3.0, received=120,
    )  # fmt: skip
    return dataclasses.replace(
        base, block_tokens=BLOCK_TOKENS, engine=engine, engine_history=engine_history(engine, 40),
        sources=(metrics,),
    )  # fmt: skip


def fixed_clock(now: float = NOW) -> Callable[[], float]:
    return lambda: now


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
        width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
        record=True, legacy_windows=False, safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)
