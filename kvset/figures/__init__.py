"""The figures: one module per figure, each its options, its result, its compute and its outputs.

`FIGURES` lists them in the order the reports show them. The snapshot builder computes each once
(kvset.snapshot.builder), the JSON and text reports and the exporter loop over them, and the command
line takes their options from them (kvset.cli.figure_flags). Adding a figure touches its module, one
line here and its widget: see docs/contributing.md.
"""

from __future__ import annotations

from typing import Any

from kvset.figures.inputs import Figure

FIGURES: tuple[Figure[Any], ...] = ()

__all__ = ["FIGURES", "Figure"]
