"""A hybrid model's KV cache groups, each with the exact LRU curve and working sets of its own accesses.

The groups and their kinds are learned from the engine's events (kv_cache_spec_kind,
kv_cache_spec_sliding_window). A full-attention group reads every block of a request; a
sliding-window group only the blocks before the hit point its window reaches, then the blocks the
request adds; a mamba group its state block at the hit point, then the same (kvset.engine_model.kv_groups).
Each group's curve is exact, all time, over those accesses; its working sets are in its blocks and
tokens, and in bytes where a model geometry gives them (all groups then at the stream's bytes per block:
the events do not say how many layers each group has).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvset.figures.base import Json, OptionValues, Sizes, TextView
from kvset.figures.curve import CurveRow, curve_rows, default_capacities, row_json
from kvset.figures.inputs import Figure, FigureInputs, target_mode
from kvset.figures.tables import percent_cell
from kvset.figures.working_sets import WorkingSetRow, working_set_row
from kvset.figures.working_sets import row_json as working_set_json
from kvset.types import KvCacheGroup

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    from kvset.core.curve import HitRateCurve


@dataclass(frozen=True)
class GroupFigures:
    group: KvCacheGroup
    accesses: int
    curve: tuple[CurveRow, ...]
    working_sets: tuple[WorkingSetRow, ...]


@dataclass(frozen=True)
class KvCacheGroups:
    groups: tuple[GroupFigures, ...]


def group_figures(group: KvCacheGroup, curve: HitRateCurve, inputs: FigureInputs) -> GroupFigures:
    rows = []
    for mode, targets in inputs.targets.by_mode.items():
        tm = target_mode(mode)
        rows += [working_set_row(curve, "all", t, tm, inputs.sizes, inputs.engine_pool) for t in targets]
    return GroupFigures(
        group, curve.accesses, tuple(curve_rows(curve, default_capacities(curve).tolist())), tuple(rows)
    )


def compute(inputs: FigureInputs, options: OptionValues) -> KvCacheGroups | None:
    if not inputs.kv_cache_groups:
        return None
    return KvCacheGroups(tuple(group_figures(g, c, inputs) for g, c in inputs.kv_cache_groups.values()))


def to_json(result: KvCacheGroups, sizes: Sizes) -> Json:
    return {
        "kv_cache_groups": [
            {
                "group_idx": g.group.group_idx,
                "kind": g.group.kind,
                "sliding_window": g.group.sliding_window,
                "block_size": g.group.block_size,
                "counted": g.group.counted,
                "accesses": g.accesses,
                "curve": [row_json(r, sizes) for r in g.curve],
                "working_sets": [working_set_json(r, sizes) for r in g.working_sets],
            }
            for g in result.groups
        ]
    }


def text(result: KvCacheGroups, view: TextView) -> list[str]:
    lines = ["KV cache groups (hybrid model; each group's own accesses, exact, all time):"]
    for g in result.groups:
        window = f", window {g.group.sliding_window:,} tokens" if g.group.sliding_window else ""
        sets = ", ".join(
            f"{percent_cell(r.target)}: {'not reached' if r.capacity_blocks is None else f'{r.capacity_blocks:,}'}"
            for r in g.working_sets
            if r.mode == view.mode
        )
        lines.append(
            f"  group {g.group.group_idx} ({g.group.kind or 'kind not said'}{window})"
            + (" [the stream's]" if g.group.counted else "")
            + f": {g.accesses:,} accesses; working sets (blocks) {sets}"
        )
    return lines


FIGURE: Figure[KvCacheGroups] = Figure(
    "kv_cache_groups", KvCacheGroups, compute, ("kv_cache_groups",), to_json, text=text
)
