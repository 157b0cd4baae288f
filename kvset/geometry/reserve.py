"""The hybrid reserve: per-request state that the prefix-cache curve cannot size.

Sliding-window, linear-attention and Mamba layers keep state for each *running* request, not per
shared prefix, so stack distances say nothing about them. Their memory is
    sliding window: n_swa_layers x 2 x kv_heads x head_dim x kv_bytes x min(window, context)
    linear / SSM:   n_layers x (conv state + recurrent state) per layer
per running request, times the concurrency. It is shown beside the full-attention working set,
never added into it silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvset.geometry.dtypes import AUTO
from kvset.geometry.errors import GeometryError
from kvset.geometry.model import ModelGeometry
from kvset.quantities import format_bytes


@dataclass(frozen=True)
class HybridReserve:
    """Bytes held per running request outside the shared prefix cache, and in total at a concurrency."""

    model: str
    concurrency: int
    context_tokens: int
    kv_dtype: str  # canonical, "auto" resolved
    conv_state_dtype: str
    ssm_state_dtype: str
    sliding_window_layers: int
    sliding_window: int | None
    sliding_window_tokens: int  # min(window, context) per request
    sliding_window_bytes_per_request: int
    linear_attention_layers: int
    linear_state_bytes_per_layer: int
    linear_state_bytes_per_request: int
    mamba_layers: int
    mamba_state_bytes_per_layer: int
    mamba_state_bytes_per_request: int

    @property
    def has_hybrid_layers(self) -> bool:
        return bool(self.sliding_window_layers or self.linear_attention_layers or self.mamba_layers)

    @property
    def state_bytes_per_request(self) -> int:
        """Linear-attention plus SSM state: fixed per request, whatever the context."""
        return self.linear_state_bytes_per_request + self.mamba_state_bytes_per_request

    @property
    def per_request_bytes(self) -> int:
        return self.sliding_window_bytes_per_request + self.state_bytes_per_request

    @property
    def sliding_window_bytes(self) -> int:
        return self.sliding_window_bytes_per_request * self.concurrency

    @property
    def linear_state_bytes(self) -> int:
        return self.linear_state_bytes_per_request * self.concurrency

    @property
    def mamba_state_bytes(self) -> int:
        return self.mamba_state_bytes_per_request * self.concurrency

    @property
    def state_bytes(self) -> int:
        return self.state_bytes_per_request * self.concurrency

    @property
    def total_bytes(self) -> int:
        return self.per_request_bytes * self.concurrency

    def summary(self) -> str:
        if not self.has_hybrid_layers:
            return "no hybrid layers: reserve 0"
        return (
            f"{format_bytes(self.total_bytes)} = {format_bytes(self.per_request_bytes)} per request x "
            f"{self.concurrency} running (context {self.context_tokens:,} tokens)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "has_hybrid_layers": self.has_hybrid_layers,
            "summary": self.summary(),
            "concurrency": self.concurrency,
            "context_tokens": self.context_tokens,
            "kv_dtype": self.kv_dtype,
            "conv_state_dtype": self.conv_state_dtype,
            "ssm_state_dtype": self.ssm_state_dtype,
            "total_bytes": self.total_bytes,
            "per_request_bytes": self.per_request_bytes,
            "sliding_window": {
                "layers": self.sliding_window_layers,
                "window_tokens": self.sliding_window,
                "tokens_per_request": self.sliding_window_tokens,
                "bytes_per_request": self.sliding_window_bytes_per_request,
                "bytes": self.sliding_window_bytes,
            },
            "linear_attention": {
                "layers": self.linear_attention_layers,
                "bytes_per_layer": self.linear_state_bytes_per_layer,
                "bytes_per_request": self.linear_state_bytes_per_request,
                "bytes": self.linear_state_bytes,
            },
            "mamba": {
                "layers": self.mamba_layers,
                "bytes_per_layer": self.mamba_state_bytes_per_layer,
                "bytes_per_request": self.mamba_state_bytes_per_request,
                "bytes": self.mamba_state_bytes,
            },
            "state_bytes": self.state_bytes,
        }


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise GeometryError(f"{what} must be a non-negative integer, got {value!r}")
    return value


def hybrid_reserve(
    geometry: ModelGeometry, concurrency: int, context_tokens: int, kv_dtype: str = AUTO
) -> HybridReserve:
    """The reserve for `concurrency` running requests of `context_tokens` tokens each.

    kv_dtype applies to sliding-window KV (it shares the KV cache); linear-attention and SSM state use
    the geometry's state dtypes (the model dtype unless the config or an override says otherwise).
    """
    concurrency = _count(concurrency, "concurrency")
    context_tokens = _count(context_tokens, "context tokens")
    return HybridReserve(
        model=geometry.name,
        concurrency=concurrency,
        context_tokens=context_tokens,
        kv_dtype=geometry.kv_dtype(kv_dtype),
        conv_state_dtype=geometry.conv_state_dtype,
        ssm_state_dtype=geometry.ssm_state_dtype,
        sliding_window_layers=geometry.sliding_window_layers,
        sliding_window=geometry.sliding_window,
        sliding_window_tokens=geometry.sliding_window_tokens(context_tokens),
        sliding_window_bytes_per_request=geometry.sliding_window_bytes_per_request(context_tokens, kv_dtype),
        linear_attention_layers=geometry.linear_attention_layers,
        linear_state_bytes_per_layer=geometry.linear_state_bytes_per_layer,
        linear_state_bytes_per_request=geometry.linear_state_bytes_per_request,
        mamba_layers=geometry.mamba_layers,
        mamba_state_bytes_per_layer=geometry.mamba_state_bytes_per_layer,
        mamba_state_bytes_per_request=geometry.mamba_state_bytes_per_request,
    )
