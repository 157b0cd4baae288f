"""The hit-rate curve: in every window, the hit rates at the report's capacities, the knee, the
attainable hit rate; with --opt Belady MIN's hit rates beside LRU's on the all-time rows.

The rows are at --capacities (kvset analyze: blocks, or sizes in bytes with a model) or at 16
log-spaced capacities plus the knee (HitRateCurve.knee: past it, doubling the capacity gains less than
a point). An estimate's rows carry their error bounds (2 standard errors). Text, JSON and CSV show the
same rows. The exporter gets the hit rates at its own --capacities and at the engine's pool, and the
all-time stack distances as a histogram.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from kvset.core import ERROR_Z, KNEE_MIN_GAIN
from kvset.figures.base import (
    ANALYZE,
    Json,
    MetricFamily,
    MetricSample,
    MetricsView,
    Option,
    OptionValues,
    Sizes,
    TextView,
)
from kvset.figures.inputs import Figure, FigureInputs
from kvset.figures.tables import NOT_KNOWN, count_cell, format_table, gib_cell, percent_cell
from kvset.quantities import duration, parse_sizes, plus_minus_points, points

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    import numpy as np

    from kvset.core.curve import HitRateCurve, Unit

UNITS: tuple[Unit, ...] = ("blocks", "tokens")
ROWS = 16  # log-spaced rows of a curve's table, besides the knee


@dataclass(frozen=True)
class GivenSizes:
    """A list of sizes as given on the command line: all in blocks or all in bytes, and its text."""

    sizes: tuple[int, ...]
    unit: str  # blocks | bytes
    text: str

    @classmethod
    def parse(cls, text: str, what: str) -> GivenSizes:
        sizes, unit = parse_sizes(text, what)
        return cls(sizes, unit, text)

    def check_bytes(self, flag: str, bytes_from: str | None) -> None:
        """Sizes in bytes need the KV bytes per block: `bytes_from` names the flags that give them (None:
        they are known)."""
        if self.unit == "bytes" and bytes_from is not None:
            raise ValueError(
                f"{flag} {self.text}: sizes in bytes need the KV bytes per block; give {bytes_from}"
            )

    def blocks(self, flag: str, bytes_per_block: int | None) -> tuple[int, ...]:
        """In whole blocks once the bytes per block are known; a ValueError when one holds none."""
        blocks = in_blocks(self.sizes, self.unit, bytes_per_block)
        if blocks is None or 0 in blocks:
            raise ValueError(
                f"{flag} {self.text}: every {'capacity' if flag == '--capacities' else 'tier'} must hold "
                f"at least one block of {bytes_per_block or 0:,} B"
            )
        return blocks


CAPACITIES: Option[GivenSizes | None] = Option(
    "--capacities",
    "capacities",
    None,
    "capacities for the table: blocks (1000,10000) or, with --model, bytes (40GiB,80GB) (default: "
    f"{ROWS} log-spaced, and the knee)",
    commands=frozenset({ANALYZE}),
    parse=lambda text: GivenSizes.parse(text, "capacity"),
    metavar="C1,C2,..",
)


def check(options: OptionValues, bytes_from: str | None) -> None:
    given = options.get(CAPACITIES)
    if given is not None:
        given.check_bytes(CAPACITIES.flag, bytes_from)


def in_blocks(sizes: Sequence[int], unit: str, bytes_per_block: int | None) -> tuple[int, ...] | None:
    """Sizes in blocks: as given (unit "blocks"), or the whole blocks of `bytes_per_block` that fit in
    each size in bytes (a size smaller than one block holds 0). None while the bytes per block are not
    known yet (a live stream whose block size has not been seen)."""
    if unit == "blocks":
        return tuple(int(s) for s in sizes)
    if unit != "bytes":
        raise ValueError(f"sizes are in blocks or bytes, got {unit!r}")
    if not bytes_per_block:
        return None
    return tuple(int(s) // int(bytes_per_block) for s in sizes)


def capacities_in_blocks(options: OptionValues, sizes: Sizes) -> tuple[int, ...] | None:
    """--capacities in blocks (None: not given); a ValueError when one holds no whole block."""
    given = options.get(CAPACITIES)
    if given is None:
        return None
    return tuple(sorted(set(given.blocks(CAPACITIES.flag, sizes.bytes_per_block))))


@dataclass(frozen=True)
class CurveRow:
    """The curve at one capacity: both hit rates, an estimate's error bounds, Belady MIN's hit rates."""

    capacity_blocks: int
    block_hit_rate: float
    token_hit_rate: float
    block_hit_rate_error: float | None = None  # 2 standard errors (estimates only)
    token_hit_rate_error: float | None = None
    opt_block_hit_rate: float | None = None  # with --opt, all-time rows
    opt_token_hit_rate: float | None = None
    beyond_horizon: bool = False  # past the horizon: the hit rates are lower bounds


def curve_rows(
    curve: HitRateCurve, capacities: Iterable[int], opt: HitRateCurve | None = None
) -> list[CurveRow]:
    """One row per capacity; with `opt` (Belady MIN's curve of the same accesses) MIN's hit rates too."""
    caps = [int(c) for c in capacities]
    rates = [curve.hit_rates(caps, u) for u in UNITS]
    optr = [opt.hit_rates(caps, u) for u in UNITS] if opt is not None else None
    errors = [curve.hit_rate_stderrs(caps, u) for u in UNITS]
    known = errors[0] is not None and errors[1] is not None
    return [
        CurveRow(
            capacity_blocks=c,
            block_hit_rate=float(rates[0][i]),
            token_hit_rate=float(rates[1][i]),
            block_hit_rate_error=ERROR_Z * float(errors[0][i]) if known and errors[0] is not None else None,
            token_hit_rate_error=ERROR_Z * float(errors[1][i]) if known and errors[1] is not None else None,
            opt_block_hit_rate=float(optr[0][i]) if optr is not None else None,
            opt_token_hit_rate=float(optr[1][i]) if optr is not None else None,
            beyond_horizon=c > curve.horizon,
        )
        for i, c in enumerate(caps)
    ]


def default_capacities(curve: HitRateCurve, n: int = ROWS, knee: int | None = None) -> np.ndarray:
    """The capacities every report's curve table shows: n log-spaced ones, plus the knee."""
    import numpy as np

    caps = curve.log_capacities(n)
    return caps if knee is None else np.union1d(caps, [knee])


@dataclass(frozen=True, eq=False)
class WindowCurve:
    """One window's curve, its knee and its report rows. The knee and the rows are read off the curve
    when first asked for (a live monitor builds a snapshot a second and shows one window), then kept."""

    label: str
    curve: HitRateCurve
    opt: HitRateCurve | None = None  # Belady MIN's curve beside it (all time, --opt)
    given: tuple[int, ...] | None = None  # the rows' capacities (--capacities); None: the default ones

    def knee_capacity(self, unit: Unit = "blocks") -> int | None:
        """HitRateCurve.knee of the curve, by its block or its token hit rate (None: no knee)."""
        return self._knees[unit]

    @cached_property
    def _knees(self) -> dict[Unit, int | None]:
        c = self.curve
        return {u: c.knee(u) if c.accesses else None for u in UNITS}

    @cached_property
    def knee(self) -> CurveRow | None:
        at = self.knee_capacity()
        return curve_rows(self.curve, [at], self.opt)[0] if at is not None else None

    @cached_property
    def rows(self) -> tuple[CurveRow, ...]:
        if not self.curve.accesses:
            return ()
        caps = (
            self.given
            if self.given is not None
            else default_capacities(self.curve, knee=self.knee_capacity())
        )
        return tuple(curve_rows(self.curve, caps, self.opt))

    @property
    def capacities(self) -> list[int]:
        return [r.capacity_blocks for r in self.rows]


@dataclass(frozen=True, eq=False)
class Curves:
    """The curve of every window (kvset.figures.inputs.WINDOWS), and the engine's pool the exporter reads them at too."""

    windows: dict[str, WindowCurve]
    engine_pool_blocks: int | None = None

    def window(self, label: str = "all") -> WindowCurve:
        return self.windows.get(label) or self.windows["all"]

    def curve(self, label: str = "all") -> HitRateCurve:
        return self.window(label).curve


def compute(inputs: FigureInputs, options: OptionValues) -> Curves:
    try:
        capacities = capacities_in_blocks(options, inputs.sizes)
    except ValueError:  # checked by the command before the stream is read; never on a live stream
        capacities = None
    opt = inputs.opt.curve if inputs.opt is not None else None
    windows = {
        label: WindowCurve(label, c, opt if label == "all" else None, capacities)
        for label, c in inputs.curves.items()
    }
    return Curves(windows, inputs.engine_pool)


KNEE_MEANING = (
    f"past it, doubling the capacity gains less than {points(KNEE_MIN_GAIN, 0).lstrip('+')} of block hit rate"
)


def row_json(row: CurveRow, sizes: Sizes) -> Json:
    """A curve row as the reports give it; MIN's rates, the error bounds and beyond_horizon only where
    they apply (--opt, an estimate, a capacity past the horizon)."""
    out: Json = {
        **sizes.json(row.capacity_blocks),
        "block_hit_rate": row.block_hit_rate,
        "token_hit_rate": row.token_hit_rate,
    }
    if row.opt_block_hit_rate is not None:
        out["opt_block_hit_rate"] = row.opt_block_hit_rate
        out["opt_token_hit_rate"] = row.opt_token_hit_rate
    if row.block_hit_rate_error is not None:
        out["block_hit_rate_error"] = row.block_hit_rate_error
        out["token_hit_rate_error"] = row.token_hit_rate_error
    if row.beyond_horizon:
        out["beyond_horizon"] = True
    return out


def knee_json(window: WindowCurve, sizes: Sizes) -> Json | None:
    if window.knee is None:
        return None
    return {**row_json(window.knee, sizes), "min_gain": KNEE_MIN_GAIN, "meaning": KNEE_MEANING}


def window_json(w: WindowCurve, sizes: Sizes) -> Json:
    c = w.curve
    return {
        "seconds": c.window_seconds,
        "exact": c.exact,
        "estimate": c.estimate,
        "accesses": c.accesses,
        "tokens": c.tokens,
        "attainable_hit_rate": c.attainable("blocks"),
        "attainable_token_hit_rate": c.attainable("tokens"),
        "curve": [row_json(r, sizes) for r in w.rows],
        "knee": knee_json(w, sizes),
    }


def to_json(result: Curves, sizes: Sizes) -> Json:
    every = result.window("all")
    c = every.curve
    windows = {label: window_json(w, sizes) for label, w in result.windows.items()}
    return {
        "max_stack_distance": c.max_distance(),
        "attainable_hit_rate": c.attainable("blocks"),
        "attainable_token_hit_rate": c.attainable("tokens"),
        "infinite_cache_hit_rate": c.infinite_capacity_hit_rate("blocks"),
        "infinite_cache_token_hit_rate": c.infinite_capacity_hit_rate("tokens"),
        "curve": windows["all"]["curve"],
        "knee": windows["all"]["knee"],
        "windows": windows,
    }


def knee_line(knee: CurveRow | None, sizes: Sizes) -> str:
    """One line saying where the knee is, for the text reports."""
    if knee is None:
        return f"knee: none (no doubling of the capacity gains {points(KNEE_MIN_GAIN, 0).lstrip('+')})"
    n_bytes = sizes.bytes(knee.capacity_blocks)
    gib = f", {gib_cell(n_bytes)}" if n_bytes is not None else ""
    return (
        f"knee at {knee.capacity_blocks:,} blocks{gib} ({percent_cell(knee.block_hit_rate)} block hit "
        f"rate): {KNEE_MEANING}"
    )


def curve_table(rows: Sequence[CurveRow], sizes: Sizes, knee: int | None = None) -> str:
    """The rows as a table: capacity in blocks, tokens, GiB; both hit rates (an estimate's with their
    error bounds; Belady MIN's beside them where the rows hold them); the row at the `knee` marked."""
    with_gib = bool(sizes.bytes_per_block)
    errors = bool(rows) and rows[0].block_hit_rate_error is not None
    opt = bool(rows) and rows[0].opt_block_hit_rate is not None
    rates = ["block hit rate", "±", "token hit rate", "±"] if errors else ["block hit rate", "token hit rate"]
    rates += ["MIN block hit rate", "MIN token hit rate"] if opt else []
    headers = ["capacity (blocks)", "tokens"] + (["GiB"] if with_gib else []) + rates
    cells = []
    for row in rows:
        line = [f"{row.capacity_blocks:,}", count_cell(sizes.tokens(row.capacity_blocks))]
        if with_gib:
            line.append(gib_cell(sizes.bytes(row.capacity_blocks)))
        for rate, error in (
            (row.block_hit_rate, row.block_hit_rate_error),
            (row.token_hit_rate, row.token_hit_rate_error),
        ):
            line.append(percent_cell(rate))
            if errors:
                line.append(plus_minus_points(error, 2, NOT_KNOWN))
        if opt:
            line += [percent_cell(row.opt_block_hit_rate), percent_cell(row.opt_token_hit_rate)]
        if knee is not None:
            line.append("<- knee" if row.capacity_blocks == knee else "")  # under the "knee" header
        cells.append(line)
    return format_table(
        headers + (["knee"] if knee is not None else []),
        cells,
        None if knee is None else "l" + "r" * (len(headers) - 1) + "l",
    )


def text(result: Curves, view: TextView) -> list[str]:
    if not view.live:
        w = result.window("all")
        c = w.curve
        if view.horizon_reached:
            # coverage targets are shares of what an infinite cache hits: the beyond-horizon re-references too
            lines = [
                f"  hit rate at the horizon: {percent_cell(c.attainable('blocks'))} of blocks, "
                f"{percent_cell(c.attainable('tokens'))} of tokens; an infinite cache: "
                f"{percent_cell(c.infinite_capacity_hit_rate('blocks'))} of blocks, "
                f"{percent_cell(c.infinite_capacity_hit_rate('tokens'))} of tokens (coverage targets are "
                "shares of it)"
            ]
        else:
            lines = [
                f"  attainable hit rate (infinite cache): {percent_cell(c.attainable('blocks'))} of blocks, "
                f"{percent_cell(c.attainable('tokens'))} of tokens"
            ]
        at = w.knee.capacity_blocks if w.knee is not None else None
        return lines + ["", curve_table(w.rows, view.sizes, at), f"  {knee_line(w.knee, view.sizes)}"]
    w = result.window(view.window)
    c = w.curve
    span = "all time" if c.window_seconds is None else f"last {duration(c.window_seconds)}"
    lines = []
    if view.accesses:
        lines.append(
            f"  attainable hit rate ({span}): {percent_cell(c.attainable())} of blocks, "
            f"{percent_cell(c.attainable('tokens'))} of tokens"
        )
    if c.accesses:
        # an estimate's all-time curve has a fine grid (0.3 % steps): no note for it
        grid = "" if c.exact or c.window_seconds is None else ", log grid: lower bounds between grid points"
        grid += ", ESTIMATE" if c.estimate else ""
        at = w.knee.capacity_blocks if w.knee is not None else None
        lines += [
            "",
            f"hit-rate curve ({span}{grid}):",
            curve_table(w.rows, view.sizes, at),
            f"  {knee_line(w.knee, view.sizes)}",
        ]
    return lines


def stack_distance_edges(horizon: int) -> list[int]:
    """Bucket edges of the stack-distance histogram: 1, 2, 3, 4, 6, 8, 12, 16, ... (two a doubling) up
    to the horizon, which ends them. Fixed by the horizon alone, so engines analyzed with the same
    horizon have the same buckets and PromQL can sum them."""
    edges, power = [], 1
    while power <= horizon:
        edges.append(power)
        if power * 3 // 2 <= horizon and power >= 2:
            edges.append(power * 3 // 2)
        power *= 2
    if edges[-1] != horizon:
        edges.append(horizon)
    return edges


def stack_distances(curve: HitRateCurve, horizon: int, labels: tuple[str, ...] = ()) -> MetricSample:
    """The curve's stack distances as one histogram sample: bucket le=C is hits(C), +Inf every access;
    the sum is +Inf (first accesses have an infinite distance) unless every access hit."""
    buckets = tuple((float(c), float(curve.hits(c))) for c in stack_distance_edges(horizon))
    buckets += ((math.inf, float(curve.accesses)),)
    return MetricSample(labels, math.inf if curve.accesses > curve.attainable_hits() else 0.0, buckets)


def hit_rate_samples(
    curve: HitRateCurve, capacities: Sequence[int], labels: tuple[str, ...] = ()
) -> list[MetricSample]:
    """The curve's hit rate at each capacity in both units: labels + (capacity_blocks, unit)."""
    return [
        MetricSample((*labels, str(cap), unit), float(rate))
        for unit in UNITS
        for cap, rate in zip(capacities, curve.hit_rates(list(capacities), unit), strict=True)
    ]


def metrics(result: Curves, view: MetricsView) -> Iterable[MetricFamily]:
    pool = result.engine_pool_blocks
    caps = sorted({int(c) for c in view.capacities} | ({pool} if pool else set()))
    hits, attainable = [], []
    for label, w in result.windows.items():
        if not w.curve.accesses:
            continue
        for unit in UNITS:
            attainable.append(MetricSample((unit, label), w.curve.attainable(unit)))
        hits += [
            MetricSample((s.labels[0], s.labels[1], label), s.value) for s in hit_rate_samples(w.curve, caps)
        ]
    yield MetricFamily(
        "kvset_hit_rate",
        "gauge",
        "LRU hit rate at a capacity (share of accesses or tokens); windowed curves are lower bounds between "
        "grid points",
        ("capacity_blocks", "unit", "window"),
        tuple(hits),
    )
    yield MetricFamily(
        "kvset_attainable_hit_rate",
        "gauge",
        "hit rate of an infinite cache inside the horizon",
        ("unit", "window"),
        tuple(attainable),
    )
    yield MetricFamily(
        "kvset_stack_distance_blocks",
        "histogram",
        "LRU stack distances of all accesses (all time): bucket le=C counts the hits of a C-block cache, +Inf "
        "every access; first accesses have an infinite distance, so the sum is +Inf",
        (),
        (stack_distances(result.curve("all"), view.horizon),),
    )


FIGURE: Figure[Curves] = Figure(
    "curve",
    Curves,
    compute,
    (
        "max_stack_distance",
        "attainable_hit_rate",
        "attainable_token_hit_rate",
        "infinite_cache_hit_rate",
        "infinite_cache_token_hit_rate",
        "curve",
        "knee",
        "windows",
    ),
    to_json,
    text=text,
    metrics=metrics,
    options=(CAPACITIES,),
    check=check,
)
