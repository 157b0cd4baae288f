"""Working sets: for each target, the smallest LRU capacity that reaches it, in every window.

One row per window, target mode and target: the capacity in blocks, tokens and bytes (or "not
reached" inside the horizon), the block and token hit rates the curve gives there, its trend over recent windows of the same length, whether it fits the
engine's pool, and, on the all-time rows with --opt, the capacity Belady MIN needs for the same target.
A windowed curve is read on its grid: its working sets are upper bounds within one grid step
(`exact` False). An estimate's all-time rows carry the working sets of the curves two standard errors
above and below (`capacity_blocks_low`, `capacity_blocks_high`).

"Fits" has one meaning in every view: with a model, the working set plus the hybrid-layer reserve its
running requests need, in bytes, within the pool's bytes (as the reserve panel sums them); without
one, blocks against blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvset.figures import gpus, hybrid_reserve, policy_gap
from kvset.figures.base import Json, MetricFamily, MetricSample, MetricsView, OptionValues, Sizes, TextView
from kvset.figures.inputs import WINDOWS, Figure, FigureInputs, target_mode
from kvset.figures.tables import NOT_KNOWN, count_cell, format_table, gib_cell, percent_cell
from kvset.geometry.gpus import GpuBudget
from kvset.quantities import duration, format_gpus, target_label

# the options are read by every command line (`--help` included): numpy and the analysis are
# named here for the type checker only, and loaded by whoever computes the figure
if TYPE_CHECKING:
    from kvset.core.curve import HitRateCurve, TargetMode

TREND_POINTS = 6  # windows of each length in a row's trend

# What "fits the pool" compares, as the views label it.
FITS_WITH_RESERVE = "working set + hybrid reserve ≤ pool"
FITS_WORKING_SET = "working set ≤ pool"


def fits_in_pool(working_set: int | None, pool: int | None, reserve: int = 0) -> bool | None:
    """Whether a working set fits the engine's pool, wherever it is shown: the working set plus the
    hybrid-layer reserve its running requests need (in bytes, with a model) within the pool. Without a
    model there is no reserve to add and blocks compare. None when either side is unknown."""
    if working_set is None or not pool:
        return None
    return working_set + reserve <= pool


@dataclass(frozen=True)
class WorkingSetRow:
    target: float
    mode: str  # coverage | absolute
    window: str  # "1m" | "5m" | "1h" | "all"
    capacity_blocks: int | None  # None: not reached inside the horizon
    capacity_tokens: int | None
    capacity_bytes: int | None  # None without a model geometry (or not reached)
    trend_blocks: tuple[int | None, ...] = ()  # over recent consecutive windows, oldest first
    fits_pool: bool | None = None  # see fits_in_pool(); None when the engine's pool is unknown
    fits_counts_reserve: bool = False  # True: the hybrid reserve was added (FITS_WITH_RESERVE)
    exact: bool = True  # False for a windowed (grid) curve: an upper bound within the grid step
    # the smallest capacity at which Belady MIN reaches the same target (all-time rows, with --opt)
    opt_capacity_blocks: int | None = None
    # an estimate's working sets 2 standard errors above and below (None: not an estimate, or not reached)
    capacity_blocks_low: int | None = None
    capacity_blocks_high: int | None = None
    estimate: bool = False
    # the hit rates the curve gives at the working set (None: not reached): what the target buys
    block_hit_rate: float | None = None
    token_hit_rate: float | None = None
    # GPUs' worth of KV cache (--gpu or --gpu-memory, a model: WorkingSets.gpu says what it assumed)
    gpus: float | None = None

    @property
    def reached(self) -> bool:
        return self.capacity_blocks is not None


@dataclass(frozen=True)
class WorkingSets:
    rows: tuple[WorkingSetRow, ...]
    gpu: GpuBudget | None = None  # what the rows' GPUs are counted in (None: no --gpu or --gpu-memory)

    def rows_for(self, window: str = "all", mode: str = "coverage") -> tuple[WorkingSetRow, ...]:
        return tuple(r for r in self.rows if r.window == window and r.mode == mode)

    def row(self, window: str, mode: str, target: float) -> WorkingSetRow | None:
        return next((r for r in self.rows_for(window, mode) if r.target == target), None)


def working_set_row(
    curve: HitRateCurve,
    window: str,
    target: float,
    mode: TargetMode,
    sizes: Sizes,
    pool: int | None,
    hybrid_bytes: int | None = None,
    trend: Sequence[int | None] = (),
    opt_blocks: int | None = None,
    gpu: GpuBudget | None = None,
) -> WorkingSetRow:
    """One row of `curve`; `hybrid_bytes`: the hybrid-layer reserve to add before comparing with the
    pool (None: no model); `gpu`: the GPU the row is also counted in."""
    ws = curve.working_set(target, mode=mode)
    ws_bytes = sizes.bytes(ws)
    with_reserve = hybrid_bytes is not None and sizes.bytes_per_block is not None and pool is not None
    fits: bool | None
    if ws == 0:  # nothing is re-read yet (a coverage target of no hits): no working set to fit
        fits = None
    elif with_reserve:
        fits = fits_in_pool(ws_bytes, sizes.bytes(pool), hybrid_bytes or 0)
    else:
        fits = fits_in_pool(ws, pool)
    block_rate = curve.hit_rate(ws, "blocks") if ws is not None and curve.accesses else None
    token_rate = curve.hit_rate(ws, "tokens") if ws is not None and curve.tokens else None
    low = high = None
    if curve.errors is not None:
        from kvset.core.sampling_curve import working_set_bounds  # numba: only for a sampled curve

        low, high = working_set_bounds(curve, target, mode)
    return WorkingSetRow(
        target=target,
        mode=mode,
        window=window,
        capacity_blocks=ws,
        capacity_tokens=sizes.tokens(ws),
        capacity_bytes=ws_bytes,
        trend_blocks=tuple(trend),
        fits_pool=fits,
        fits_counts_reserve=with_reserve,
        exact=curve.exact,
        opt_capacity_blocks=opt_blocks,
        capacity_blocks_low=low,
        capacity_blocks_high=high,
        estimate=curve.errors is not None,
        block_hit_rate=block_rate,
        token_hit_rate=token_rate,
        gpus=gpu.gpus(ws_bytes) if gpu is not None and ws else None,
    )


AllTime = dict[tuple[str, float], int | None]  # what the trend keeps: (mode, target) -> blocks


def _trends(
    inputs: FigureInputs,
    seconds: float | None,
    targets: Sequence[float],
    mode: TargetMode,
    now: AllTime,
    windows: Sequence[HitRateCurve],
) -> list[list[int | None]]:
    """Working set per target over the last consecutive windows of this length (`windows`, oldest
    first); of all time, the all-time working sets sampled once a coarse slot (this one too when it is
    due)."""
    if seconds is None:
        kept: list[AllTime] = [h for h in inputs.history.get(FIGURE.name, ()) if isinstance(h, dict)]
        if inputs.history_due:
            kept = [*kept, now][-TREND_POINTS:]
        return [[h.get((mode, t)) for h in kept] for t in targets]
    return [[c.working_set(t, mode=mode) if c.accesses else None for c in windows] for t in targets]


def compute(inputs: FigureInputs, options: OptionValues) -> WorkingSets:
    gap = inputs.result(policy_gap.FIGURE)
    opt_gap = gap.gap if gap is not None else None
    hybrid = inputs.result(hybrid_reserve.FIGURE)
    hybrid_bytes = hybrid.reserve.total_bytes if hybrid is not None else None
    pool = inputs.engine_pool
    gpu = gpus.budget(options, inputs.geometry) if inputs.sizes.bytes_per_block else None
    rows = []
    for label, curve in inputs.curves.items():
        seconds = curve.window_seconds
        # the trend's windows, read once for every target mode (reading them is most of this figure's cost)
        windows: Sequence[HitRateCurve] = ()
        if seconds is not None and inputs.slots is not None:
            windows = inputs.slots.consecutive_window_curves(seconds, TREND_POINTS)
        for mode, targets in inputs.targets.by_mode.items():
            tm = target_mode(mode)
            now = {(mode, t): curve.working_set(t, mode=tm) for t in targets} if seconds is None else {}
            # MIN's curve is of all time: only the all-time rows have its working sets
            opt: list[int | None] = [None] * len(targets)
            if opt_gap is not None and label == "all":
                opt = [g.opt_blocks for g in opt_gap.for_mode(mode)]
            for t, trend, o in zip(
                targets, _trends(inputs, seconds, targets, tm, now, windows), opt, strict=True
            ):
                rows.append(
                    working_set_row(curve, label, t, tm, inputs.sizes, pool, hybrid_bytes, trend, o, gpu)
                )
    return WorkingSets(tuple(rows), gpu)


def remember(result: WorkingSets) -> AllTime:
    """The all-time working sets, for the "all" window's trend."""
    return {(r.mode, r.target): r.capacity_blocks for r in result.rows if r.window == "all"}


def row_json(r: WorkingSetRow, sizes: Sizes) -> Json:
    return {
        "target": r.target,
        "mode": r.mode,
        "window": r.window,
        "unit": "blocks",
        **sizes.json(r.capacity_blocks),
        "reached": r.reached,
        "exact": r.exact,
        "trend_blocks": list(r.trend_blocks),
        "fits_pool": r.fits_pool,
        "opt_capacity_blocks": r.opt_capacity_blocks,
        "capacity_blocks_low": r.capacity_blocks_low,
        "capacity_blocks_high": r.capacity_blocks_high,
        "block_hit_rate": r.block_hit_rate,
        "token_hit_rate": r.token_hit_rate,
        "gpus": r.gpus,
    }


def gpu_json(gpu: GpuBudget | None) -> Json | None:
    if gpu is None:
        return None
    return {
        "gpu": gpu.gpu.name,
        "memory_bytes": gpu.gpu.memory_bytes,
        "tp": gpu.tp,
        "kv_bytes_per_gpu": gpu.kv_bytes_per_gpu,
        "kv_from": gpu.kv_from,
        "lower_bound": gpu.lower_bound,
        "kv_replicas": gpu.replicas,
        "estimate": True,
    }


def to_json(result: WorkingSets, sizes: Sizes) -> Json:
    return {"working_sets": [row_json(r, sizes) for r in result.rows], "gpu_budget": gpu_json(result.gpu)}


def working_set_table(
    rows: Sequence[WorkingSetRow],
    with_gib: bool,
    extra_headers: Sequence[str] = (),
    extra_cells: Sequence[Sequence[str]] = (),
    ranges: bool = False,
    gpu: GpuBudget | None = None,
) -> str:
    """Working-set rows as a table; `extra_cells` holds, per row, the cells of the `extra_headers`
    columns after them; `ranges`: an estimate's range column; `gpu`: a GPUs column."""
    headers = (
        ["target", "blocks", "tokens"]
        + (["GiB"] if with_gib else [])
        + (["GPUs"] if gpu is not None else [])
        + (["range (blocks)"] if ranges else [])
        + ["block hit rate", "token hit rate"]
        + list(extra_headers)
    )
    cells = []
    for i, row in enumerate(rows):
        if row.capacity_blocks is None:
            line = [target_label(row.target), "not reached", NOT_KNOWN] + ([NOT_KNOWN] if with_gib else [])
        elif row.capacity_blocks == 0:  # a coverage target of no hits at all: nothing is re-read
            line = [target_label(row.target), "0 (no re-references)", "0"] + (["0"] if with_gib else [])
        else:
            line = [target_label(row.target), f"{row.capacity_blocks:,}", count_cell(row.capacity_tokens)]
            if with_gib:
                line.append(gib_cell(row.capacity_bytes))
        if gpu is not None:
            line.append(
                format_gpus(row.gpus, at_least=gpu.lower_bound, with_unit=False) if row.gpus else NOT_KNOWN
            )
        if ranges:
            low, high = row.capacity_blocks_low, row.capacity_blocks_high
            line.append(
                f"{'not reached' if low is None else f'{low:,}'} - {'not reached' if high is None else f'{high:,}'}"
            )
        line += [percent_cell(row.block_hit_rate), percent_cell(row.token_hit_rate)]
        cells.append(line + list(extra_cells[i] if extra_cells else ()))
    return format_table(headers, cells)


def text(result: WorkingSets, view: TextView) -> list[str]:
    if not view.live:
        rows = result.rows_for("all", view.mode)
        if not rows:
            return []
        explain = "share of an infinite cache's hit rate" if view.mode == "coverage" else "hit rate"
        table = working_set_table(rows, view.with_gib, ranges=any(r.estimate for r in rows), gpu=result.gpu)
        return ["", f"working sets ({view.mode}: {explain}):", table, *gpu_lines(result.gpu)]
    rows = result.rows_for(view.window, view.mode) if view.accesses else ()
    if not rows:
        return []
    extra = [
        [
            {True: "yes", False: "NO", None: NOT_KNOWN}[r.fits_pool],
            trend_cell(r.trend_blocks),
        ]
        for r in rows
    ]
    table = working_set_table(rows, view.with_gib, ["fits pool", "trend"], extra, gpu=result.gpu)
    span = duration(dict(WINDOWS).get(view.window))
    span = span if span == "all time" else f"last {span}"
    return ["", f"working sets ({view.mode}, {span}):", table, *gpu_lines(result.gpu)]


def gpu_lines(gpu: GpuBudget | None) -> list[str]:
    """Under a table with a GPUs column: what one GPU's worth is, and that it is a model."""
    return [] if gpu is None else [gpu.describe()]


def trend_cell(trend: Sequence[int | None]) -> str:
    """The change over the trend's windows, first to last (its values are in the JSON; the table has
    the working set already)."""
    known = [v for v in trend if v is not None]
    if len(known) < 2 or known[0] == 0:
        return NOT_KNOWN
    return f"{(known[-1] / known[0] - 1) * 100:+.0f} % in {len(known)} windows"


def target_value(target: float) -> str:
    """A target as a label value: 0.95 -> "0.95" (the shortest text that reads back as the same number)."""
    return repr(float(target))


def metrics(result: WorkingSets, view: MetricsView) -> Iterable[MetricFamily]:
    labels = ("target", "mode", "window")
    blocks, in_bytes = [], []
    for row in result.rows:
        if row.capacity_blocks is None:
            continue
        key = (target_value(row.target), row.mode, row.window)
        blocks.append(MetricSample(key, row.capacity_blocks))
        if row.capacity_bytes is not None:
            in_bytes.append(MetricSample(key, row.capacity_bytes))
    yield MetricFamily(
        "kvset_working_set_blocks",
        "gauge",
        "smallest LRU capacity reaching the target (absent while not reached inside the horizon)",
        labels,
        tuple(blocks),
    )
    if view.sizes.bytes_per_block:
        yield MetricFamily(
            "kvset_working_set_bytes",
            "gauge",
            "the working set in full-attention KV bytes of the model",
            labels,
            tuple(in_bytes),
        )


FIGURE: Figure[WorkingSets] = Figure(
    "working_sets",
    WorkingSets,
    compute,
    ("working_sets", "gpu_budget"),
    to_json,
    text=text,
    metrics=metrics,
    remember=remember,
    options=gpus.OPTIONS,
    check=gpus.check,
)
