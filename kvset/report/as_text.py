"""The plain-text reports of a snapshot: `kvset analyze` (a file read whole) and `kvset-top --once` (a
live one). Each writes its own header (the file and its reader; the sources), then every figure's
lines in the registry's order (kvset.figures: each figure writes its own)."""

from __future__ import annotations

from collections.abc import Sequence

from kvset.figures import FIGURES
from kvset.figures.base import Json, TextView
from kvset.figures.inputs import MISSES_ONLY, RECONSTRUCTED
from kvset.figures.policy_gap import BeladyMin
from kvset.figures.tables import percent_cell
from kvset.quantities import plural, target_label
from kvset.report.as_json import estimate_json
from kvset.report.caveats import caveat_lines
from kvset.snapshot import Snapshot
from kvset.text import printable
from kvset.types import SourceHealth

# What each kind of source adds, for the advice when no block access arrived.
MISSES_SPLIT_BOUND = (
    "not every forgotten block could be remembered: distinct blocks and the re-references beyond the "
    "horizon are bounds (at most, at least); the misses they add up to are exact"
)
CURVE_SOURCES = {"events": "--events", "log": "--log", "replay": "--replay"}


def _caveats() -> str:
    return "caveats: " + " ".join(caveat_lines())


def sample_rate_label(rate: float) -> str:
    """A sample rate as a percentage that never reads 0: 0.01 -> "1 %", 1e-9 -> "1e-07 %"."""
    return target_label(rate) if rate >= 1e-5 else f"{100 * rate:.3g} %"


def estimate_text(estimate: Json | None) -> list[str]:
    """The label of a sampled analysis (from kvset.report.as_json.estimate_json): what was sampled and
    what the ± bounds mean. Nothing for a measured one."""
    if estimate is None:
        return []
    size = f", at most {estimate['sample_size']:,} blocks" if estimate["sample_size"] else ""
    heads = "request heads sampled more" if estimate["head_boost"] else "request heads NOT sampled more"
    label = (
        f"  ESTIMATE from a {sample_rate_label(estimate['sample_rate'])} spatial sample of the blocks{size} "
        f"(seed {estimate['seed']}; {heads}: {percent_cell(estimate['tracked_share'], 1)} of the "
        f"accesses looked at, {plural(estimate['tracked_blocks'], 'block')} tracked)"
    )
    moved = []
    if not estimate["head_boost"]:
        moved.append(
            "  block positions vary (keys not prefix-chained: "
            f"{percent_cell(estimate['positions_moved_share'] or 0.0, 0)} of the sampled re-reads at a position "
            "sampled at another rate), where boosting the heads would bias the curve low: often-read blocks "
            "sampled more instead"
        )
    if not estimate["meaningful"]:
        from kvset.core.curve import MIN_SAMPLE_BLOCKS  # an estimate's report: the analysis is loaded

        return [
            label,
            *moved,
            f"  NOT MEANINGFUL: the sample holds {plural(estimate['tracked_blocks'], 'block')}, fewer than "
            f"{MIN_SAMPLE_BLOCKS}: its numbers are decided by a handful of blocks and have no interval; "
            "sample at a higher rate or a larger size",
        ]
    return [
        label,
        *moved,
        f"  every number but requests, accesses and tokens is an estimate; ± is {estimate['error_bound']}",
    ]


def figure_lines(s: Snapshot, view: TextView) -> list[str]:
    """Every figure's lines, in the registry's order."""
    lines: list[str] = []
    for figure in FIGURES:
        result = s.get(figure.result)
        if result is not None:
            lines += figure.text(result, view)
    return lines


def analysis_text(s: Snapshot) -> str:
    """What `kvset analyze` prints."""
    read = s.input
    assert read is not None, "kvset analyze's report is of a file read whole"
    t = s.totals
    lines = [
        f"kvset analyze: {printable(read.name)} ({printable(read.format)}, {s.block_tokens} tokens per block, "
        f"order {s.order})",
        *estimate_text(estimate_json(s.sample)),
        f"  requests {t.requests:,}   accesses {t.accesses:,}   distinct blocks {t.first_time_bound}"
        f"{t.first_time:,}   tokens {t.tokens:,}",
    ]
    if s.horizon_reached:
        lines.append(
            f"  horizon {s.horizon:,} blocks REACHED: curve exact up to it; "
            f"{t.beyond_horizon_bound}{t.beyond_horizon:,} re-references lay beyond it (misses at every "
            "capacity shown)"
        )
        if not t.misses_split_exact:
            lines.append(f"  {MISSES_SPLIT_BOUND}")
    elif s.sample is not None:
        lines.append(f"  horizon {s.horizon:,} blocks, not reached")
    else:
        lines.append(f"  horizon {s.horizon:,} blocks, not reached: the curve is exact at every capacity")
    view = TextView(
        s.sizes, mode=s.main_mode, live=False, accesses=t.accesses, horizon_reached=s.horizon_reached
    )
    lines += figure_lines(s, view)
    if read.rejected or read.warnings:
        lines.append("")
        for rej in read.rejected:
            shown = "; ".join(rej.examples[:3])
            lines.append(
                f"  {plural(rej.count, 'line')} rejected: {rej.reason}" + (f" ({shown})" if shown else "")
            )
        for w in read.warnings:
            lines.append(f"  {plural(w.count, 'request')} kept with a warning: {w.reason}")
    for note in read.notes:
        lines.append(f"  note: {printable(note)}")
    opt = s.get(BeladyMin)
    opt_seconds = opt.seconds if opt is not None and opt.curve is not None else None
    analyzed = read.analyze_seconds
    rate = t.accesses / analyzed / 1e6 if analyzed > 0 else float("inf")
    took = read.read_seconds + analyzed + (opt_seconds or 0.0)
    lines += [
        "",
        f"took {took:.2f} s (read {read.read_seconds:.2f} s, analyze {analyzed:.2f} s, {rate:.1f} M accesses/s"
        + (f"; Belady MIN {opt_seconds:.2f} s" if opt_seconds is not None else "")
        + ")",
        _caveats(),
    ]
    return "\n".join(lines)


def _no_accesses_advice(sources: Sequence[SourceHealth]) -> str:
    """Why there is no curve, and what to add: only sources that were not given."""
    kinds = {h.kind for h in sources}
    given = [flag for kind, flag in CURVE_SOURCES.items() if kind in kinds]
    if given:
        return (
            f"no block accesses received from {' or '.join(given)}: no curve (see the source lines "
            "above for why)"
        )
    if "metrics" in kinds:
        return (
            "no block accesses received: no curve (a metrics endpoint alone gives the engine's operating "
            "point only; add --events or --log for the curve)"
        )
    return "no block accesses received: no curve"


def snapshot_text(snapshot: Snapshot, window: str = "all", mode: str | None = None) -> str:
    """A one-shot plain-text report of a snapshot (what `kvset-top --once` prints)."""
    s = snapshot
    mode = mode or next(iter(s.targets.by_mode), "coverage")
    bt = s.block_tokens
    lines = []
    head = "kvset-top report" + ("  [DEMO: synthetic workload]" if s.demo else "")
    lines.append(head)
    lines += estimate_text(estimate_json(s.sample))
    for h in s.sources:
        flag = "connected" if h.connected else "not connected"
        lines.append(
            f"  source: {h.source}: {h.state} ({flag}); {plural(h.accesses, 'access', 'accesses')}, "
            f"{h.rejected_total:,} rejected"
        )
        for r in h.rejected[:3]:
            lines.append(
                f"    rejected {r.count:,}: {r.reason}"
                + (f" ({'; '.join(r.examples[:2])})" if r.examples else "")
            )
        backlog = dict(h.details).get("backlog")
        if backlog:
            lines.append(f"    backlog: {backlog}")
        for note in h.notes:
            lines.append(f"    note: {note}")
    t = s.totals
    lines.append(
        f"  accesses {t.accesses:,}   requests {t.requests:,}   distinct blocks {t.first_time_bound}"
        f"{t.first_time:,}   "
        f"tokens {t.tokens:,}"
        + (f"; {s.units.describe()}" if s.units else f" ({bt} per block)" if bt else "")
    )
    horizon = (
        f"horizon {s.horizon:,} blocks REACHED: {t.beyond_horizon_bound}{t.beyond_horizon:,} re-references "
        "beyond it"
        if t.beyond_horizon
        else f"horizon {s.horizon:,} blocks, not reached"
    )
    lines.append(f"  {horizon}; order {s.order}")
    if not t.misses_split_exact:
        lines.append(f"  {MISSES_SPLIT_BOUND}")
    if s.curve_scope == MISSES_ONLY and t.accesses:
        lines.append(
            "  the curve is of the engine's MISSES only (its KV events report no hits): not comparable "
            "with the engine's hit rate; vLLM >= 0.26 reports hits for requests sent with "
            'vllm_xargs {"kv_cache_report_mode": "full"}'
        )
    if s.curve_scope == RECONSTRUCTED and t.accesses:
        lines.append(
            "  the engine's KV events report misses only: each request's hits were RECONSTRUCTED from the "
            "chain its stored blocks hang on; requests that stored no block are not in the curve"
        )
    if not t.accesses:
        lines.append(f"  {_no_accesses_advice(s.sources)}")
    lines += figure_lines(s, TextView(s.sizes, window=window, mode=mode, live=True, accesses=t.accesses))
    if s.events:
        lines += ["", "recent events:"] + [f"  {e.kind}: {e.text}" for e in list(s.events)[-5:]]
    lines += ["", _caveats()]
    return "\n".join(lines)
