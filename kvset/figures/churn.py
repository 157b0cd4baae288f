"""Page churn: per time slot over the recent past, the accesses, first-time blocks, re-references and
accesses beyond the horizon per second, the hit rate at the engine's pool (or --capacity) of each
slot's accesses, and the main target's working set of each coarse slot.

The slots are the analyzer's own (kvset.core.slots): 1 s for the last 5 minutes, 60 s for the
working set. Rates are per second of the stream's clock (a replay's own time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvset.figures.base import Json, OptionValues, Sizes
from kvset.figures.inputs import Figure, FigureInputs, target_mode

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    import numpy as np

CHURN_SECONDS = 300.0  # the fine series' reach


@dataclass(frozen=True, eq=False)
class ChurnSeries:
    """Per-slot series over the recent past, oldest first; rates are per second."""

    slot_seconds: float
    end_time: float  # timestamp (trace or wall) of the end of the last slot
    accesses: np.ndarray
    first_time: np.ndarray
    rereferences: np.ndarray  # accesses that were hits inside the horizon
    beyond_horizon: np.ndarray
    hit_rate_at_capacity: np.ndarray  # block hit rate at `capacity_blocks`; nan where no access
    capacity_blocks: int | None
    working_set_main: np.ndarray  # blocks for the main target per series step; nan where not reached
    working_set_step_seconds: float = 60.0

    def __len__(self) -> int:
        return len(self.accesses)


def compute(inputs: FigureInputs, options: OptionValues) -> ChurnSeries | None:
    import numpy as np

    slots = inputs.slots
    if slots is None:
        return None
    capacity = inputs.capacity.blocks
    fine = slots.slot_series(min(CHURN_SECONDS, slots.fine_span_seconds))
    w = fine.width
    acc = fine.accesses
    if capacity:
        with np.errstate(invalid="ignore", divide="ignore"):
            hit_rate = np.where(acc > 0, fine.block_hits_at(capacity) / np.maximum(acc, 1), np.nan)
    else:
        hit_rate = np.full(len(acc), np.nan)
    coarse = slots.slot_series(slots.coarse_span_seconds, coarse=True)
    ws_main = np.full(len(coarse), np.nan)
    main = inputs.targets
    for k in np.flatnonzero(coarse.accesses).tolist():
        ws = coarse.curve(k, k + 1).working_set(main.main_target, mode=target_mode(main.main_mode))
        ws_main[k] = np.nan if ws is None else ws
    return ChurnSeries(
        slot_seconds=w,
        end_time=fine.end_time,
        accesses=acc / w,
        first_time=fine.first_time / w,
        rereferences=fine.rereferences / w,
        beyond_horizon=fine.beyond_horizon / w,
        hit_rate_at_capacity=hit_rate,
        capacity_blocks=capacity,
        working_set_main=ws_main,
        working_set_step_seconds=coarse.width,
    )


def _finite(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def to_json(churn: ChurnSeries, sizes: Sizes) -> Json:
    return {
        "churn": {
            "slot_seconds": churn.slot_seconds,
            "end_time": churn.end_time,
            "accesses_per_second": [float(v) for v in churn.accesses],
            "first_time_per_second": [float(v) for v in churn.first_time],
            "rereferences_per_second": [float(v) for v in churn.rereferences],
            "beyond_horizon_per_second": [float(v) for v in churn.beyond_horizon],
            "hit_rate_at_capacity": [_finite(v) for v in churn.hit_rate_at_capacity],
            "capacity_blocks": churn.capacity_blocks,
            "working_set_main": [_finite(v) for v in churn.working_set_main],
            "working_set_step_seconds": churn.working_set_step_seconds,
        }
    }


FIGURE: Figure[ChurnSeries] = Figure("churn", ChurnSeries, compute, ("churn",), to_json)
