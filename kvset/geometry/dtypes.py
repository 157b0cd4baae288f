"""Element sizes of the KV cache and of recurrent state, under the names engines and configs use.

`--kv-cache-dtype` in vLLM takes auto/bfloat16/fp8/fp8_e4m3/fp8_e5m2; config.json files say
"bfloat16" or "float16" in `torch_dtype` (newer files: `dtype`). All of them map to one canonical name.
"""

from __future__ import annotations

from kvset.geometry.errors import GeometryError

# canonical name -> bytes per element
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8_e4m3": 1, "fp8_e5m2": 1}

_ALIASES: dict[str, str] = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "torch.bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "torch.float16": "fp16",
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "torch.float32": "fp32",
    # vLLM's "fp8" means e4m3 on CUDA.
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
    "float8_e5m2": "fp8_e5m2",
    "e5m2": "fp8_e5m2",
}

# "auto" follows the model's own dtype, as vLLM's --kv-cache-dtype auto does.
AUTO = "auto"


def accepted_dtype_names() -> list[str]:
    return sorted(set(_ALIASES) | {AUTO})


def canonical_dtype(name: str, *, what: str = "dtype") -> str:
    """Canonical name for an alias ("bfloat16" -> "bf16"); "auto" stays "auto"."""
    if not isinstance(name, str):
        raise GeometryError(f"{what} must be a string such as bf16, fp16, fp8 or fp32, got {name!r}")
    key = name.strip().lower()
    if key == AUTO:
        return AUTO
    if key not in _ALIASES:
        shown = ", ".join(n for n in accepted_dtype_names() if not n.startswith("torch."))
        raise GeometryError(f"unknown {what} {name!r}; accepted: {shown}")
    return _ALIASES[key]


def dtype_bytes(name: str, *, model_dtype: str | None = None, what: str = "dtype") -> int:
    """Bytes per element; "auto" resolves to `model_dtype` (canonical name)."""
    canon = canonical_dtype(name, what=what)
    if canon == AUTO:
        if model_dtype is None:
            raise GeometryError(f"{what} 'auto' needs the model's dtype, which is unknown here")
        canon = canonical_dtype(model_dtype, what="model dtype")
        if canon == AUTO:
            raise GeometryError("the model's dtype cannot itself be 'auto'")
    return DTYPE_BYTES[canon]


def resolve_dtype(name: str, *, model_dtype: str, what: str = "dtype") -> str:
    """Canonical name with "auto" replaced by the model's dtype."""
    canon = canonical_dtype(name, what=what)
    return canonical_dtype(model_dtype, what="model dtype") if canon == AUTO else canon
