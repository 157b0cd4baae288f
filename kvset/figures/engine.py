"""The engine's own readings: its pool, hit rate, usage and requests as it reports them (/metrics,
KV events), the latest and their history. The figures that compare the curve with the engine read the
pool through kvset.figures.inputs.engine_pool_blocks; this figure only reports what the engine said.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from kvset.figures.base import Json, MetricFamily, MetricsView, OptionValues, Sizes, gauge
from kvset.figures.inputs import Figure, FigureInputs
from kvset.types import EngineReading


@dataclass(frozen=True)
class EngineState:
    """The engine's newest reading (None: it has reported nothing yet), its history of measured hit
    rates and usage (oldest first), and its pool in the analyzed stream's blocks."""

    reading: EngineReading | None
    history: tuple[EngineReading, ...]
    pool_blocks: int | None


def compute(inputs: FigureInputs, options: OptionValues) -> EngineState:
    return EngineState(inputs.engine, inputs.engine_history, inputs.engine_pool)


def reading_json(engine: EngineReading) -> Json:
    """What the engine says, its pools each in its own blocks (kvset.units.EnginePool)."""
    out = {k: v for k, v in vars(engine).items() if k != "pools"}
    out["pools"] = [dataclasses.asdict(p) for p in engine.pools] if engine.pools else None
    out["capacity_blocks"], out["capacity_tokens"] = engine.capacity_blocks, engine.capacity_tokens
    return out


def to_json(result: EngineState, sizes: Sizes) -> Json:
    r = result.reading
    return {
        "engine": reading_json(r) if r is not None else None,
        "engine_history": [
            {
                "at": h.at,
                "token_hit_rate": h.token_hit_rate,
                "kv_usage": h.kv_usage,
                "label": h.label,
                "stale": h.stale,
            }
            for h in result.history
            if h.token_hit_rate is not None or h.kv_usage is not None
        ],
    }


def metrics(result: EngineState, view: MetricsView) -> Iterable[MetricFamily]:
    if result.pool_blocks:
        yield gauge(
            "kvset_engine_capacity_blocks",
            "the engine's KV pool, in the analyzed stream's blocks",
            result.pool_blocks,
        )
    r = result.reading
    if r is not None and r.token_hit_rate is not None and not r.stale:
        yield gauge(
            "kvset_engine_token_hit_rate",
            "the prefix-cache token hit rate the engine measures",
            r.token_hit_rate,
        )


FIGURE: Figure[EngineState] = Figure(
    "engine", EngineState, compute, ("engine", "engine_history"), to_json, metrics=metrics
)
