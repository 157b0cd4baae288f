"""The figures: one module per figure, each its options, its result, its compute and its outputs.

`FIGURES` lists them in the order the reports show them. The snapshot builder computes each once
(kvset.snapshot.builder), the JSON and text reports and the exporter loop over them, and the command
line takes their options from them (kvset.cli.figure_flags). A figure that needs another's result asks
the inputs for it (kvset.figures.inputs.FigureInputs.result), so the order here is only the reports'.
Adding a figure touches its module, one line here and its widget: see docs/contributing.md.
"""

from __future__ import annotations

from typing import Any

from kvset.figures import (
    churn,
    curve,
    engine,
    hybrid_reserve,
    kv_cache_groups,
    operating_point,
    policy_gap,
    principals,
    ranks,
    reserve,
    thrashing,
    tiers,
    working_sets,
)
from kvset.figures.inputs import Figure

FIGURES: tuple[Figure[Any], ...] = (
    curve.FIGURE,
    working_sets.FIGURE,
    policy_gap.FIGURE,
    thrashing.FIGURE,
    operating_point.FIGURE,
    hybrid_reserve.FIGURE,
    kv_cache_groups.FIGURE,
    reserve.FIGURE,
    tiers.FIGURE,
    ranks.FIGURE,
    churn.FIGURE,
    principals.FIGURE,
    engine.FIGURE,
)

__all__ = ["FIGURES", "Figure"]
