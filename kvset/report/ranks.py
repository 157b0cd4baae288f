"""The data-parallel ranks of a snapshot: JSON keys (`ranks`, `pooling`) and the text lines of
`kvset-top --once`, read back from the JSON as the tier lines are."""

from __future__ import annotations

from kvset.quantities import points, target_label
from kvset.report.tables import (
    NOT_KNOWN,
    curve_rows,
    default_capacities,
    format_table,
    percent_cell,
    snapshot_working_set_json,
)
from kvset.snapshot import MISSES_ONLY, Pooling, Snapshot
from kvset.snapshot.model import RANK_POOL_SOURCES


def pooling_how(p: Pooling) -> str:
    """How the pooling figures were computed, in one sentence."""
    caps = sorted(set(p.rank_capacity_blocks.values()))
    each = f"{caps[0]:,} blocks each" if len(caps) == 1 else "their own pools"
    scope = (
        " The curves are of the ranks' misses (their KV events report no hits): this is a shared tier "
        "behind the ranks' own caches."
        if p.curve_scope == MISSES_ONLY
        else ""
    )
    return (
        f"shared: the merged stream of all {p.ranks} ranks on one LRU pool of {p.capacity_blocks:,} blocks "
        f"(the sum of the ranks' pools); separate: each rank on its own LRU pool ({each}: "
        f"{RANK_POOL_SOURCES[p.capacity_source]}), its hits added up over all accesses; gain = shared - "
        f"separate.{scope}"
    )


def pooling_json(snapshot: Snapshot) -> dict:
    p = snapshot.pooling
    if p is None:
        return {"computed": False, "reason": snapshot.pooling_note}
    bt = snapshot.block_tokens
    return {
        "computed": True,
        "ranks": p.ranks,
        "capacity_source": p.capacity_source,
        "rank_capacity_blocks": {str(rank): blocks for rank, blocks in p.rank_capacity_blocks.items()},
        "capacity_blocks": p.capacity_blocks,
        "capacity_tokens": p.capacity_blocks * bt if bt else None,
        "shared_block_hit_rate": p.shared_hit_rate["blocks"],
        "separate_block_hit_rate": p.separate_hit_rate["blocks"],
        "block_gain": p.gain("blocks"),
        "shared_token_hit_rate": p.shared_hit_rate["tokens"],
        "separate_token_hit_rate": p.separate_hit_rate["tokens"],
        "token_gain": p.gain("tokens"),
        "curve_scope": p.curve_scope,
        "how": pooling_how(p),
    }


def ranks_json(snapshot: Snapshot) -> dict:
    """`ranks` (each rank's own all-time curve, working sets and pool) and `pooling`; {} without ranks.
    Every rank's curve is read at the merged curve's report capacities, so the rows line up."""
    s = snapshot
    if not s.ranks:
        return {}
    bt, bpb = s.block_tokens, s.bytes_per_block
    merged = s.curve("all")
    caps = default_capacities(merged, knee=merged.knee())
    total = s.totals.accesses
    ranks = []
    for v in s.ranks:
        c = v.curve
        pool = None
        if v.pool_blocks is not None:
            pool = {
                "capacity_blocks": v.pool_blocks,
                "capacity_tokens": v.pool_blocks * bt if bt else None,
                "source": v.pool_source,
                "block_hit_rate": c.hit_rate(v.pool_blocks, "blocks"),
                "token_hit_rate": c.hit_rate(v.pool_blocks, "tokens"),
            }
        ranks.append(
            {
                "rank": v.rank,
                "accesses": v.accesses,
                "tokens": c.tokens,
                "share_of_accesses": v.accesses / total if total else None,
                "distinct_blocks": v.distinct_blocks,
                "attainable_hit_rate": c.attainable("blocks"),
                "attainable_token_hit_rate": c.attainable("tokens"),
                "pool": pool,
                "curve": curve_rows(c, caps, bt, bpb) if c.accesses else [],
                "working_sets": [snapshot_working_set_json(r) for r in v.working_sets],
            }
        )
    return {"ranks": ranks, "pooling": pooling_json(s)}


def rank_lines(report: dict, mode: str) -> list[str]:
    """The text of the keys ranks_json made: one row per rank (its working sets for `mode`), then the
    pooling gain."""
    ranks = report["ranks"]
    targets = [w["target"] for w in ranks[0]["working_sets"] if w["mode"] == mode]
    headers = (
        ["rank", "accesses", "share", "attainable"]
        + [target_label(t) for t in targets]
        + ["pool", "hit at pool"]
    )
    cells = []
    for r in ranks:
        ws = {w["target"]: w["capacity_blocks"] for w in r["working_sets"] if w["mode"] == mode}
        pool = r["pool"]
        cells.append(
            [
                str(r["rank"]),
                f"{r['accesses']:,}",
                percent_cell(r["share_of_accesses"], 1),
                percent_cell(r["attainable_hit_rate"]),
            ]
            + ["not reached" if ws[t] is None else f"{ws[t]:,}" for t in targets]
            + (
                [f"{pool['capacity_blocks']:,}", percent_cell(pool["block_hit_rate"])]
                if pool
                else [NOT_KNOWN, NOT_KNOWN]
            )
        )
    lines = [
        f"ranks (data-parallel, each its own cache; all time; working sets in blocks, {mode}):",
        format_table(headers, cells),
    ]
    p = report["pooling"]
    if not p["computed"]:
        lines.append(f"pooling: not computed: {p['reason']}")
        return lines
    lines.append(
        f"pooling: one shared pool of {p['capacity_blocks']:,} blocks hits {percent_cell(p['shared_block_hit_rate'])} of "
        f"blocks, the {p['ranks']} ranks' own pools together {percent_cell(p['separate_block_hit_rate'])}: gain "
        f"{points(p['block_gain'], 2, NOT_KNOWN)} (tokens {percent_cell(p['shared_token_hit_rate'])} against "
        f"{percent_cell(p['separate_token_hit_rate'])}: {points(p['token_gain'], 2, NOT_KNOWN)})"
    )
    lines.append(f"  {p['how']}")
    return lines
