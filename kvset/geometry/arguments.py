"""Command-line flags for a model geometry, shared by `kvset model` and `kvset analyze --model`.

add_kv_cache_arguments / add_override_arguments / add_reserve_arguments put the flags on a parser;
geometry_from_args turns the parsed flags into a ModelGeometry with the overrides applied.
"""

from __future__ import annotations

import argparse

from kvset.argtypes import non_negative_int, positive_int
from kvset.geometry.dtypes import AUTO, canonical_dtype
from kvset.geometry.errors import GeometryError
from kvset.geometry.model import DEFAULT_BLOCK_SIZE, ModelGeometry
from kvset.geometry.resolve import load_model

# flag -> ModelGeometry field, with help text. Every geometry number can be overridden.
OVERRIDE_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--layers", "num_layers", "number of decoder layers"),
    (
        "--full-attention-layers",
        "full_attention_layers",
        "layers with full attention (their KV is the prefix cache)",
    ),
    ("--sliding-window-layers", "sliding_window_layers", "layers with sliding-window attention"),
    ("--linear-attention-layers", "linear_attention_layers", "linear-attention (Gated DeltaNet) layers"),
    ("--mamba-layers", "mamba_layers", "Mamba / SSM layers"),
    ("--kv-heads", "kv_heads", "KV heads per attention layer"),
    ("--head-dim", "head_dim", "dimension of one KV head"),
    ("--sliding-window", "sliding_window", "sliding window in tokens"),
    ("--kv-lora-rank", "kv_lora_rank", "MLA latent size per token per layer"),
    ("--qk-rope-head-dim", "qk_rope_head_dim", "MLA RoPE key size per token per layer"),
    ("--linear-conv-elements", "linear_conv_elements", "conv state elements per linear-attention layer"),
    (
        "--linear-state-elements",
        "linear_recurrent_elements",
        "recurrent state elements per linear-attention layer",
    ),
    ("--mamba-conv-elements", "mamba_conv_elements", "conv state elements per Mamba layer"),
    ("--mamba-state-elements", "mamba_ssm_elements", "SSM state elements per Mamba layer"),
)


def dtype_name(text: str) -> str:
    try:
        return canonical_dtype(text)
    except GeometryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_kv_cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kv-dtype",
        type=dtype_name,
        default=AUTO,
        metavar="DTYPE",
        help="KV cache dtype: auto (the model's dtype), bf16, fp16, fp8 (fp8_e4m3, fp8_e5m2), fp32 (default: auto)",
    )
    parser.add_argument(
        "--block-size",
        type=positive_int,
        default=DEFAULT_BLOCK_SIZE,
        metavar="TOKENS",
        help=f"tokens per KV block (default: {DEFAULT_BLOCK_SIZE}, as vLLM)",
    )


def add_reserve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--concurrency",
        type=non_negative_int,
        default=1,
        metavar="N",
        help="running requests that each hold hybrid-layer state (default: 1)",
    )
    parser.add_argument(
        "--context",
        type=non_negative_int,
        default=None,
        metavar="TOKENS",
        help="context length per running request (default: the model's max_position_embeddings)",
    )


def add_override_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("geometry overrides (replace the numbers read from the config)")
    for flag, _field, text in OVERRIDE_FLAGS:
        group.add_argument(flag, type=non_negative_int, default=None, metavar="N", help=text)
    group.add_argument(
        "--state-dtype",
        type=dtype_name,
        default=None,
        metavar="DTYPE",
        help="dtype of linear-attention and SSM state (default: the config's mamba_ssm_dtype, else the model dtype)",
    )
    group.add_argument(
        "--model-dtype",
        type=dtype_name,
        default=None,
        metavar="DTYPE",
        help="the model's dtype (what --kv-dtype auto means)",
    )


def overrides_from_args(args: argparse.Namespace) -> dict[str, object]:
    out: dict[str, object] = {}
    for flag, field, _text in OVERRIDE_FLAGS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is not None:
            out[field] = value
    if getattr(args, "state_dtype", None) is not None:
        out["state_dtype"] = args.state_dtype
    if getattr(args, "model_dtype", None) is not None:
        out["model_dtype"] = args.model_dtype
    return out


def geometry_from_args(spec: str, args: argparse.Namespace) -> ModelGeometry:
    """Load `spec` (preset or config.json) and apply the override flags. Raises GeometryError."""
    return load_model(spec).with_overrides(**overrides_from_args(args))


def context_tokens_from_args(geometry: ModelGeometry, args: argparse.Namespace) -> tuple[int, str]:
    """(context tokens, where the number came from) for the reserve."""
    if getattr(args, "context", None) is not None:
        return args.context, "given"
    if geometry.max_position_embeddings is not None:
        return geometry.max_position_embeddings, "max_position_embeddings"
    if geometry.sliding_window is not None:
        return geometry.sliding_window, "sliding window (no max_position_embeddings in the config)"
    return 0, "unknown (no max_position_embeddings in the config; give --context)"
