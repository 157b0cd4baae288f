"""Reserve: the full-attention working set plus the hybrid-layer reserve, against the engine's pool.

With a model: the main target's all-time working set in bytes, the hybrid reserve of the running
requests (kvset.figures.hybrid_reserve), their sum, and whether the sum fits the engine's pool in
bytes (the same rule as the working sets' "fits": kvset.figures.working_sets.fits_in_pool).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvset.figures import hybrid_reserve, working_sets
from kvset.figures.base import Json, OptionValues, Sizes, TextView
from kvset.figures.inputs import Figure, FigureInputs
from kvset.figures.tables import gib_cell
from kvset.quantities import target_label


@dataclass(frozen=True)
class Reserve:
    """Full-attention working set versus the hybrid-layer reserve, in bytes."""

    model: str
    full_attention_bytes_per_token: int
    full_attention_bytes_per_block: int | None
    working_set_target: float
    working_set_mode: str
    working_set_bytes: int | None
    hybrid_reserve_bytes: int
    concurrency: int
    concurrency_source: str  # measured | given | none
    pool_bytes: int | None
    notes: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> int | None:
        if self.working_set_bytes is None:
            return None
        return self.working_set_bytes + self.hybrid_reserve_bytes

    @property
    def fits(self) -> bool | None:
        return working_sets.fits_in_pool(self.working_set_bytes, self.pool_bytes, self.hybrid_reserve_bytes)


def compute(inputs: FigureInputs, options: OptionValues) -> Reserve | None:
    model = inputs.result(hybrid_reserve.FIGURE)
    ws = inputs.result(working_sets.FIGURE)
    if model is None or ws is None:
        return None
    main = inputs.targets
    row = ws.row("all", main.main_mode, main.main_target)
    # bytes from tokens, so that a trace's block size (Mooncake: 512 tokens) need not match the engine's
    tokens = row.capacity_tokens if row is not None else None
    g = inputs.geometry
    assert g is not None  # the model figure has one
    return Reserve(
        model=model.model,
        full_attention_bytes_per_token=model.full_attention_bytes_per_token,
        full_attention_bytes_per_block=model.full_attention_bytes_per_block,
        working_set_target=main.main_target,
        working_set_mode=main.main_mode,
        working_set_bytes=None if tokens is None else g.full_attention_bytes(tokens, inputs.kv_dtype),
        hybrid_reserve_bytes=model.hybrid_reserve_bytes,
        concurrency=model.reserve.concurrency,
        concurrency_source=model.concurrency_source,
        pool_bytes=inputs.sizes.bytes(inputs.engine_pool) or None,
        notes=model.notes,
    )


def to_json(r: Reserve, sizes: Sizes) -> Json:
    return {
        "reserve": {
            "model": r.model,
            "full_attention_bytes_per_token": r.full_attention_bytes_per_token,
            "full_attention_bytes_per_block": r.full_attention_bytes_per_block,
            "working_set_target": r.working_set_target,
            "working_set_bytes": r.working_set_bytes,
            "hybrid_reserve_bytes": r.hybrid_reserve_bytes,
            "total_bytes": r.total_bytes,
            "fits": r.fits,
            "concurrency": r.concurrency,
            "concurrency_source": r.concurrency_source,
            "pool_bytes": r.pool_bytes,
            "notes": list(r.notes),
        }
    }


def text(r: Reserve, view: TextView) -> list[str]:
    """The live report's line (kvset analyze prints the model's own: kvset.figures.hybrid_reserve)."""
    if not view.live:
        return []
    ws = gib_cell(r.working_set_bytes) if r.working_set_bytes is not None else "not reached"
    return [
        f"memory for {r.model}: working set ({target_label(r.working_set_target)}) {ws} + hybrid reserve "
        f"{gib_cell(r.hybrid_reserve_bytes)} ({r.concurrency} running, {r.concurrency_source})"
        + (f" = {gib_cell(r.total_bytes)}" if r.total_bytes is not None else "")
        + (f"; pool {gib_cell(r.pool_bytes)}" if r.pool_bytes else "")
    ]


FIGURE: Figure[Reserve] = Figure("reserve", Reserve, compute, ("reserve",), to_json, text=text)
