"""The cache-tier rows of a report (`--tiers`): JSON keys and text lines, the same for `kvset analyze`
and `kvset-top --once`."""

from __future__ import annotations

from kvset.core.tiers import TierPlan
from kvset.quantities import GIB, target_label
from kvset.report.tables import NOT_KNOWN, format_table, gib_cell, percent_cell

TIER_MODE_MEANING = {
    "exclusive": "a block lives in one tier, demoted on eviction: one LRU cut into consecutive tiers",
    "inclusive": "each tier holds a copy of the tiers above it and sees every access",
}


def _sizes(blocks: int | None, block_tokens: int | None, bytes_per_block: int | None) -> dict:
    row: dict[str, float | None] = {
        "capacity_blocks": blocks,
        "capacity_tokens": blocks * block_tokens if blocks is not None and block_tokens else None,
    }
    if bytes_per_block:
        row["capacity_bytes"] = blocks * bytes_per_block if blocks is not None else None
        row["capacity_gib"] = blocks * bytes_per_block / GIB if blocks is not None else None
    return row


def tiers_json(plan: TierPlan, block_tokens: int | None, bytes_per_block: int | None) -> dict:
    """`tier_mode`, `tiers` (in tier order, each the share of all accesses it serves), `tier_misses`
    and, when asked, `next_tier`: the keys a report adds with --tiers."""
    tiers = []
    for t in plan.tiers:
        row = {
            "tier": t.index,
            **_sizes(t.capacity_blocks, block_tokens, bytes_per_block),
            "reach_blocks": t.reach_blocks,
            "block_hit_rate": t.block_hit_rate,
            "token_hit_rate": t.token_hit_rate,
        }
        if not t.exact:
            row["beyond_horizon"] = True  # a lower bound: the tier ends beyond the exact part of the curve
        tiers.append(row)
    out = {
        "tier_mode": plan.mode,
        "tiers": tiers,
        "tier_misses": {"block_miss_rate": plan.miss_block_rate, "token_miss_rate": plan.miss_token_rate},
    }
    n = plan.next_tier
    if n is not None:
        out["next_tier"] = {
            "target": n.target,
            "mode": n.mode,
            "reached": n.reached,
            **_sizes(n.capacity_blocks, block_tokens, bytes_per_block),
            "reach_blocks": n.reach_blocks,
            "block_hit_rate": n.block_hit_rate,
            "token_hit_rate": n.token_hit_rate,
        }
    return out


def tier_lines(report: dict) -> list[str]:
    """The text of the keys tiers_json made (read back from the report, as the text reports are)."""
    with_gib = any("capacity_bytes" in t for t in report["tiers"])
    headers = (
        ["tier", "blocks", "tokens"] + (["GiB"] if with_gib else []) + ["block hit rate", "token hit rate"]
    )
    cells = []
    for t in report["tiers"]:
        line = [
            str(t["tier"]),
            f"{t['capacity_blocks']:,}",
            f"{t['capacity_tokens']:,}" if t["capacity_tokens"] else NOT_KNOWN,
        ]
        if with_gib:
            line.append(gib_cell(t.get("capacity_bytes")))
        mark = " (lower bound: beyond the horizon)" if t.get("beyond_horizon") else ""
        cells.append(line + [percent_cell(t["block_hit_rate"]) + mark, percent_cell(t["token_hit_rate"])])
    misses = report["tier_misses"]
    cells.append(
        ["miss", "", ""]
        + ([""] if with_gib else [])
        + [percent_cell(misses["block_miss_rate"]), percent_cell(misses["token_miss_rate"])]
    )
    mode = report["tier_mode"]
    lines = [
        f"tiers ({mode}: {TIER_MODE_MEANING[mode]}; shares of all accesses):",
        format_table(headers, cells),
    ]
    n = report.get("next_tier")
    if n is not None:
        goal = f"{target_label(n['target'])} ({n['mode']})"
        if not n["reached"]:
            lines.append(f"next tier for {goal}: not reached inside the horizon")
        elif n["capacity_blocks"] == 0:
            lines.append(
                f"next tier for {goal}: none needed, the tiers above reach it "
                f"(block hit rate {percent_cell(n['block_hit_rate'])})"
            )
        else:
            size = f"{n['capacity_blocks']:,} blocks" + (
                f" ({gib_cell(n['capacity_bytes'])})" if "capacity_bytes" in n else ""
            )
            lines.append(
                f"smallest next tier for {goal}: {size}; all tiers then hit "
                f"{percent_cell(n['block_hit_rate'])} of blocks, {percent_cell(n['token_hit_rate'])} of tokens"
            )
    return lines
