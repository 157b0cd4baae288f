"""Whose cache is it: per principal (tenant, session, LoRA adapter; `--by`), its exact LRU curve
within the shared cache, its isolated curve (the cache it would need alone), its working sets and its
share of the hits. The curves are kvset.core.principals'; this figure reads them at the report's
capacities.

The hit share is read at the capacity the figures are judged at (the engine's pool, or --capacity),
else at the knee of the whole stream's curve. The share of the resident cache a principal holds
(`cache_share`) needs the engine model's replay or the engine's stores and removes: it is null here
until those are attributed too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvset.figures import curve as curve_figure
from kvset.figures.base import ANALYZE, Json, Option, OptionValues, Sizes, TextView
from kvset.figures.inputs import Figure, FigureInputs, target_mode
from kvset.figures.tables import NOT_KNOWN, count_cell, format_table, percent_cell
from kvset.figures.working_sets import WorkingSetRow, row_json, working_set_row
from kvset.text import printable
from kvset.types import DEFAULT_TOP_PRINCIPALS, OTHER_PRINCIPALS, PRINCIPAL_LEVELS

if TYPE_CHECKING:  # the options are read by every command line: the analyzer is loaded by compute only
    from kvset.core.curve import HitRateCurve
    from kvset.core.principals import PrincipalStream

BY_CHOICES = {"tenant": "tenant", "session": "session", "adapter": "adapter", "lora": "adapter"}


def parse_levels(text: str) -> tuple[str, ...]:
    """`tenant,session` (or the flag given twice) -> the levels, each once, in the order given."""
    levels = []
    for part in (p.strip() for p in text.split(",")):
        if part not in BY_CHOICES:
            raise ValueError(f"--by takes {', '.join(PRINCIPAL_LEVELS)}, got {printable(part)!r}")
        levels.append(BY_CHOICES[part])
    return tuple(dict.fromkeys(levels))


BY: Option[tuple[str, ...]] = Option(
    "--by",
    "principals_by",
    (),
    "attribute the accesses to principals: tenant, session or adapter (trace fields tenant, session, "
    "lora); several as tenant,session or the flag again. Each principal's curve in the shared cache, "
    "its curve alone, its working sets and its share of the hits",
    commands=frozenset({ANALYZE}),
    parse=parse_levels,
    metavar="LEVEL",
    repeat=True,
)
TOP_PRINCIPALS: Option[int] = Option(
    "--top-principals",
    "top_principals",
    DEFAULT_TOP_PRINCIPALS,
    f"with --by: principals reported one by one, most accesses first (default {DEFAULT_TOP_PRINCIPALS}); "
    "the rest are summed into (other)",
    commands=frozenset({ANALYZE}),
    argtype="positive_int",
    metavar="K",
)


@dataclass(frozen=True, eq=False)
class PrincipalRow:
    """One principal read at the report's capacities. working_sets: of its isolated curve (the cache
    it needs alone); shared_working_sets: the shared pool at which it reaches the same targets."""

    level: str
    name: str
    accesses: int
    members: int
    curve: tuple[curve_figure.CurveRow, ...]
    isolated_curve: tuple[curve_figure.CurveRow, ...] | None  # None for (other): see kvset.core.principals
    working_sets: tuple[WorkingSetRow, ...]
    shared_working_sets: tuple[WorkingSetRow, ...]
    hit_share: float | None
    hit_rate_at_share: float  # its block hit rate in the shared cache at share_capacity_blocks
    isolated_hit_rate_at_share: float | None


@dataclass(frozen=True, eq=False)
class Principals:
    rows: tuple[PrincipalRow, ...]
    levels: tuple[str, ...]
    share_capacity_blocks: int | None  # where hit_share is read
    share_capacity_source: str  # engine | chosen | knee | none
    accesses: int  # of the whole stream


def _share_capacity(inputs: FigureInputs, curves: curve_figure.Curves) -> tuple[int | None, str]:
    if inputs.capacity.blocks:
        return inputs.capacity.blocks, inputs.capacity.source
    knee = curves.window("all").knee_capacity()
    return (knee, "knee") if knee else (None, "none")


def compute(inputs: FigureInputs, options: OptionValues) -> Principals | None:
    if not inputs.principals:
        return None
    curves = inputs.result(curve_figure.FIGURE)
    assert curves is not None
    whole = inputs.curves["all"]
    capacities = curves.window("all").capacities
    at, source = _share_capacity(inputs, curves)
    total_hits = whole.hits(at) if at else 0
    mode = inputs.targets.main_mode
    targets = inputs.targets.by_mode[mode]
    pool = inputs.engine_pool
    rows = []
    for streams in inputs.principals.values():
        for s in streams:
            rows.append(_row(s, capacities, at, total_hits, mode, targets, inputs.sizes, pool))
    return Principals(tuple(rows), tuple(inputs.principals), at, source, whole.accesses)


def _row(
    s: PrincipalStream,
    capacities: Sequence[int],
    at: int | None,
    total_hits: int,
    mode: str,
    targets: Sequence[float],
    sizes: Sizes,
    pool: int | None,
) -> PrincipalRow:
    tm = target_mode(mode)
    alone = s.isolated_curve

    def sets(c: HitRateCurve) -> tuple[WorkingSetRow, ...]:
        return tuple(working_set_row(c, "all", t, tm, sizes, pool) for t in targets)

    return PrincipalRow(
        level=s.level,
        name=s.name,
        accesses=s.accesses,
        members=s.members,
        curve=tuple(curve_figure.curve_rows(s.curve, capacities)),
        isolated_curve=None if alone is None else tuple(curve_figure.curve_rows(alone, capacities)),
        working_sets=() if alone is None else sets(alone),
        shared_working_sets=sets(s.curve),
        hit_share=s.curve.hits(at) / total_hits if at and total_hits else None,
        hit_rate_at_share=s.curve.hit_rate(at) if at else 0.0,
        isolated_hit_rate_at_share=alone.hit_rate(at) if at and alone is not None else None,
    )


def principal_json(r: PrincipalRow, sizes: Sizes) -> Json:
    return {
        "by": r.level,
        "name": r.name,
        "accesses": r.accesses,
        "curve": [curve_figure.row_json(c, sizes) for c in r.curve],
        "isolated_curve": None
        if r.isolated_curve is None
        else [curve_figure.row_json(c, sizes) for c in r.isolated_curve],
        "working_sets": [
            {**row_json(w, sizes), "shared_capacity_blocks": shared.capacity_blocks}
            for w, shared in zip(r.working_sets, r.shared_working_sets, strict=False)
        ],
        "cache_share": None,  # not computed yet: see the module docstring
        "hit_share": r.hit_share,
    }


def to_json(result: Principals, sizes: Sizes) -> Json:
    return {"principals": [principal_json(r, sizes) for r in result.rows]}


def text(result: Principals, view: TextView) -> list[str]:
    at = result.share_capacity_blocks
    where = f"at {at:,} blocks ({result.share_capacity_source})" if at else "(no capacity to read it at)"
    out: list[str] = []
    for level in result.levels:
        rows = [r for r in result.rows if r.level == level]
        cells = []
        for r in rows:
            ws = r.working_sets[0].capacity_blocks if r.working_sets else None
            shared = r.shared_working_sets[0].capacity_blocks if r.shared_working_sets else None
            name = f"{OTHER_PRINCIPALS} x{r.members:,}" if r.isolated_curve is None else printable(r.name)
            cells.append(
                [
                    name,
                    f"{r.accesses:,}",
                    percent_cell(r.accesses / result.accesses if result.accesses else None, 1),
                    percent_cell(r.hit_rate_at_share) if at else NOT_KNOWN,
                    percent_cell(r.isolated_hit_rate_at_share),
                    percent_cell(r.hit_share, 1),
                    count_cell(ws),
                    count_cell(shared),
                ]
            )
        first = rows[0].working_sets[0].target if rows and rows[0].working_sets else None
        target = NOT_KNOWN if first is None else f"{first:g}"
        out += [
            "",
            f"principals by {level} (hit rates and hit share {where}; working sets for target {target}):",
            format_table(
                [
                    "principal",
                    "accesses",
                    "share",
                    "hit rate shared",
                    "hit rate alone",
                    "hit share",
                    "working set alone",
                    "shared pool for it",
                ],
                cells,
            ),
        ]
    out.append("  (cache share held: not computed yet; it needs the engine's resident blocks per principal)")
    return out


FIGURE: Figure[Principals] = Figure(
    "principals",
    Principals,
    compute,
    ("principals",),
    to_json,
    text=text,
    options=(BY, TOP_PRINCIPALS),
)
