"""Belady MIN beside LRU in the reports: the `opt` and `policy_gap` JSON objects and their text.

`kvset analyze --opt` and `kvset-top --once` of a replay with `--opt` print them the same way; the
figures come from kvset.core.policy_gap, computed once.
"""

from __future__ import annotations

from kvset.core.curve import HitRateCurve
from kvset.core.policy_gap import PolicyGap
from kvset.quantities import points, target_label, times
from kvset.report.tables import NOT_KNOWN, format_table, percent_cell

OPT_METHOD = "Belady MIN at every capacity from one pass: OPT stack distances (Mattson's priority stack)"
WHERE = {"engine": "the engine's pool", "chosen": "--capacity", "knee": "the knee"}


def opt_json(curve: HitRateCurve, distinct_blocks: int, seconds: float | None = None) -> dict:
    """What the MIN curve is: exact at every capacity, up to the blocks it ever holds."""
    return {
        "policy": "Belady MIN: on a miss with a full cache, evict the block used again farthest ahead",
        "method": OPT_METHOD,
        "exact": True,
        "distinct_blocks": distinct_blocks,
        "max_stack_distance": curve.max_distance(),
        "attainable_hit_rate": curve.attainable("blocks"),
        "attainable_token_hit_rate": curve.attainable("tokens"),
        "seconds": None if seconds is None else round(seconds, 4),
    }


def policy_gap_json(gap: PolicyGap, mode: str | None = None) -> dict:
    """The gap's figures as JSON: per target (of `mode`, or every mode) and at each capacity read."""
    capacities = gap.capacities if mode is None else gap.for_mode(mode)
    return {
        "working_sets": [
            {
                "target": g.target,
                "mode": g.mode,
                "lru_capacity_blocks": g.lru_blocks,
                "opt_capacity_blocks": g.opt_blocks,
                "capacity_gap_blocks": g.gap_blocks,
                "capacity_ratio": g.ratio,
            }
            for g in capacities
        ],
        "hit_rates": [
            {
                "capacity_blocks": h.capacity_blocks,
                "where": h.where,
                "lru_block_hit_rate": h.lru_block_hit_rate,
                "opt_block_hit_rate": h.opt_block_hit_rate,
                "block_gap": h.block_gap,
                "lru_token_hit_rate": h.lru_token_hit_rate,
                "opt_token_hit_rate": h.opt_token_hit_rate,
                "token_gap": h.token_gap,
                "beyond_horizon": h.beyond_horizon,
            }
            for h in gap.hit_rates
        ],
    }


def _blocks(n: int | None) -> str:
    return "not reached" if n is None else f"{n:,}"


def policy_gap_lines(gap: dict, mode: str | None = None) -> list[str]:
    """The gap (from policy_gap_json) as text: a table of the capacities per target, then a line per
    capacity the hit rates were read at. mode: only that target mode's rows."""
    rows = [r for r in gap["working_sets"] if mode is None or r["mode"] == mode]
    lines = ["policy gap: LRU against Belady MIN (a policy with foresight) on the same accesses:"]
    if rows:
        cells = [
            [
                target_label(r["target"], r["mode"]),
                _blocks(r["lru_capacity_blocks"]),
                _blocks(r["opt_capacity_blocks"]),
                NOT_KNOWN if r["capacity_gap_blocks"] is None else f"{r['capacity_gap_blocks']:,}",
                times(r["capacity_ratio"], 2, NOT_KNOWN),
            ]
            for r in rows
        ]
        lines.append(format_table(["target", "LRU blocks", "MIN blocks", "LRU - MIN", "LRU / MIN"], cells))
    for h in gap["hit_rates"]:
        where = WHERE.get(h["where"], h["where"])
        at = (
            f"at the knee, {h['capacity_blocks']:,} blocks"
            if h["where"] == "knee"
            else f"at {h['capacity_blocks']:,} blocks ({where})"
        )
        bound = " (LRU beyond its horizon: a lower bound)" if h["beyond_horizon"] else ""
        lines.append(
            f"  {at}: block hit rate LRU {percent_cell(h['lru_block_hit_rate'])}, MIN "
            f"{percent_cell(h['opt_block_hit_rate'])} ({points(h['block_gap'], 2)}); token hit rate LRU "
            f"{percent_cell(h['lru_token_hit_rate'])}, MIN {percent_cell(h['opt_token_hit_rate'])} "
            f"({points(h['token_gap'], 2)}){bound}"
        )
    if not any(h["where"] != "knee" for h in gap["hit_rates"]):
        lines.append("  (give --capacity BLOCKS for the gap at your cache's size)")
    return lines
