"""Fill the snapshot's Reserve panel from a geometry: the working set in bytes beside the hybrid reserve.

The snapshot builder (and `kvset analyze --model`) call snapshot_reserve once per snapshot with the
working set it found and the concurrency it measured or was given.
"""

from __future__ import annotations

from kvset.geometry.dtypes import AUTO
from kvset.geometry.model import DEFAULT_BLOCK_SIZE, ModelGeometry
from kvset.geometry.reserve import HybridReserve, hybrid_reserve
from kvset.snapshot.model import Reserve

CONCURRENCY_SOURCES = ("measured", "given", "none")


def snapshot_reserve(
    geometry: ModelGeometry,
    *,
    concurrency: int | None,
    concurrency_source: str,
    context_tokens: int,
    working_set_target: float,
    working_set_tokens: int | None,
    pool_bytes: int | None = None,
    kv_dtype: str = AUTO,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> tuple[Reserve, HybridReserve]:
    """(the snapshot's Reserve, the broken-down HybridReserve behind its hybrid_reserve_bytes).

    working_set_tokens: tokens the working set holds (None: target not reached). Bytes come from
    tokens so that a trace's block size (Mooncake: 512 tokens) need not match the engine's.
    concurrency None (unknown) sizes the reserve for one running request and says so.
    """
    if concurrency_source not in CONCURRENCY_SOURCES:
        raise ValueError(
            f"concurrency_source must be one of {CONCURRENCY_SOURCES}, got {concurrency_source!r}"
        )
    notes: list[str] = []
    if concurrency is None:
        concurrency_source = "none"
        notes.append("concurrency unknown: hybrid reserve sized for 1 running request")
    reserve = hybrid_reserve(geometry, 1 if concurrency is None else concurrency, context_tokens, kv_dtype)
    notes.append(f"hybrid reserve: {reserve.summary()}")
    if reserve.has_hybrid_layers:
        notes.append("reserve is per running request and is not part of the working set")
    notes.extend(geometry.notes)
    return (
        Reserve(
            model=geometry.name,
            full_attention_bytes_per_token=geometry.full_attention_bytes_per_token(kv_dtype),
            full_attention_bytes_per_block=geometry.full_attention_bytes_per_block(block_size, kv_dtype),
            working_set_target=working_set_target,
            working_set_bytes=None
            if working_set_tokens is None
            else geometry.full_attention_bytes(working_set_tokens, kv_dtype),
            hybrid_reserve_bytes=reserve.total_bytes,
            concurrency=reserve.concurrency,
            concurrency_source=concurrency_source,
            pool_bytes=pool_bytes,
            notes=tuple(notes),
        ),
        reserve,
    )
