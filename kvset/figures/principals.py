"""Whose cache is it: per principal (tenant, session, LoRA adapter; `--by`), its exact LRU curve
within the shared cache, its isolated curve (the cache it would need alone), its working sets and its
share of the hits. The curves are kvset.core.principals'; this figure reads them at the report's
capacities.

The hit share is read at the capacity the figures are judged at (the engine's pool, or --capacity),
else at the knee of the whole stream's curve. At that same capacity, an LRU of that many blocks
replayed over the stream (kvset.figures.principal_pool) gives the share of the resident cache each
principal holds (`cache_share`), who displaces whom and the pool's eviction age against the
sessions' gaps between turns: a model of the pool, which the outputs say.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvset.figures import curve as curve_figure
from kvset.figures import operating_point
from kvset.figures.base import (
    ANALYZE,
    SERVE,
    TOP,
    Json,
    MetricFamily,
    MetricSample,
    MetricsView,
    Option,
    OptionValues,
    Sizes,
    TextView,
)
from kvset.figures.inputs import Figure, FigureInputs, target_mode
from kvset.figures.principal_pool import Displacement, PrincipalPool, compute_pool, read_capacity
from kvset.figures.principal_window import BY_WINDOW, window_json, window_label, window_metrics
from kvset.figures.tables import NOT_KNOWN, count_cell, format_table, percent_cell
from kvset.figures.working_sets import WorkingSetRow, row_json, target_value, working_set_row
from kvset.quantities import age as span_text
from kvset.text import printable
from kvset.types import (
    DEFAULT_TOP_PRINCIPALS,
    OTHER_PRINCIPALS,
    PAST_NAME_CAP,
    PRINCIPAL_LEVELS,
)

if TYPE_CHECKING:  # the options are read by every command line: the analyzer is loaded by compute only
    from kvset.core.curve import HitRateCurve
    from kvset.core.principals import PrincipalStream
    from kvset.core.principals_window import WindowSpan

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
    commands=frozenset({ANALYZE, TOP, SERVE}),
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
    commands=frozenset({ANALYZE, TOP, SERVE}),
    argtype="positive_int",
    metavar="K",
)
PRINCIPAL_SERIES: Option[int] = Option(
    "--principal-series",
    "principal_series",
    DEFAULT_TOP_PRINCIPALS,
    f"with --by: principals exported with their own label per level, most accesses first (default "
    f"{DEFAULT_TOP_PRINCIPALS}, at most --top-principals); the rest are counted in "
    "kvset_principal_series_capped, so the series stay bounded however many sessions there are",
    commands=frozenset({ANALYZE, TOP, SERVE}),
    argtype="positive_int",
    metavar="K",
)
LABEL_CHARACTERS = 64  # a principal's name as a label value is cut to this many characters


HOG_RATIO = 2.0  # a principal holding this many times its share of the hits is flagged
HOG_FLOOR = 0.05  # ... when it holds at least this share of the cache (not a crumb held twice over)


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
    cache_share: float | None = None  # of the resident cache, in the pool replay (None: no replay)
    cache_blocks: float | None = None  # the blocks it held there on average
    turn_gap_seconds: float | None = None  # a session's median gap between its turns
    # the engine model's prediction for its requests: the model's replay of the pool, its query
    # blocks alone (None: no engine model, or (other))
    predicted_token_hit_rate: float | None = None
    past_names_cap: int | None = None  # the names' table's cap, when it stands for the names past it

    @property
    def holds_more_than_it_earns(self) -> bool:
        """Whether it holds at least twice the share of the cache it earns in hits (and 5 % or more
        of the cache): the principal to look at when the others' hit rate falls."""
        held, earned = self.cache_share, self.hit_share
        return held is not None and earned is not None and held >= HOG_FLOOR and held >= HOG_RATIO * earned


@dataclass(frozen=True, eq=False)
class Principals:
    rows: tuple[PrincipalRow, ...]
    levels: tuple[str, ...]
    share_capacity_blocks: int | None  # where hit_share is read
    share_capacity_source: str  # engine | chosen | knee | none
    accesses: int  # that the figures cover: the window's (the whole stream's without one)
    pool: PrincipalPool | None = None  # the pool replay at share_capacity_blocks (None: no capacity)
    series_cap: int = DEFAULT_TOP_PRINCIPALS  # --principal-series
    span: WindowSpan | None = None  # the accesses they cover (kvset.core.principals_window)

    @property
    def window_label(self) -> str | None:
        """What the figures cover where a window bounds them (None: the whole stream, which ended)."""
        return window_label(self.span)

    @property
    def window_short(self) -> str | None:
        """'last 4.2M accesses' once the window has dropped some (a panel's title); else None."""
        return window_label(self.span, short=True)

    def level_rows(self, level: str) -> list[PrincipalRow]:
        return [r for r in self.rows if r.level == level]

    def displacement(self, level: str) -> Displacement | None:
        if self.pool is None:
            return None
        return next((d for d in self.pool.displacement if d.level == level), None)


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
    if at and inputs.principal_pool is not None:
        at = read_capacity(inputs.principal_pool, at, source)
    # the hits of the accesses the principals cover (each level's rows cover them all, once)
    first_level = next(iter(inputs.principals.values()))
    total_hits = sum(s.curve.hits(at) for s in first_level) if at else 0
    span = first_level[0].span if first_level else None
    mode = inputs.targets.main_mode
    targets = inputs.targets.by_mode[mode]
    pool = inputs.engine_pool
    op = inputs.result(operating_point.FIGURE)
    model, model_pool = inputs.engine_model, None if op is None else op.model_pool_blocks
    replayed = None
    if at and inputs.principal_pool is not None:
        replayed = compute_pool(inputs.principal_pool, dict(inputs.principals), at, source)
    rows = []
    for level, streams in inputs.principals.items():
        for i, s in enumerate(streams):
            row = _row(s, capacities, at, total_hits, mode, targets, inputs.sizes, pool)
            if model is not None and model_pool is not None and s.principal_id is not None:
                predicted = model.principal_hit_rate(level, s.principal_id, model_pool)
                row = replace(row, predicted_token_hit_rate=predicted)
            if replayed is not None:
                gap = replayed.session_gaps.get(s.name) if level == "session" and s.principal_id else None
                row = replace(
                    row,
                    cache_share=replayed.shares[level][i],
                    cache_blocks=replayed.mean_blocks[level][i],
                    turn_gap_seconds=gap,
                )
            rows.append(row)
    cap = options.get(PRINCIPAL_SERIES)
    covered = whole.accesses if span is None else span.accesses
    return Principals(tuple(rows), tuple(inputs.principals), at, source, covered, replayed, cap, span)


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
        past_names_cap=s.past_names_cap,
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
        "cache_share": r.cache_share,
        "hit_share": r.hit_share,
        "cache_blocks": r.cache_blocks,
        "holds_more_than_it_earns": r.holds_more_than_it_earns,
        "turn_gap_seconds": r.turn_gap_seconds,
        "predicted_token_hit_rate": r.predicted_token_hit_rate,
    }


def pool_json(pool: PrincipalPool) -> Json:
    return {
        "capacity_blocks": pool.capacity_blocks,
        "capacity_source": pool.capacity_source,
        "model": pool.model,
        "eviction_age_seconds": pool.eviction_age_seconds,
        "sessions_with_turns": pool.sessions_with_turns,
        "sessions_next_turn_in_time": pool.sessions_next_turn_in_time,
        "displacement": [
            {
                "by": d.level,
                "names": list(d.names),
                "blocks": [list(row) for row in d.blocks],
                "others_missed_per_access": list(d.others_per_access),
                "top_displacer": d.top_displacer,
            }
            for d in pool.displacement
        ],
    }


def to_json(result: Principals, sizes: Sizes) -> Json:
    return {
        "principals": [principal_json(r, sizes) for r in result.rows],
        "principals_pool": None if result.pool is None else pool_json(result.pool),
        "principals_window": window_json(result.span, result.accesses),
    }


def text(result: Principals, view: TextView) -> list[str]:
    at = result.share_capacity_blocks
    where = f"at {at:,} blocks ({result.share_capacity_source})" if at else "(no capacity to read it at)"
    label = result.window_label
    out: list[str] = []
    if label is not None:
        out += ["", f"principals over {label}: every figure below is of these accesses alone"]
    for level in result.levels:
        rows = result.level_rows(level)
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
                    percent_cell(r.cache_share, 1) + (" !" if r.holds_more_than_it_earns else ""),
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
                    "cache held",
                    "working set alone",
                    "shared pool for it",
                ],
                cells,
            ),
        ]
        for r in rows:
            if r.past_names_cap is not None:
                out.append(
                    f"  {PAST_NAME_CAP}: the accesses of every {level} first named after the stream's "
                    f"table of {r.past_names_cap:,} names was full, together"
                )
        out += _predicted_text(rows)
        out += _displacement_text(result.displacement(level))
    out += _pool_text(result)
    return out


def _predicted_text(rows: Sequence[PrincipalRow], shown: int = 8) -> list[str]:
    """The engine model's prediction per principal (first `shown`), where there is an engine model."""
    named = [r for r in rows if r.predicted_token_hit_rate is not None][:shown]
    if not named:
        return []
    each = ", ".join(f"{printable(r.name)} {percent_cell(r.predicted_token_hit_rate)}" for r in named)
    return [f"  predicted token hit rate (a MODEL: the engine model's replay, each one's requests): {each}"]


def _displacement_text(d: Displacement | None, shown: int = 8) -> list[str]:
    """The matrix of the first `shown` principals (the JSON has them all) and the top displacer."""
    if d is None:
        return []
    names = [printable(n) for n in d.names[:shown]]
    cells = [[names[i], *(count_cell(v) for v in row[:shown])] for i, row in enumerate(d.blocks[:shown])]
    who = (
        "nobody displaced another"
        if d.top_displacer is None
        else f"top displacer: {printable(d.top_displacer)}, the most misses of the others per access of its own"
    )
    return [
        f"  who displaces whom by {d.level} (blocks the row evicted that the column then missed; {who}):",
        format_table(["evicted by \\ missed by", *names], cells),
    ]


def _pool_text(result: Principals) -> list[str]:
    pool = result.pool
    if pool is None:
        return ["  (cache held, displacement: no capacity to replay the pool at)"]
    out = [
        f"  cache held, displacement, eviction age: a model ({pool.model}, {pool.capacity_blocks:,} blocks, "
        f"{pool.capacity_source}); ! holds {HOG_RATIO:g}x or more the share of the hits it earns"
    ]
    age = pool.eviction_age_seconds
    if pool.sessions_with_turns:
        in_time = percent_cell(pool.sessions_next_turn_in_time, 1)
        when = "the pool evicts nothing" if age is None else f"eviction age {span_text(age)}"
        out.append(
            f"  next turn finds its prefix: {in_time} of {pool.sessions_with_turns:,} sessions "
            f"(median gap between turns under the {when})"
        )
    elif age is not None:
        out.append(f"  eviction age {span_text(age)} (no session with two turns to hold it against)")
    return out


def label_name(name: str) -> str:
    """A principal's name as a label value: control characters escaped, cut to LABEL_CHARACTERS."""
    shown = printable(name)
    return shown if len(shown) <= LABEL_CHARACTERS else shown[: LABEL_CHARACTERS - 3] + "..."


def metrics(result: Principals, view: MetricsView) -> Iterable[MetricFamily]:
    """Per principal, the top `series_cap` of each level only (and (other)): the series count is
    bounded by the cap, never by the number of principals in the stream."""
    sets, shares, rates, capped = [], [], [], []
    for level in result.levels:
        rows = result.level_rows(level)
        named = [r for r in rows if r.isolated_curve is not None]
        kept = named[: result.series_cap] + [r for r in rows if r.isolated_curve is None]
        members = sum(r.members for r in rows)
        capped.append(MetricSample((level,), members - sum(r.members for r in kept)))
        for r in kept:
            key = (level, label_name(r.name))
            sets += [
                MetricSample((*key, target_value(w.target)), w.capacity_blocks)
                for w in r.working_sets
                if w.capacity_blocks is not None
            ]
            if r.cache_share is not None:
                shares.append(MetricSample(key, r.cache_share))
            if result.share_capacity_blocks:
                rates.append(MetricSample(key, r.hit_rate_at_share))
    labels = ("by", "principal")
    yield MetricFamily(
        "kvset_principal_working_set_blocks",
        "gauge",
        "smallest LRU capacity at which the principal alone reaches the target (its isolated curve)",
        (*labels, "target"),
        tuple(sets),
    )
    yield MetricFamily(
        "kvset_principal_cache_share",
        "gauge",
        "share of the resident cache the principal holds (a model: an LRU of the pool's size replayed)",
        labels,
        tuple(shares),
    )
    yield MetricFamily(
        "kvset_principal_hit_rate",
        "gauge",
        "the principal's block hit rate in the shared cache at the pool's size",
        labels,
        tuple(rates),
    )
    yield from window_metrics(result.span, result.accesses)
    yield MetricFamily(
        "kvset_principal_series_capped",
        "gauge",
        "principals of the report past --principal-series, exported in no series of their own",
        ("by",),
        tuple(capped),
    )


FIGURE: Figure[Principals] = Figure(
    "principals",
    Principals,
    compute,
    ("principals", "principals_pool", "principals_window"),
    to_json,
    text=text,
    metrics=metrics,
    options=(BY, TOP_PRINCIPALS, PRINCIPAL_SERIES, BY_WINDOW),
)
