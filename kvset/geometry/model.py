"""ModelGeometry: the numbers that turn cached tokens into bytes, and per-request state into bytes.

Only full-attention layers hold KV that a shared prefix reuses, so only they enter the bytes per
cached token. Sliding-window layers, linear-attention layers (Gated DeltaNet) and Mamba/SSM layers
hold state per *running request*; they are sized separately as the hybrid reserve (see reserve.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kvset.geometry.dtypes import AUTO, canonical_dtype, dtype_bytes, resolve_dtype
from kvset.geometry.errors import GeometryError
from kvset.text import printable
from kvset.units import DEFAULT_BLOCK_SIZE

# Per-layer kinds, as read from a config (ModelGeometry.layer_kinds).
FULL = "full_attention"
SLIDING = "sliding_attention"
LINEAR = "linear_attention"  # Gated DeltaNet and other linear attention with a fixed recurrent state
MAMBA = "mamba"  # Mamba / Mamba2 SSM mixer
ATTENTION_AND_MAMBA = "attention+mamba"  # Falcon-H1: both mixers side by side in every layer
NO_MIXER = "mlp"  # a layer without sequence mixing (Nemotron-H '-' and 'E'): no state at all

LAYER_KINDS = (FULL, SLIDING, LINEAR, MAMBA, ATTENTION_AND_MAMBA, NO_MIXER)


_COUNT_FIELDS = (
    "num_layers",
    "full_attention_layers",
    "sliding_window_layers",
    "linear_attention_layers",
    "mamba_layers",
)
_NON_NEGATIVE_INT_FIELDS = _COUNT_FIELDS + (
    "kv_heads",
    "head_dim",
    "linear_conv_elements",
    "linear_recurrent_elements",
    "mamba_conv_elements",
    "mamba_ssm_elements",
)
_OPTIONAL_INT_FIELDS = ("sliding_window", "kv_lora_rank", "qk_rope_head_dim", "max_position_embeddings")
_DTYPE_FIELDS = ("model_dtype", "conv_state_dtype", "ssm_state_dtype")

# Names accepted by with_overrides (and the CLI flags built on it).
OVERRIDABLE = _NON_NEGATIVE_INT_FIELDS + _OPTIONAL_INT_FIELDS + _DTYPE_FIELDS + ("state_dtype",)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class ModelGeometry:
    """KV and state geometry of one model. Counts are layers; element counts are per layer per request."""

    name: str
    source: str  # "preset <repo id>" or the config.json path
    model_type: str | None
    num_layers: int
    full_attention_layers: int
    kv_heads: int  # KV heads of the attention layers (0 for MLA or a model without attention)
    head_dim: int  # per KV head (0 for MLA or a model without attention)
    model_dtype: str = "bf16"  # canonical dtype name of the weights (config torch_dtype / dtype)
    sliding_window_layers: int = 0
    sliding_window: int | None = None  # tokens
    linear_attention_layers: int = 0
    linear_conv_elements: int = 0  # per linear-attention layer per request
    linear_recurrent_elements: int = 0
    mamba_layers: int = 0
    mamba_conv_elements: int = 0  # per Mamba layer per request
    mamba_ssm_elements: int = 0
    conv_state_dtype: str = "bf16"
    ssm_state_dtype: str = "bf16"  # recurrent state of linear-attention and Mamba layers
    kv_lora_rank: int | None = None  # MLA (DeepSeek): compressed KV latent per token per layer
    qk_rope_head_dim: int | None = None  # MLA: decoupled RoPE key per token per layer
    max_position_embeddings: int | None = None
    layer_kinds: tuple[str, ...] = ()  # per layer, when known from the config
    state_formulas: tuple[str, ...] = ()  # how the state sizes were derived from the config
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        # the name and notes may come from a config.json: never a raw control character on screen
        object.__setattr__(self, "name", printable(self.name))
        object.__setattr__(self, "notes", tuple(printable(n) for n in self.notes))
        for name in _NON_NEGATIVE_INT_FIELDS:
            value = getattr(self, name)
            if not _is_int(value) or value < 0:
                raise GeometryError(f"{name} must be a non-negative integer, got {value!r}")
        for name in _OPTIONAL_INT_FIELDS:
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise GeometryError(f"{name} must be a positive integer or absent, got {value!r}")
        for name in _DTYPE_FIELDS:
            canon = canonical_dtype(getattr(self, name), what=name)
            if canon == AUTO:
                raise GeometryError(f"{name} must be a concrete dtype, not 'auto'")
            object.__setattr__(self, name, canon)
        if self.num_layers < 1:
            raise GeometryError(f"num_layers must be at least 1, got {self.num_layers}")
        for name in _COUNT_FIELDS[1:]:
            if getattr(self, name) > self.num_layers:
                raise GeometryError(f"{name} ({getattr(self, name)}) exceeds num_layers ({self.num_layers})")
        mixers = self.full_attention_layers + self.sliding_window_layers + self.linear_attention_layers
        if mixers > self.num_layers:
            raise GeometryError(
                f"full_attention_layers + sliding_window_layers + linear_attention_layers = {mixers} "
                f"exceeds num_layers ({self.num_layers})"
            )
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise GeometryError("an MLA model needs both kv_lora_rank and qk_rope_head_dim")
        if self.is_mla and self.sliding_window_layers:
            raise GeometryError("sliding_window_layers with MLA is not supported")
        attention = self.sliding_window_layers + (0 if self.is_mla else self.full_attention_layers)
        if attention:
            if self.kv_heads < 1:
                raise GeometryError("kv_heads must be at least 1 for a model with attention layers")
            if self.head_dim < 1:
                raise GeometryError("head_dim must be at least 1 for a model with attention layers")
        if self.sliding_window_layers and self.sliding_window is None:
            raise GeometryError("sliding_window (tokens) is needed when sliding_window_layers > 0")
        if self.linear_attention_layers and not (self.linear_conv_elements or self.linear_recurrent_elements):
            raise GeometryError("linear-attention layers need a state size (linear_recurrent_elements)")
        if self.mamba_layers and not (self.mamba_conv_elements or self.mamba_ssm_elements):
            raise GeometryError("Mamba layers need a state size (mamba_ssm_elements)")
        if self.layer_kinds and len(self.layer_kinds) != self.num_layers:
            raise GeometryError(
                f"layer_kinds has {len(self.layer_kinds)} entries for {self.num_layers} layers"
            )

    # -- what kind of model -------------------------------------------------
    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def has_hybrid_layers(self) -> bool:
        """True when some layers keep per-request state outside the shared prefix cache."""
        return bool(self.sliding_window_layers or self.linear_attention_layers or self.mamba_layers)

    # -- dtypes --------------------------------------------------------------
    def kv_dtype(self, kv_dtype: str = AUTO) -> str:
        """Canonical KV cache dtype; "auto" is the model's dtype, as in vLLM."""
        return resolve_dtype(kv_dtype, model_dtype=self.model_dtype, what="KV cache dtype")

    def kv_dtype_bytes(self, kv_dtype: str = AUTO) -> int:
        return dtype_bytes(kv_dtype, model_dtype=self.model_dtype, what="KV cache dtype")

    # -- full attention: bytes per cached token -----------------------------
    def full_attention_bytes_per_token(self, kv_dtype: str = AUTO) -> int:
        """Bytes one cached token costs in the full-attention layers (MLA: latent + rope key, no K/V pair)."""
        b = self.kv_dtype_bytes(kv_dtype)
        if self.is_mla:
            assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
            return self.full_attention_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * b
        return self.full_attention_layers * 2 * self.kv_heads * self.head_dim * b

    def full_attention_bytes_per_block(
        self, block_size: int = DEFAULT_BLOCK_SIZE, kv_dtype: str = AUTO
    ) -> int:
        if not _is_int(block_size) or block_size < 1:
            raise GeometryError(f"block size must be a positive number of tokens, got {block_size!r}")
        return self.full_attention_bytes_per_token(kv_dtype) * block_size

    def full_attention_bytes(self, tokens: int, kv_dtype: str = AUTO) -> int:
        """Bytes `tokens` cached tokens cost. Size capacities from tokens, not blocks: a trace's block
        (Mooncake: 512 tokens) need not be the engine's (vLLM: 16)."""
        if not _is_int(tokens) or tokens < 0:
            raise GeometryError(f"tokens must be a non-negative integer, got {tokens!r}")
        return self.full_attention_bytes_per_token(kv_dtype) * tokens

    def full_attention_formula(self, kv_dtype: str = AUTO) -> str:
        b = self.kv_dtype_bytes(kv_dtype)
        total = self.full_attention_bytes_per_token(kv_dtype)
        if self.is_mla:
            return (
                f"{self.full_attention_layers} layers x ({self.kv_lora_rank} kv_lora_rank + "
                f"{self.qk_rope_head_dim} qk_rope_head_dim) x {b} B = {total:,} B"
            )
        return (
            f"{self.full_attention_layers} layers x 2 (K, V) x {self.kv_heads} KV heads x "
            f"{self.head_dim} head dim x {b} B = {total:,} B"
        )

    # -- hybrid layers: bytes per running request ---------------------------
    def sliding_window_bytes_per_token(self, kv_dtype: str = AUTO) -> int:
        return self.sliding_window_layers * 2 * self.kv_heads * self.head_dim * self.kv_dtype_bytes(kv_dtype)

    def sliding_window_tokens(self, context_tokens: int) -> int:
        """Tokens a sliding-window layer holds for one request: min(window, context)."""
        if not self.sliding_window_layers or self.sliding_window is None:
            return 0
        return min(self.sliding_window, context_tokens)

    def sliding_window_bytes_per_request(self, context_tokens: int, kv_dtype: str = AUTO) -> int:
        return self.sliding_window_bytes_per_token(kv_dtype) * self.sliding_window_tokens(context_tokens)

    @property
    def linear_state_bytes_per_layer(self) -> int:
        conv = self.linear_conv_elements * dtype_bytes(self.conv_state_dtype)
        return conv + self.linear_recurrent_elements * dtype_bytes(self.ssm_state_dtype)

    @property
    def mamba_state_bytes_per_layer(self) -> int:
        conv = self.mamba_conv_elements * dtype_bytes(self.conv_state_dtype)
        return conv + self.mamba_ssm_elements * dtype_bytes(self.ssm_state_dtype)

    @property
    def linear_state_bytes_per_request(self) -> int:
        return self.linear_attention_layers * self.linear_state_bytes_per_layer

    @property
    def mamba_state_bytes_per_request(self) -> int:
        return self.mamba_layers * self.mamba_state_bytes_per_layer

    # -- describing ----------------------------------------------------------
    def describe_layers(self) -> str:
        parts = []
        if self.full_attention_layers:
            parts.append(f"{self.full_attention_layers} full attention" + (" (MLA)" if self.is_mla else ""))
        if self.sliding_window_layers:
            parts.append(f"{self.sliding_window_layers} sliding window ({self.sliding_window:,} tokens)")
        if self.linear_attention_layers:
            parts.append(f"{self.linear_attention_layers} linear attention")
        if self.mamba_layers:
            parallel = self.full_attention_layers + self.mamba_layers > self.num_layers
            parts.append(
                f"{self.mamba_layers} Mamba" + (" (beside attention in the same layers)" if parallel else "")
            )
        mlp_only = self.layer_kinds.count(NO_MIXER)
        if mlp_only:
            parts.append(f"{mlp_only} MLP only")
        if not self.has_hybrid_layers and self.full_attention_layers == self.num_layers:
            return f"{self.num_layers} layers, all full attention" + (" (MLA)" if self.is_mla else "")
        return f"{self.num_layers} layers: " + ", ".join(parts or ["no attention or state layers"])

    def with_overrides(self, **overrides: Any) -> ModelGeometry:
        """A copy with the given numbers replaced; `None` values are ignored (unset CLI flags).

        `num_layers` alone on a model whose layers are all full attention moves the full-attention
        count with it; on a hybrid model it is ambiguous and refused. `state_dtype` sets both the conv
        and the recurrent state dtype.
        """
        changes = {k: v for k, v in overrides.items() if v is not None}
        if not changes:
            return self
        unknown = sorted(set(changes) - set(OVERRIDABLE))
        if unknown:
            raise GeometryError(f"unknown geometry override {unknown[0]!r}; known: {', '.join(OVERRIDABLE)}")
        if "state_dtype" in changes:
            state = changes.pop("state_dtype")
            changes.setdefault("conv_state_dtype", state)
            changes.setdefault("ssm_state_dtype", state)
        if "model_dtype" in changes:
            # State that followed the model dtype keeps following it; a dtype the config set stays.
            for name in ("conv_state_dtype", "ssm_state_dtype"):
                if getattr(self, name) == self.model_dtype:
                    changes.setdefault(name, changes["model_dtype"])
        if self.is_mla and {"kv_heads", "head_dim"} & set(changes):
            raise GeometryError(
                f"{self.name} uses MLA: its KV size is kv_lora_rank + qk_rope_head_dim per layer; "
                "kv_heads and head_dim do not apply (override kv_lora_rank / qk_rope_head_dim instead)"
            )
        if "num_layers" in changes and not (set(_COUNT_FIELDS[1:]) & set(changes)):
            if self.has_hybrid_layers or self.full_attention_layers != self.num_layers:
                raise GeometryError(
                    f"num_layers alone is ambiguous for {self.name} ({self.describe_layers()}); "
                    "also give full_attention_layers and the other layer counts"
                )
            changes["full_attention_layers"] = changes["num_layers"]
        for key, value in changes.items():
            if key in _DTYPE_FIELDS:
                continue
            if not _is_int(value):
                raise GeometryError(f"override {key} must be an integer, got {value!r}")
        layer_counts_changed = any(k in changes and changes[k] != getattr(self, k) for k in _COUNT_FIELDS)
        shown = ", ".join(f"{k}={v}" for k, v in sorted(changes.items()))
        return dataclasses.replace(
            self,
            layer_kinds=() if layer_counts_changed else self.layer_kinds,
            notes=self.notes + (f"overridden: {shown}",),
            **changes,
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["layer_kinds"] = list(self.layer_kinds)
        out["state_formulas"] = list(self.state_formulas)
        out["notes"] = list(self.notes)
        out["is_mla"] = self.is_mla
        out["has_hybrid_layers"] = self.has_hybrid_layers
        out["linear_state_bytes_per_layer"] = self.linear_state_bytes_per_layer
        out["mamba_state_bytes_per_layer"] = self.mamba_state_bytes_per_layer
        return out
