"""Built-in model presets: the geometry-relevant subset of each model's public config.json.

Each entry keeps the real field names and values of the file in the named Hugging Face repository,
so a preset goes through exactly the parser a user's config.json goes through. Names are the makers'
model names, lower case.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from kvset.geometry.errors import GeometryError, UnknownPresetError
from kvset.geometry.hf_config import geometry_from_config
from kvset.geometry.model import ModelGeometry


@dataclass(frozen=True)
class Preset:
    name: str
    repo: str  # Hugging Face repository the config subset was taken from
    family: str
    config: dict[str, Any]


_PRESETS: tuple[Preset, ...] = (
    # Source: meta-llama/Llama-3.1-8B-Instruct config.json (head_dim = 4096 / 32 = 128).
    Preset(
        "llama-3.1-8b",
        "meta-llama/Llama-3.1-8B-Instruct",
        "Llama 3.x dense GQA",
        {
            "model_type": "llama",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: meta-llama/Llama-3.1-70B-Instruct config.json (head_dim = 8192 / 64 = 128).
    Preset(
        "llama-3.1-70b",
        "meta-llama/Llama-3.1-70B-Instruct",
        "Llama 3.x dense GQA",
        {
            "model_type": "llama",
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "hidden_size": 8192,
            "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: Qwen/Qwen2.5-7B-Instruct config.json (sliding_window is set but use_sliding_window is false).
    Preset(
        "qwen2.5-7b",
        "Qwen/Qwen2.5-7B-Instruct",
        "Qwen2.5 dense GQA",
        {
            "model_type": "qwen2",
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "hidden_size": 3584,
            "sliding_window": 131072,
            "use_sliding_window": False,
            "max_window_layers": 28,
            "max_position_embeddings": 32768,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: Qwen/Qwen2.5-72B-Instruct config.json.
    Preset(
        "qwen2.5-72b",
        "Qwen/Qwen2.5-72B-Instruct",
        "Qwen2.5 dense GQA",
        {
            "model_type": "qwen2",
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "hidden_size": 8192,
            "sliding_window": 131072,
            "use_sliding_window": False,
            "max_window_layers": 80,
            "max_position_embeddings": 32768,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: Qwen/Qwen3-32B config.json.
    Preset(
        "qwen3-32b",
        "Qwen/Qwen3-32B",
        "Qwen3 dense GQA",
        {
            "model_type": "qwen3",
            "num_hidden_layers": 64,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "hidden_size": 5120,
            "sliding_window": None,
            "use_sliding_window": False,
            "max_window_layers": 64,
            "max_position_embeddings": 40960,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: Qwen/Qwen3-235B-A22B config.json.
    Preset(
        "qwen3-235b-a22b",
        "Qwen/Qwen3-235B-A22B",
        "Qwen3 MoE GQA",
        {
            "model_type": "qwen3_moe",
            "num_hidden_layers": 94,
            "num_attention_heads": 64,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "hidden_size": 4096,
            "sliding_window": None,
            "use_sliding_window": False,
            "max_window_layers": 94,
            "max_position_embeddings": 40960,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: mistralai/Mistral-7B-Instruct-v0.3 config.json (no sliding window since v0.2).
    Preset(
        "mistral-7b-v0.3",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "Mistral dense GQA",
        {
            "model_type": "mistral",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "sliding_window": None,
            "max_position_embeddings": 32768,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: mistralai/Mistral-Large-Instruct-2407 config.json (Mistral Large 2; head_dim = 12288 / 96).
    Preset(
        "mistral-large-2",
        "mistralai/Mistral-Large-Instruct-2407",
        "Mistral dense GQA",
        {
            "model_type": "mistral",
            "num_hidden_layers": 88,
            "num_attention_heads": 96,
            "num_key_value_heads": 8,
            "hidden_size": 12288,
            "sliding_window": None,
            "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: google/gemma-3-27b-it config.json. The file omits sliding_window_pattern; Gemma3TextConfig's
    # default (6: five sliding layers, then one global) applies, and the geometry notes say so.
    Preset(
        "gemma-3-27b",
        "google/gemma-3-27b-it",
        "Gemma 3 interleaved local/global",
        {
            "model_type": "gemma3",
            "torch_dtype": "bfloat16",
            "text_config": {
                "model_type": "gemma3_text",
                "num_hidden_layers": 62,
                "num_attention_heads": 32,
                "num_key_value_heads": 16,
                "head_dim": 128,
                "hidden_size": 5376,
                "sliding_window": 1024,
                "max_position_embeddings": 131072,
            },
        },
    ),
    # Source: openai/gpt-oss-20b config.json (layer_types alternates sliding and full, 24 entries).
    Preset(
        "gpt-oss-20b",
        "openai/gpt-oss-20b",
        "gpt-oss alternating sliding/full",
        {
            "model_type": "gpt_oss",
            "num_hidden_layers": 24,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "hidden_size": 2880,
            "sliding_window": 128,
            "layer_types": ["sliding_attention", "full_attention"] * 12,
            "max_position_embeddings": 131072,
            "num_local_experts": 32,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: openai/gpt-oss-120b config.json (36 layers, same attention shape as gpt-oss-20b).
    Preset(
        "gpt-oss-120b",
        "openai/gpt-oss-120b",
        "gpt-oss alternating sliding/full",
        {
            "model_type": "gpt_oss",
            "num_hidden_layers": 36,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "hidden_size": 2880,
            "sliding_window": 128,
            "layer_types": ["sliding_attention", "full_attention"] * 18,
            "max_position_embeddings": 131072,
            "num_local_experts": 128,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: Qwen/Qwen3-Next-80B-A3B-Instruct config.json (Gated DeltaNet + gated attention, 3:1).
    Preset(
        "qwen3-next-80b-a3b",
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "Qwen3-Next linear-attention hybrid",
        {
            "model_type": "qwen3_next",
            "num_hidden_layers": 48,
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "hidden_size": 2048,
            "full_attention_interval": 4,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "linear_value_head_dim": 128,
            "use_sliding_window": False,
            "max_position_embeddings": 262144,
            "num_experts": 512,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: deepseek-ai/DeepSeek-V3 config.json (MLA: 512-dim latent + 64-dim RoPE key per layer).
    Preset(
        "deepseek-v3",
        "deepseek-ai/DeepSeek-V3",
        "DeepSeek-V3 MLA",
        {
            "model_type": "deepseek_v3",
            "num_hidden_layers": 61,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "hidden_size": 7168,
            "kv_lora_rank": 512,
            "q_lora_rank": 1536,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
            "v_head_dim": 128,
            "max_position_embeddings": 163840,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: nvidia/Nemotron-H-8B-Base-8K config.json (Mamba2 hybrid: 24 Mamba2, 4 attention, 24 MLP layers).
    Preset(
        "nemotron-h-8b-base-8k",
        "nvidia/Nemotron-H-8B-Base-8K",
        "Nemotron-H Mamba2 hybrid",
        {
            "model_type": "nemotron_h",
            "num_hidden_layers": 52,
            "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "attention_head_dim": 128,
            "hidden_size": 4096,
            "mamba_num_heads": 128,
            "mamba_head_dim": 64,
            "ssm_state_size": 128,
            "n_groups": 8,
            "conv_kernel": 4,
            "expand": 2,
            "max_position_embeddings": 8192,
            "torch_dtype": "bfloat16",
        },
    ),
    # Source: ai21labs/Jamba-v0.1 config.json (Mamba1 hybrid: attention at i % 8 == 4).
    Preset(
        "jamba-v0.1",
        "ai21labs/Jamba-v0.1",
        "Jamba Mamba hybrid",
        {
            "model_type": "jamba",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "attn_layer_period": 8,
            "attn_layer_offset": 4,
            "mamba_d_state": 16,
            "mamba_d_conv": 4,
            "mamba_expand": 2,
            "max_position_embeddings": 262144,
            "torch_dtype": "bfloat16",
        },
    ),
)

PRESETS: dict[str, Preset] = {p.name: p for p in _PRESETS}


def preset_names() -> list[str]:
    return [p.name for p in _PRESETS]


def suggest_presets(name: str, limit: int = 3) -> list[str]:
    key = name.strip().lower()
    close = difflib.get_close_matches(key, preset_names(), n=limit, cutoff=0.5)
    # A family prefix ("qwen3", "gpt-oss") should list its members even when difflib finds them far.
    prefixed = [n for n in preset_names() if key and (n.startswith(key) or key in n)]
    return list(dict.fromkeys(close + prefixed))[:limit]


def load_preset(name: str) -> ModelGeometry:
    key = name.strip().lower()
    preset = PRESETS.get(key)
    if preset is None:
        raise UnknownPresetError(name, suggest_presets(name))
    try:
        return geometry_from_config(preset.config, name=preset.name, source=f"preset {preset.repo}")
    except GeometryError as exc:  # a broken table entry is a bug here, not the user's input
        raise AssertionError(f"built-in preset {preset.name} does not parse: {exc}") from exc
