"""Build a ModelGeometry from a Hugging Face config.json (a local file; nothing is downloaded).

Each family spells its layer layout differently; the field names below are the ones the public
configs and the transformers/vLLM code that read them use:

- explicit per-layer list: `layer_types` (Gemma 3, gpt-oss, Qwen3-Next, Granite-H) or
  `layers_block_type` (Nemotron-H in newer transformers);
- `hybrid_override_pattern` (Nemotron-H: M = Mamba2, * = attention, - = MLP, E = MoE);
- `attn_layer_period` / `attn_layer_offset` (Jamba: attention where i % period == offset, else Mamba);
- `full_attention_interval` (Qwen3-Next: full attention where (i + 1) % interval == 0, else Gated DeltaNet);
- `sliding_window_pattern` (Gemma 3, Cohere2: full where (i + 1) % pattern == 0, else sliding);
- `use_sliding_window` + `max_window_layers` (Qwen2/Qwen3: sliding from layer max_window_layers on);
- `sliding_window` with no pattern (Mistral 7B v0.1): every attention layer is sliding;
- `model_type` falcon_h1: attention and Mamba2 side by side in every layer.

A few public configs omit fields that the model's transformers class fills with a default (Gemma 3
leaves out `sliding_window_pattern`; gemma-3-4b-it even its head counts). Those class defaults are
applied by model_type, and every one applied is listed in the geometry's notes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvset.geometry.config_fields import ConfigFields, type_name
from kvset.geometry.errors import GeometryError
from kvset.geometry.model import (
    ATTENTION_AND_MAMBA,
    FULL,
    LINEAR,
    MAMBA,
    NO_MIXER,
    SLIDING,
    ModelGeometry,
)

MAX_CONFIG_BYTES = 16 * 1024 * 1024  # a config.json is a few KiB; anything this big is the wrong file

_LAYER_TYPE_NAMES: dict[str, str] = {
    "full_attention": FULL,
    "attention": FULL,
    "global": FULL,
    "global_attention": FULL,
    "full": FULL,
    "sliding_attention": SLIDING,
    "sliding_window": SLIDING,
    "sliding": SLIDING,
    "local": SLIDING,
    "local_attention": SLIDING,
    "chunked_attention": SLIDING,  # Llama 4: a request holds at most one chunk per layer
    "linear_attention": LINEAR,  # resolved to Mamba for Nemotron-H below
    "mamba": MAMBA,
    "mamba2": MAMBA,
    "ssm": MAMBA,
    "hybrid": ATTENTION_AND_MAMBA,
    "mlp": NO_MIXER,
    "moe": NO_MIXER,
    "ffn": NO_MIXER,
    "dense": NO_MIXER,
}
_PATTERN_CHARS = {"M": MAMBA, "*": FULL, "-": NO_MIXER, "E": NO_MIXER}

_GDN_FIELDS = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)
_MAMBA_MARKERS = ("mamba_num_heads", "mamba_n_heads", "ssm_state_size", "mamba_d_state")


def geometry_from_config(config: Mapping[str, Any], *, name: str, source: str) -> ModelGeometry:
    """Read a parsed config.json. Raises GeometryError naming the missing or malformed field."""
    f = ConfigFields(config, where=source)
    kinds = _layer_kinds(f)
    num_layers = len(kinds)

    has_gdn = any(f.present(n) for n in _GDN_FIELDS)
    has_mamba = any(f.available(n) for n in _MAMBA_MARKERS)
    if LINEAR in kinds and not has_gdn:
        if has_mamba:  # Nemotron-H's newer layers_block_type calls its Mamba2 layers "linear_attention"
            kinds = [MAMBA if k == LINEAR else k for k in kinds]
        else:
            raise f.missing("linear_num_value_heads", "linear_attention layers need their state size fields")

    full = sum(k in (FULL, ATTENTION_AND_MAMBA) for k in kinds)
    sliding = kinds.count(SLIDING)
    linear = kinds.count(LINEAR)
    mamba = sum(k in (MAMBA, ATTENTION_AND_MAMBA) for k in kinds)

    model_dtype_field = f.dtype(("torch_dtype", "dtype"))
    if model_dtype_field is None:
        model_dtype = "bf16"
        f.notes.append("model dtype not in the config (torch_dtype / dtype): assumed bfloat16")
    else:
        model_dtype = model_dtype_field[1]
    ssm_dtype_field = f.dtype(("mamba_ssm_cache_dtype", "mamba_ssm_dtype"))
    ssm_state_dtype = ssm_dtype_field[1] if ssm_dtype_field else model_dtype

    kv_lora_rank = qk_rope_head_dim = None
    kv_heads = head_dim = 0
    if f.present("kv_lora_rank") and full:
        kv_lora_rank = f.int_field("kv_lora_rank")
        qk_rope_head_dim = f.int_field("qk_rope_head_dim", why="MLA stores the RoPE key beside the latent")
        if sliding:
            raise GeometryError(f"{source}: sliding-window layers in an MLA model are not supported")
    elif full or sliding:
        kv_heads, head_dim = _attention_shape(f)

    sliding_window = None
    if sliding:
        window_field = "sliding_window"
        if not f.available("sliding_window") and f.present("attention_chunk_size"):
            window_field = "attention_chunk_size"
        sliding_window = f.int_field(window_field, why="the model has sliding-window layers")

    formulas: list[str] = []
    linear_conv = linear_recurrent = 0
    if linear:
        linear_conv, linear_recurrent, text = _gated_delta_net_state(f)
        formulas.append(text)
    mamba_conv = mamba_ssm = 0
    if mamba:
        mamba_conv, mamba_ssm, text = _mamba_state(f)
        formulas.append(text)

    max_pos = f.text.get("max_position_embeddings")
    max_position_embeddings = max_pos if isinstance(max_pos, int) and not isinstance(max_pos, bool) else None
    if max_position_embeddings is not None and max_position_embeddings < 1:
        max_position_embeddings = None

    return ModelGeometry(
        name=name,
        source=source,
        model_type=f.model_type,
        num_layers=num_layers,
        full_attention_layers=full,
        kv_heads=kv_heads,
        head_dim=head_dim,
        model_dtype=model_dtype,
        sliding_window_layers=sliding,
        sliding_window=sliding_window,
        linear_attention_layers=linear,
        linear_conv_elements=linear_conv,
        linear_recurrent_elements=linear_recurrent,
        mamba_layers=mamba,
        mamba_conv_elements=mamba_conv,
        mamba_ssm_elements=mamba_ssm,
        conv_state_dtype=model_dtype,
        ssm_state_dtype=ssm_state_dtype,
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=qk_rope_head_dim,
        max_position_embeddings=max_position_embeddings,
        layer_kinds=tuple(kinds),
        state_formulas=tuple(formulas),
        notes=tuple(dict.fromkeys(f.notes)),  # each note once, in order
    )


def _layer_kinds(f: ConfigFields) -> list[str]:
    """One kind per layer, from the first layout field the config has (see module docstring)."""
    declared = f.optional_int("num_hidden_layers") if f.present("num_hidden_layers") else None

    def layer_count(why: str) -> int:
        if declared is None:
            raise f.missing("num_hidden_layers", why)
        return declared

    for list_field in ("layer_types", "layers_block_type"):
        if f.present(list_field):
            kinds = _kinds_from_list(f, list_field, f.text[list_field])
            if declared is not None and declared != len(kinds):
                raise GeometryError(
                    f"{f.where}: field {f._label(list_field)} has {len(kinds)} entries but "
                    f"{f._label('num_hidden_layers')} is {declared}"
                )
            return kinds

    if f.present("hybrid_override_pattern"):
        pattern = f.text["hybrid_override_pattern"]
        if not isinstance(pattern, str) or not pattern:
            raise GeometryError(
                f"{f.where}: field {f._label('hybrid_override_pattern')} must be a non-empty string "
                f"such as 'M-M*-', got {pattern!r}"
            )
        bad = sorted(set(pattern) - set(_PATTERN_CHARS))
        if bad:
            raise GeometryError(
                f"{f.where}: field {f._label('hybrid_override_pattern')} has unknown layer symbol {bad[0]!r} "
                "(known: M = Mamba, * = attention, - = MLP, E = MoE)"
            )
        if declared is not None and declared != len(pattern):
            raise GeometryError(
                f"{f.where}: field {f._label('hybrid_override_pattern')} has {len(pattern)} layers but "
                f"{f._label('num_hidden_layers')} is {declared}"
            )
        return [_PATTERN_CHARS[c] for c in pattern]

    if f.available("attn_layer_period"):
        n = layer_count("needed with attn_layer_period")
        period = f.int_field("attn_layer_period")
        offset = f.int_field("attn_layer_offset", minimum=0, why="needed with attn_layer_period")
        if offset >= period:
            raise GeometryError(
                f"{f.where}: attn_layer_offset ({offset}) must be below attn_layer_period ({period})"
            )
        return [FULL if i % period == offset else MAMBA for i in range(n)]

    if f.available("full_attention_interval"):
        n = layer_count("needed with full_attention_interval")
        interval = f.int_field("full_attention_interval")
        return [FULL if (i + 1) % interval == 0 else LINEAR for i in range(n)]

    if f.model_type == "falcon_h1":
        return [ATTENTION_AND_MAMBA] * layer_count("Falcon-H1 layers")

    n = layer_count("the number of decoder layers")
    window_present = f.present("sliding_window") or "sliding_window" in f.defaults

    if f.present("use_sliding_window"):
        use = f.text["use_sliding_window"]
        if not isinstance(use, bool):
            raise GeometryError(
                f"{f.where}: field {f._label('use_sliding_window')} must be true or false, got {use!r}"
            )
        if not use:
            if f.present("sliding_window"):
                f.notes.append("sliding_window ignored: use_sliding_window is false")
            return [FULL] * n
        first_sliding = f.int_field("max_window_layers", minimum=0, why="needed with use_sliding_window")
        return [SLIDING if i >= first_sliding else FULL for i in range(n)]

    if f.available("sliding_window_pattern") and window_present and f.raw("sliding_window") is not None:
        pattern = f.int_field("sliding_window_pattern")
        return [FULL if (i + 1) % pattern == 0 else SLIDING for i in range(n)]

    if f.present("sliding_window"):
        f.notes.append(
            "sliding_window with no per-layer pattern: every layer is sliding-window (as Mistral 7B v0.1)"
        )
        return [SLIDING] * n
    return [FULL] * n


def _kinds_from_list(f: ConfigFields, field_name: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise GeometryError(
            f"{f.where}: field {f._label(field_name)} must be a non-empty list of layer type names, got {value!r}"
        )
    kinds = []
    for i, entry in enumerate(value):
        kind = _LAYER_TYPE_NAMES.get(entry.strip().lower()) if isinstance(entry, str) else None
        if kind is None:
            raise GeometryError(
                f"{f.where}: field {f._label(field_name)}[{i}] is {entry!r}, not a layer type kvset knows "
                f"(known: {', '.join(sorted(_LAYER_TYPE_NAMES))}); override the layer counts instead"
            )
        kinds.append(kind)
    return kinds


def _attention_shape(f: ConfigFields) -> tuple[int, int]:
    """(KV heads, head dim) of the attention layers."""
    if f.available("num_key_value_heads") or f.available("num_kv_heads"):
        _, kv_heads = f.first_int(("num_key_value_heads", "num_kv_heads"), why="KV heads per attention layer")
    elif f.available("num_attention_heads"):
        kv_heads = f.int_field("num_attention_heads")
        f.notes.append(
            "num_key_value_heads not in the config: multi-head attention, KV heads = num_attention_heads"
        )
    else:
        raise f.missing("num_key_value_heads", "KV heads per attention layer")

    for name in ("head_dim", "attention_head_dim"):
        if f.available(name) and f.raw(name) is not None:
            return kv_heads, f.int_field(name)
    if not f.available("hidden_size"):
        raise GeometryError(
            f"{f.where}: missing field {f._label('head_dim')} (or {f._label('hidden_size')} and "
            f"{f._label('num_attention_heads')} to derive it)"
        )
    hidden = f.int_field("hidden_size")
    heads = f.int_field("num_attention_heads", why="head_dim = hidden_size / num_attention_heads")
    if hidden % heads:
        raise GeometryError(
            f"{f.where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}; "
            "the config needs an explicit head_dim"
        )
    return kv_heads, hidden // heads


def _gated_delta_net_state(f: ConfigFields) -> tuple[int, int, str]:
    """Per-layer conv and recurrent state of a Gated DeltaNet layer (Qwen3-Next), as vLLM allocates it."""
    nk, nv, dk, dv, kernel = (f.int_field(n, why="linear-attention state size") for n in _GDN_FIELDS)
    conv_dim = 2 * nk * dk + nv * dv
    conv = conv_dim * (kernel - 1)
    recurrent = nv * dk * dv
    text = (
        f"linear attention (Gated DeltaNet) per layer: conv (2 x {nk} x {dk} + {nv} x {dv}) x ({kernel} - 1) "
        f"= {conv:,} elements; recurrent {nv} x {dk} x {dv} = {recurrent:,} elements"
    )
    return conv, recurrent, text


def _mamba_state(f: ConfigFields) -> tuple[int, int, str]:
    """Per-layer conv and SSM state of a Mamba layer, as vLLM's MambaStateShapeCalculator sizes it."""
    heads_names = ("mamba_num_heads", "mamba_n_heads")
    if any(f.available(n) for n in heads_names):  # Mamba2: Nemotron-H, Falcon-H1, Granite-H, Bamba
        _, heads = f.first_int(heads_names, why="Mamba2 heads")
        _, d_state = f.first_int(("ssm_state_size", "mamba_d_state"), why="Mamba2 state size")
        _, groups = f.first_int(("n_groups", "mamba_n_groups"), why="Mamba2 B/C groups")
        _, kernel = f.first_int(("conv_kernel", "mamba_d_conv"), why="Mamba2 conv kernel")
        intermediate = None
        if f.present("mamba_d_ssm"):
            intermediate = f.int_field("mamba_d_ssm")
        head_dim_value = next(
            (f.text.get(n) for n in ("mamba_head_dim", "mamba_d_head") if f.text.get(n) is not None), None
        )
        if head_dim_value is None or head_dim_value == "auto":
            if intermediate is None:
                _, expand = f.first_int(
                    ("mamba_expand", "expand"), why="Mamba2 inner size = expand x hidden_size"
                )
                intermediate = expand * f.int_field("hidden_size", why="Mamba2 inner size")
            if intermediate % heads:
                raise GeometryError(
                    f"{f.where}: Mamba2 inner size {intermediate} is not a multiple of {heads} heads"
                )
            head_dim = intermediate // heads
        else:
            name = "mamba_head_dim" if f.present("mamba_head_dim") else "mamba_d_head"
            head_dim = f.check_int(name, head_dim_value)
        if intermediate is None:
            intermediate = heads * head_dim
        conv = (intermediate + 2 * groups * d_state) * (kernel - 1)
        ssm = heads * head_dim * d_state
        text = (
            f"Mamba2 per layer: conv ({intermediate} + 2 x {groups} x {d_state}) x ({kernel} - 1) = {conv:,} "
            f"elements; SSM {heads} x {head_dim} x {d_state} = {ssm:,} elements"
        )
        return conv, ssm, text

    if not any(f.available(n) for n in ("mamba_d_state", "mamba_d_conv", "mamba_expand")):
        raise GeometryError(
            f"{f.where}: missing field {f._label('ssm_state_size')} / {f._label('mamba_num_heads')} "
            "(Mamba2) or 'mamba_d_state' (Mamba1): Mamba layers need their state size fields"
        )
    # Mamba1 (Jamba): inner size expand x hidden_size.
    d_state = f.int_field("mamba_d_state", why="Mamba state size")
    kernel = f.int_field("mamba_d_conv", why="Mamba conv kernel")
    expand = f.int_field("mamba_expand", why="Mamba inner size = mamba_expand x hidden_size")
    intermediate = expand * f.int_field("hidden_size", why="Mamba inner size")
    conv = intermediate * (kernel - 1)
    ssm = intermediate * d_state
    text = (
        f"Mamba per layer: conv {intermediate} x ({kernel} - 1) = {conv:,} elements; "
        f"SSM {intermediate} x {d_state} = {ssm:,} elements"
    )
    return conv, ssm, text


def load_config_file(path: str | Path) -> tuple[dict[str, Any], Path]:
    """Read a config.json (or a model directory holding one). Returns (config, resolved file path)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise GeometryError(f"{p}: {size:,} bytes is too large to be a config.json")
        data = p.read_bytes()
    except FileNotFoundError:
        raise GeometryError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise GeometryError(f"{p}: is a directory") from None
    except OSError as exc:
        raise GeometryError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise GeometryError(
            f"{p}: not UTF-8 text (byte {exc.start}); is this really a config.json?"
        ) from None
    try:
        # Python's json accepts NaN / Infinity, which transformers writes (e.g. time_step_limit); fine here.
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GeometryError(
            f"{p}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise GeometryError(f"{p}: malformed JSON: nested too deeply") from None
    if not isinstance(config, dict):
        raise GeometryError(f"{p}: a config.json must hold a JSON object, got {type_name(config)}")
    return config, p


def geometry_from_file(path: str | Path, *, name: str | None = None) -> ModelGeometry:
    config, resolved = load_config_file(path)
    label = (
        name or (resolved.parent.name if resolved.name == "config.json" else resolved.stem) or str(resolved)
    )
    return geometry_from_config(config, name=label, source=str(resolved))
