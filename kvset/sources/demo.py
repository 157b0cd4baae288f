"""The built-in demo: the agentic workload played live, with phase changes so the working set moves."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from kvset.sources.base import IDLE_TICK, Source
from kvset.sources.clock import REAL_CLOCK, Clock
from kvset.types import EngineReading, SourceHealth, SourceUpdate, TimelineEvent
from kvset.units import EnginePool, StreamUnits
from kvset.workload import DEMO_PHASES, AgenticWorkload, Phase, WorkloadConfig

# The demo's pretend engine pool: small enough that the peak phase thrashes.
DEMO_POOL_BLOCKS = 10_240
DEMO_CYCLE_SECONDS = 480.0
# A paced demo's tick (Source.pace): a quarter of the snapshot interval, at most this, so a resumed
# display has fresh data within a second.
PACED_TICK_MAX = 1.0


def repeating_phases(
    phases: tuple[Phase, ...] = DEMO_PHASES, cycle: float = DEMO_CYCLE_SECONDS, cycles: int = 200
) -> tuple[Phase, ...]:
    """The demo's phases, repeated every `cycle` seconds of trace time."""
    return tuple(
        Phase(p.at + k * cycle, p.name, p.concurrency, p.compact_histories)
        for k in range(cycles)
        for p in phases
    )


class DemoSource(Source):
    kind = "demo"

    def __init__(
        self,
        speed: float | None = 1.0,
        duration: float | None = None,
        config: WorkloadConfig | None = None,
        pool_blocks: int | None = DEMO_POOL_BLOCKS,
        max_batch: int = 1 << 15,
        block_size_given: bool = False,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        """speed: trace seconds per wall second (None: as fast as the analyzer takes it);
        duration: stop after this much trace time (None: run until stopped); block_size_given: the
        workload's block size (config.block_size) is the user's --block-size."""
        self.speed = speed
        self.duration = duration
        self.clock = clock
        self.config = config or WorkloadConfig()
        self.units = StreamUnits(self.config.block_size, "flag" if block_size_given else "default")
        self.pool_blocks = pool_blocks
        self.max_batch = max_batch
        self.name = "demo: built-in agentic workload" + (f" at {speed:g}x" if speed and speed != 1 else "")
        self.address = "demo"
        self.tick = IDLE_TICK

    def pace(self, seconds: float) -> None:
        # nobody looks more often than every `seconds`: fewer, larger batches (each wake-up of the
        # generator and the analyzer costs more than the accesses it brings)
        self.tick = min(max(IDLE_TICK, seconds / 4), PACED_TICK_MAX)

    def _health(self, wl: AgenticWorkload, delivered: int, finished: bool = False) -> SourceHealth:
        return SourceHealth(
            source=self.name,
            kind=self.kind,
            connected=not finished,
            state="finished" if finished else f"running: {wl.phase_name}",
            last_data_at=self.clock.wall(),
            received=wl.requests_made,
            accesses=delivered,
            notes=("DEMO: synthetic agent sessions, not an engine; the pool is a pretend one",),
            finished=finished,
            details=(("phase", wl.phase_name), ("sessions", str(wl.concurrency))),
        )

    def updates(self, stop: threading.Event) -> Iterator[SourceUpdate]:
        wl = AgenticWorkload(self.config, repeating_phases())
        delivered = 0
        engine = None
        if self.pool_blocks:
            engine = EngineReading(
                at=self.clock.wall(),
                pools=(EnginePool(self.pool_blocks, self.config.block_size),),  # a pretend one: no null block
                label="demo pool (pretend)",
            )
        yield SourceUpdate(health=self._health(wl, 0), engine=engine, units=self.units)
        start = self.clock.monotonic()
        phase = None
        while not stop.is_set():
            if self.duration is not None and wl.now >= self.duration:
                break
            until = None
            if self.speed:
                until = (self.clock.monotonic() - start) * self.speed
                if wl.now >= until:
                    # One batch a tick: the display shows a frame a second, and each wake-up costs the
                    # generator and the analyzer more than the accesses it brings.
                    self.clock.wait(stop, self.tick)
                    continue
            if self.duration is not None:
                until = self.duration if until is None else min(until, self.duration)
            batch = wl.batch(self.max_batch, until=until)
            events = ()
            if wl.phase_name != phase:
                phase = wl.phase_name
                events = (TimelineEvent(self.clock.wall(), "phase", f"demo phase: {phase}"),)
            delivered += len(batch)
            yield SourceUpdate(
                accesses=batch if len(batch) else None, health=self._health(wl, delivered), events=events
            )
        yield SourceUpdate(health=self._health(wl, delivered, finished=True))
