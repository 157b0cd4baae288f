"""Model KV geometry: bytes per token and per block, and the hybrid-layer reserve.

geometry = load_model("llama-3.1-70b")            # or a path to a config.json
geometry.full_attention_bytes_per_token("bf16")    # 327,680
hybrid_reserve(geometry, concurrency=8, context_tokens=32768, kv_dtype="bf16").total_bytes
"""

from kvset.geometry.dtypes import DTYPE_BYTES, canonical_dtype, dtype_bytes
from kvset.geometry.errors import GeometryError, UnknownPresetError
from kvset.geometry.hf_config import geometry_from_config, geometry_from_file, load_config_file
from kvset.geometry.model import DEFAULT_BLOCK_SIZE, ModelGeometry
from kvset.geometry.presets import PRESETS, Preset, load_preset, preset_names
from kvset.geometry.reserve import HybridReserve, hybrid_reserve
from kvset.geometry.resolve import load_model

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DTYPE_BYTES",
    "PRESETS",
    "GeometryError",
    "HybridReserve",
    "ModelGeometry",
    "Preset",
    "UnknownPresetError",
    "canonical_dtype",
    "dtype_bytes",
    "geometry_from_config",
    "geometry_from_file",
    "hybrid_reserve",
    "load_config_file",
    "load_model",
    "load_preset",
    "preset_names",
]
