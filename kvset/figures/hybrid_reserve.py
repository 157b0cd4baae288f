"""The model's KV bytes and its hybrid-layer reserve: what `--model` adds to every figure.

The full-attention bytes per token turn capacities into GiB. Sliding-window, linear-attention and SSM
layers hold state per running request, not per shared prefix, so stack distances say nothing about
them: their memory (kvset.geometry.reserve) is sized here for the running requests (the engine's count
when it reports one, else --concurrency, else one, and the reports say which) at a context length
(--context, else the model's max_position_embeddings), and shown beside the working set, never in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvset.figures.base import ANALYZE, MODEL, PIPELINES, Json, Option, OptionValues, Sizes, TextView
from kvset.figures.inputs import Figure, FigureInputs
from kvset.figures.tables import gib_cell
from kvset.geometry.model import ModelGeometry
from kvset.geometry.reserve import HybridReserve, hybrid_reserve
from kvset.types import EngineReading

CONCURRENCY: Option[int | None] = Option(
    "--concurrency",
    "concurrency",
    None,
    "running requests that each hold hybrid-layer state (default: the engine's count when it reports "
    "one, else 1)",
    commands=PIPELINES | {MODEL},
    argtype="non_negative_int",
    metavar="N",
    group="model",
    help_for={
        ANALYZE: "running requests that each hold hybrid-layer state (default 1)",
        MODEL: "running requests that each hold hybrid-layer state (default 1)",
    },
)
CONTEXT: Option[int | None] = Option(
    "--context",
    "context",
    None,
    "context length per running request (default: the model's max_position_embeddings)",
    commands=PIPELINES | {MODEL},
    argtype="non_negative_int",
    metavar="TOKENS",
    group="model",
)
CONCURRENCY_SOURCES = ("measured", "given", "none")


def concurrency(engine: EngineReading | None, given: int | None) -> tuple[int | None, str]:
    """(running requests, where the number came from): the engine's count, else --concurrency."""
    if engine is not None and engine.running_requests is not None:
        return engine.running_requests, "measured"
    if given is not None:
        return given, "given"
    return None, "none"


def sized_for(count: int | None) -> int:
    """The running requests a reserve is sized for: one when the count is not known."""
    return 1 if count is None else count


def context_tokens(geometry: ModelGeometry, given: int | None) -> tuple[int, str]:
    """(context tokens per running request, where the number came from)."""
    if given is not None:
        return given, "given"
    if geometry.max_position_embeddings is not None:
        return geometry.max_position_embeddings, "max_position_embeddings"
    if geometry.sliding_window is not None:
        return geometry.sliding_window, "sliding window (no max_position_embeddings in the config)"
    return 0, "unknown (no max_position_embeddings in the config; give --context)"


@dataclass(frozen=True)
class ModelReserve:
    """The model's KV geometry as the figures use it, and the hybrid reserve of its running requests."""

    model: str
    kv_dtype: str  # canonical: "auto" resolved
    full_attention_bytes_per_token: int
    full_attention_bytes_per_block: int | None  # of the analyzed stream's blocks (None: size unknown)
    geometry_notes: tuple[str, ...]
    reserve: HybridReserve
    concurrency_source: str  # measured | given | none (then sized for one running request)
    context_from: str
    notes: tuple[str, ...]

    @property
    def hybrid_reserve_bytes(self) -> int:
        return self.reserve.total_bytes


def model_reserve(
    geometry: ModelGeometry,
    kv_dtype: str,
    running: tuple[int | None, str],
    context: tuple[int, str],
    bytes_per_block: int | None,
) -> ModelReserve:
    """The reserve of `running` requests (count, source) at `context` (tokens, source)."""
    count, source = running
    notes = []
    if count is None:
        notes.append("concurrency unknown: hybrid reserve sized for 1 running request")
    reserve = hybrid_reserve(geometry, sized_for(count), context[0], kv_dtype)
    notes.append(f"hybrid reserve: {reserve.summary()}")
    if reserve.has_hybrid_layers:
        notes.append("reserve is per running request and is not part of the working set")
    notes.extend(geometry.notes)
    return ModelReserve(
        model=geometry.name,
        kv_dtype=geometry.kv_dtype(kv_dtype),
        full_attention_bytes_per_token=geometry.full_attention_bytes_per_token(kv_dtype),
        full_attention_bytes_per_block=bytes_per_block,
        geometry_notes=tuple(geometry.notes),
        reserve=reserve,
        concurrency_source=source,
        context_from=context[1],
        notes=tuple(notes),
    )


def compute(inputs: FigureInputs, options: OptionValues) -> ModelReserve | None:
    g = inputs.geometry
    if g is None:
        return None
    return model_reserve(
        g,
        inputs.kv_dtype,
        concurrency(inputs.engine, options.get(CONCURRENCY)),
        context_tokens(g, options.get(CONTEXT)),
        inputs.sizes.bytes_per_block,
    )


def to_json(result: ModelReserve, sizes: Sizes) -> Json:
    return {
        "model": {
            "name": result.model,
            "kv_dtype": result.kv_dtype,
            "full_attention_bytes_per_token": result.full_attention_bytes_per_token,
            "full_attention_bytes_per_block": result.full_attention_bytes_per_block,
            "notes": list(result.geometry_notes),
        },
        "hybrid_reserve": {
            **result.reserve.to_dict(),
            "concurrency_source": result.concurrency_source,
            "context_from": result.context_from,
        },
        "hybrid_reserve_bytes": result.hybrid_reserve_bytes,
    }


def text(result: ModelReserve, view: TextView) -> list[str]:
    """kvset analyze's lines (the live report sums it in the reserve figure's line)."""
    if view.live:
        return []
    r = result.reserve
    per_block = result.full_attention_bytes_per_block
    lines = [
        f"  capacities in GiB for {result.model}: {result.full_attention_bytes_per_token:,} B of full-attention "
        f"KV per token ({result.kv_dtype})"
        + (f", {per_block:,} B per {view.sizes.block_tokens}-token block" if per_block else "")
    ]
    if r.total_bytes:
        lines.append(
            f"  hybrid-layer reserve, NOT in the working sets above: {gib_cell(r.total_bytes)}"
            f" for {r.concurrency:,} running requests at {r.context_tokens:,} tokens of context "
            f"({r.summary()}); add it to a working set to size the pool"
        )
    else:
        lines.append(f"  hybrid-layer reserve: 0 ({r.summary()})")
    return lines


FIGURE: Figure[ModelReserve] = Figure(
    "hybrid_reserve",
    ModelReserve,
    compute,
    ("model", "hybrid_reserve", "hybrid_reserve_bytes"),
    to_json,
    text=text,
    options=(CONCURRENCY, CONTEXT),
)
