"""Typed access to the fields of a Hugging Face config.json, with the transformers class defaults.

The language model's fields may sit at the top level or, in multimodal configs, in a sub-object
(`text_config` and its kin). Every error names the field as the config spells it; every class
default applied for a field the config leaves out is recorded in `notes` (see kvset.geometry.hf_config
for the families).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvset.geometry.dtypes import canonical_dtype
from kvset.geometry.errors import GeometryError

# Where multimodal configs keep the language model's fields.
_TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")

# transformers class defaults for fields that public configs leave out (see module docstring).
_MODEL_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {
    # Gemma3TextConfig: five local layers per global one; window 4096; 8 heads, 4 KV heads, head_dim 256.
    "gemma3_text": {
        "sliding_window_pattern": 6,
        "sliding_window": 4096,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
    },
    # Gemma2Config and GptOssConfig alternate local and global layers, starting with a local one.
    "gemma2": {"sliding_window_pattern": 2, "sliding_window": 4096, "head_dim": 256},
    "gpt_oss": {"sliding_window_pattern": 2, "sliding_window": 128, "head_dim": 64},
    # Qwen3NextConfig: one full-attention layer in every four.
    "qwen3_next": {"full_attention_interval": 4},
    # JambaConfig: attention at i % 8 == 4; Mamba1 with d_state 16, d_conv 4, expand 2.
    "jamba": {
        "attn_layer_period": 8,
        "attn_layer_offset": 4,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
    },
}
# Top-level model_type of a multimodal wrapper -> the text model's type, when text_config omits it.
_WRAPPER_TEXT_TYPES = {"gemma3": "gemma3_text"}


def type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", float: "number"}.get(
        type(value), type(value).__name__
    )


class ConfigFields:
    """Typed access to the language-model part of a config, naming the field in every error."""

    def __init__(self, config: Mapping[str, Any], where: str):
        if not isinstance(config, Mapping):
            raise GeometryError(f"{where}: a config.json must hold a JSON object, got {type_name(config)}")
        self.top = config
        self.where = where
        self.section = ""
        self.text: Mapping[str, Any] = config
        for key in _TEXT_CONFIG_KEYS:
            sub = config.get(key)
            if sub is None:
                continue
            if not isinstance(sub, Mapping):
                raise GeometryError(f"{where}: field '{key}' must be an object, got {type_name(sub)}")
            self.text, self.section = sub, key
            break
        model_type = self.text.get("model_type")
        if model_type is None and self.section:
            top_type = config.get("model_type")
            model_type = _WRAPPER_TEXT_TYPES.get(top_type, top_type) if isinstance(top_type, str) else None
        if model_type is not None and not isinstance(model_type, str):
            raise GeometryError(f"{where}: field 'model_type' must be a string, got {type_name(model_type)}")
        self.model_type: str | None = model_type
        self.defaults = _MODEL_TYPE_DEFAULTS.get(model_type or "", {})
        self.notes: list[str] = []

    def _label(self, name: str) -> str:
        return f"'{self.section}.{name}'" if self.section else f"'{name}'"

    def present(self, name: str) -> bool:
        return self.text.get(name) is not None

    def raw(self, name: str) -> Any:
        value = self.text.get(name)
        if value is None and name in self.defaults:
            value = self.defaults[name]
            self.notes.append(f"{name} = {value!r}: not in the config, {self.model_type} default")
        return value

    def available(self, name: str) -> bool:
        return self.present(name) or name in self.defaults

    def missing(self, name: str, why: str = "") -> GeometryError:
        reason = f" ({why})" if why else ""
        return GeometryError(f"{self.where}: missing field {self._label(name)}{reason}")

    def int_field(self, name: str, *, why: str = "", minimum: int = 1) -> int:
        value = self.raw(name)
        if value is None:
            raise self.missing(name, why)
        return self.check_int(name, value, minimum=minimum)

    def optional_int(self, name: str, *, minimum: int = 1) -> int | None:
        value = self.raw(name)
        return None if value is None else self.check_int(name, value, minimum=minimum)

    def check_int(self, name: str, value: Any, *, minimum: int = 1) -> int:
        # JSON writers sometimes store 128 as 128.0; accept integral floats, nothing else.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise GeometryError(
                f"{self.where}: field {self._label(name)} must be an integer, got {value!r} ({type_name(value)})"
            )
        if value < minimum:
            raise GeometryError(f"{self.where}: field {self._label(name)} must be >= {minimum}, got {value}")
        return value

    def first_int(self, names: tuple[str, ...], *, why: str, minimum: int = 1) -> tuple[str, int]:
        for name in names:
            if self.available(name):
                value = self.raw(name)
                if value is not None:
                    return name, self.check_int(name, value, minimum=minimum)
        alternatives = " or ".join(self._label(n) for n in names)
        raise GeometryError(f"{self.where}: missing field {alternatives} ({why})")

    def dtype(self, names: tuple[str, ...]) -> tuple[str, str] | None:
        """(field, canonical dtype) of the first dtype field found in text_config, then the top level."""
        for scope in (self.text, self.top):
            for name in names:
                value = scope.get(name)
                if value is None or value == "auto":
                    continue
                if not isinstance(value, str):
                    raise GeometryError(
                        f"{self.where}: field '{name}' must be a dtype name, got {value!r} ({type_name(value)})"
                    )
                try:
                    return name, canonical_dtype(value, what=f"field '{name}'")
                except GeometryError as exc:
                    raise GeometryError(f"{self.where}: {exc}") from None
        return None
