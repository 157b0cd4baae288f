"""The engine's operating point: its capacity and measured hit rate beside the curve's prediction."""

from __future__ import annotations

from kvset.snapshot import MISSES_ONLY


def operating_point(snapshot, window: str = "all") -> dict | None:
    """The engine's capacity and measured hit rate beside the curve's prediction at that capacity."""
    e = snapshot.engine
    if e is None or not (e.capacity_blocks or e.capacity_tokens):
        return None
    bt = snapshot.block_tokens
    cap = e.capacity_in_blocks(bt)
    curve = snapshot.curve(window)
    predicted = curve.hit_rate(cap, "tokens") if cap and curve.tokens else None
    measured = e.token_hit_rate
    comparable = snapshot.curve_scope != MISSES_ONLY
    return {
        "capacity_blocks": cap,
        "capacity_tokens": e.capacity_tokens or (cap * bt if cap and bt else None),
        "measured_token_hit_rate": measured,
        "measured_over_seconds": e.hit_rate_window_s,
        "predicted_token_hit_rate": predicted,
        "predicted_window": window,
        # a curve of the engine's misses alone says nothing about the engine's own hit rate
        "difference": measured - predicted if comparable and measured is not None and predicted is not None else None,
        "curve_scope": snapshot.curve_scope,
        "stale": e.stale,
        "label": e.label,
    }
