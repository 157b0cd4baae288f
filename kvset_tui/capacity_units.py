"""Capacities in the display unit the user picked (blocks, tokens, GiB), read off the snapshot's
geometry. (The formatters of every unit are in kvset.quantities.)"""

from __future__ import annotations

import math

from kvset.api import EngineState, Snapshot, Unit
from kvset.api import quantities as fmt

UNIT_SHORT = {"blocks": "blk", "tokens": "tok", "GiB": "GiB"}


def hit_unit(unit: str) -> Unit:
    """Which hit rate goes with a capacity unit: engines report token hit rates, bytes are per token."""
    return "blocks" if unit == "blocks" else "tokens"


def to_unit(blocks: float | None, snapshot: Snapshot, unit: str) -> float | None:
    if blocks is None or (isinstance(blocks, float) and math.isnan(blocks)):
        return None
    if unit == "blocks":
        return float(blocks)
    if unit == "tokens":
        return float(blocks) * snapshot.block_tokens if snapshot.block_tokens else None
    if unit == "GiB":
        return float(blocks) * snapshot.bytes_per_block / fmt.GIB if snapshot.bytes_per_block else None
    raise ValueError(f"unknown unit {unit!r}")


def capacity_text(blocks: float | None, snapshot: Snapshot, unit: str) -> str:
    """A capacity with its unit: '12.3k blk', '197k tok', '61.5 GiB'."""
    value = to_unit(blocks, snapshot, unit)
    if value is None:
        return fmt.MISSING
    if unit == "GiB":
        return fmt.format_gib(value * fmt.GIB, significant=fmt.SHORT_DIGITS)
    return f"{fmt.count(round(value))} {UNIT_SHORT[unit]}"


def axis_value_text(value: float, unit: str) -> str:
    """A tick label on the capacity axis (the axis title carries the unit)."""
    if unit == "GiB":
        return fmt.format_gib(value * fmt.GIB, significant=fmt.SHORT_DIGITS, with_unit=False)
    return fmt.compact(value)


def engine_pool(snapshot: Snapshot) -> int | None:
    """The engine's pool in the analyzed stream's blocks (None: it reports none)."""
    engine = snapshot.get(EngineState)
    return engine.pool_blocks if engine is not None else None
