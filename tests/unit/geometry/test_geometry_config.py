"""Reading config.json files: every family's layout fields, overrides, and malformed input."""

import dataclasses
import json

import pytest

from kvset.geometry import (
    GeometryError,
    geometry_from_config,
    geometry_from_file,
    hybrid_reserve,
    load_model,
    load_preset,
)


def write_config(tmp_path, config, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def parse(config):
    return geometry_from_config(config, name="test", source="test/config.json")


# -- families, from files as users have them --------------------------------------------------------


def test_gemma_3_multimodal_config_reads_text_config(tmp_path):
    # google/gemma-3-27b-it as shipped: the language model's fields sit in text_config, dtype at the top.
    config = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "mm_tokens_per_image": 256,
        "text_config": {
            "head_dim": 128,
            "hidden_size": 5376,
            "intermediate_size": 21504,
            "model_type": "gemma3_text",
            "num_attention_heads": 32,
            "num_hidden_layers": 62,
            "num_key_value_heads": 16,
            "query_pre_attn_scalar": 168,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
        "torch_dtype": "bfloat16",
        "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27, "num_attention_heads": 16},
    }
    g = load_model(str(write_config(tmp_path, config)))
    assert g.name == tmp_path.name and g.source.endswith("config.json")
    # 10 global layers x 2 x 16 x 128 x 2 B = 81,920 (the vision tower's 27 layers are not counted)
    assert g.full_attention_bytes_per_token() == 81_920
    assert g.sliding_window_layers == 52
    # The preset is this same file's subset and goes through the same parser: identical geometry.
    preset = load_preset("gemma-3-27b")
    assert (
        dataclasses.replace(g, name=preset.name, source=preset.source, max_position_embeddings=131072)
        == preset
    )


def test_sparse_gemma_3_4b_config_uses_class_defaults_and_says_so():
    # gemma-3-4b-it's text_config names neither heads nor head_dim; Gemma3TextConfig defaults apply:
    # 8 heads, 4 KV heads, head_dim 256, a global layer every 6th -> layers 5, 11, 17, 23, 29 = 5 full.
    g = parse(
        {
            "model_type": "gemma3",
            "text_config": {
                "hidden_size": 2560,
                "model_type": "gemma3_text",
                "num_hidden_layers": 34,
                "sliding_window": 1024,
            },
            "torch_dtype": "bfloat16",
        }
    )
    # 5 x 2 x 4 KV heads x 256 x 2 B = 20,480
    assert g.full_attention_bytes_per_token() == 20_480
    assert (g.full_attention_layers, g.sliding_window_layers, g.kv_heads, g.head_dim) == (5, 29, 4, 256)
    joined = " ".join(g.notes)
    for field in ("num_key_value_heads", "head_dim", "sliding_window_pattern"):
        assert field in joined


def test_qwen2_with_sliding_window_enabled_uses_max_window_layers():
    g = parse(
        {
            "model_type": "qwen2",
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "hidden_size": 1024,
            "use_sliding_window": True,
            "sliding_window": 4096,
            "max_window_layers": 2,
            "torch_dtype": "bfloat16",
        }
    )
    assert g.layer_kinds == ("full_attention", "full_attention", "sliding_attention", "sliding_attention")
    # 2 full layers x 2 x 2 KV heads x 128 (= 1024 / 8) x 2 B = 2,048
    assert g.full_attention_bytes_per_token() == 2_048


def test_mistral_7b_v0_1_slides_every_layer():
    # mistralai/Mistral-7B-v0.1: sliding_window 4096 and no per-layer pattern.
    g = parse(
        {
            "model_type": "mistral",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "sliding_window": 4096,
            "torch_dtype": "bfloat16",
        }
    )
    assert g.full_attention_bytes_per_token() == 0
    # 32 x 2 x 8 x 128 x 2 B x min(4096, 10000) = 536,870,912 per request
    assert hybrid_reserve(g, 1, 10_000).total_bytes == 536_870_912
    assert any("every layer is sliding-window" in n for n in g.notes)


def test_llama_without_kv_heads_is_multi_head_attention():
    # Llama-2-7B style: no num_key_value_heads -> KV heads = attention heads (as transformers does).
    g = parse(
        {"model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096}
    )
    # 32 x 2 x 32 x 128 x 2 B (bfloat16 assumed: no torch_dtype) = 524,288
    assert g.full_attention_bytes_per_token() == 524_288
    assert any("multi-head attention" in n for n in g.notes)
    assert any("assumed bfloat16" in n for n in g.notes)


def test_float16_model_dtype_drives_auto_and_float32_too():
    base = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64}
    # 2 x 2 x 2 x 64 = 512 elements per token
    assert parse({**base, "torch_dtype": "float16"}).full_attention_bytes_per_token() == 1_024
    assert parse({**base, "dtype": "float32"}).full_attention_bytes_per_token() == 2_048
    assert parse({**base, "dtype": "float32"}).full_attention_bytes_per_token("fp8") == 512


def test_nemotron_h_new_layers_block_type_and_fp32_ssm_cache():
    # Newer Nemotron-H configs list layers_block_type and call the Mamba2 layers "linear_attention".
    g = parse(
        {
            "model_type": "nemotron_h",
            "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"],
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "mamba_num_heads": 64,
            "mamba_head_dim": 64,
            "ssm_state_size": 128,
            "n_groups": 8,
            "conv_kernel": 4,
            "mamba_ssm_cache_dtype": "float32",
            "torch_dtype": "bfloat16",
        }
    )
    assert (g.num_layers, g.full_attention_layers, g.mamba_layers, g.linear_attention_layers) == (4, 1, 1, 0)
    assert g.ssm_state_dtype == "fp32" and g.conv_state_dtype == "bf16"
    # 1 x 2 x 2 x 128 x 2 B = 1,024 per token
    assert g.full_attention_bytes_per_token() == 1_024
    # conv (64 x 64 + 2 x 8 x 128) x 3 = 6,144 x 3 = 18,432 elements x 2 B = 36,864;
    # SSM 64 x 64 x 128 = 524,288 elements x 4 B (float32) = 2,097,152; sum 2,134,016 per layer.
    assert g.mamba_state_bytes_per_layer == 2_134_016


def test_falcon_h1_has_attention_and_mamba_in_every_layer():
    g = parse(
        {
            "model_type": "falcon_h1",
            "num_hidden_layers": 4,
            "hidden_size": 1024,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "mamba_d_ssm": 1536,
            "mamba_n_heads": 24,
            "mamba_d_head": "auto",
            "mamba_n_groups": 1,
            "mamba_d_state": 256,
            "mamba_d_conv": 4,
            "torch_dtype": "bfloat16",
        }
    )
    assert (g.full_attention_layers, g.mamba_layers) == (4, 4)
    # 4 x 2 x 2 x 64 x 2 B = 2,048 per token
    assert g.full_attention_bytes_per_token() == 2_048
    # head dim auto = 1536 / 24 = 64; conv (1536 + 2 x 1 x 256) x 3 = 6,144; SSM 24 x 64 x 256 = 393,216;
    # (6,144 + 393,216) x 2 B = 798,720 per layer; x 4 layers = 3,194,880 per request
    assert hybrid_reserve(g, 1, 100).total_bytes == 3_194_880
    assert "beside attention" in g.describe_layers()


def test_granite_style_layer_types_with_mamba_and_attention():
    g = parse(
        {
            "model_type": "granitemoehybrid",
            "layer_types": ["mamba", "mamba", "mamba", "attention"],
            "num_hidden_layers": 4,
            "hidden_size": 768,
            "num_attention_heads": 12,
            "num_key_value_heads": 4,
            "mamba_n_heads": 24,
            "mamba_d_head": 64,
            "mamba_n_groups": 1,
            "mamba_d_state": 128,
            "mamba_d_conv": 4,
            "torch_dtype": "bfloat16",
        }
    )
    # 1 x 2 x 4 x 64 (= 768 / 12) x 2 B = 1,024
    assert g.full_attention_bytes_per_token() == 1_024
    # conv (24 x 64 + 2 x 128) x 3 = 1,792 x 3 = 5,376; SSM 24 x 64 x 128 = 196,608; x 2 B = 403,968 per layer
    assert g.mamba_state_bytes_per_layer == 403_968 and g.mamba_layers == 3


def test_head_dim_from_hidden_size_must_divide():
    with pytest.raises(GeometryError, match="not a multiple"):
        parse(
            {"num_hidden_layers": 2, "num_attention_heads": 7, "num_key_value_heads": 1, "hidden_size": 1000}
        )


# -- overrides -----------------------------------------------------------------------------------


def test_overrides_replace_numbers():
    g = load_preset("llama-3.1-70b")
    # 80 x 2 x 4 x 128 x 2 B = 163,840
    assert g.with_overrides(kv_heads=4).full_attention_bytes_per_token() == 163_840
    # 80 x 2 x 8 x 64 x 2 B = 163,840
    assert g.with_overrides(head_dim=64).full_attention_bytes_per_token() == 163_840
    # num_layers alone on a dense model moves the full-attention count: 40 x 2 x 8 x 128 x 2 = 163,840
    fewer = g.with_overrides(num_layers=40)
    assert (fewer.num_layers, fewer.full_attention_layers) == (40, 40)
    assert fewer.full_attention_bytes_per_token() == 163_840
    assert fewer.layer_kinds == ()  # the per-layer list no longer describes the model
    assert any(n.startswith("overridden:") and "num_layers=40" in n for n in fewer.notes)
    assert g.with_overrides() is g and g.with_overrides(kv_heads=None) is g


def test_overrides_on_hybrid_models():
    gemma = load_preset("gemma-3-27b")
    with pytest.raises(GeometryError, match="num_layers alone is ambiguous"):
        gemma.with_overrides(num_layers=30)
    # 5 full layers x 2 x 16 x 128 x 2 B = 40,960
    assert gemma.with_overrides(full_attention_layers=5).full_attention_bytes_per_token() == 40_960
    with pytest.raises(GeometryError, match="exceeds num_layers"):
        gemma.with_overrides(full_attention_layers=20)
    # A wider window: 12 x 2 x 8 x 64 x 2 B x 256 = 6,291,456 per request
    oss = load_preset("gpt-oss-20b").with_overrides(sliding_window=256)
    assert hybrid_reserve(oss, 1, 1_000).total_bytes == 6_291_456


def test_mla_overrides():
    ds = load_preset("deepseek-v3")
    # 61 x (256 + 64) x 2 B = 39,040
    assert ds.with_overrides(kv_lora_rank=256).full_attention_bytes_per_token() == 39_040
    with pytest.raises(GeometryError, match="MLA"):
        ds.with_overrides(kv_heads=8)


def test_bad_overrides_name_the_problem():
    g = load_preset("llama-3.1-8b")
    with pytest.raises(GeometryError, match="unknown geometry override 'kv_head'"):
        g.with_overrides(kv_head=4)
    with pytest.raises(GeometryError, match="kv_heads"):
        g.with_overrides(kv_heads="4")
    with pytest.raises(GeometryError, match="kv_heads must be at least 1"):
        g.with_overrides(kv_heads=0)
    with pytest.raises(GeometryError, match="ssm_state_dtype"):
        g.with_overrides(ssm_state_dtype="int4")


# -- malformed configs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 64}, "num_hidden_layers"),
        ({"num_hidden_layers": 2, "head_dim": 64}, "num_key_value_heads"),
        ({"num_hidden_layers": 2, "num_key_value_heads": 2}, "head_dim"),
        ({"num_hidden_layers": 2, "num_key_value_heads": 2, "hidden_size": 512}, "num_attention_heads"),
        (
            {"num_hidden_layers": 4, "full_attention_interval": 2, "num_key_value_heads": 2, "head_dim": 64},
            "linear_num_value_heads",
        ),
        (
            {
                "num_hidden_layers": 4,
                "full_attention_interval": 2,
                "num_key_value_heads": 2,
                "head_dim": 64,
                "linear_num_key_heads": 16,
                "linear_num_value_heads": 32,
                "linear_key_head_dim": 128,
                "linear_value_head_dim": 128,
            },
            "linear_conv_kernel_dim",
        ),
        ({"hybrid_override_pattern": "M*", "num_key_value_heads": 2, "head_dim": 64}, "ssm_state_size"),
        (
            {
                "layer_types": ["sliding_attention", "full_attention"],
                "num_key_value_heads": 2,
                "head_dim": 64,
            },
            "sliding_window",
        ),
        ({"num_hidden_layers": 2, "kv_lora_rank": 512}, "qk_rope_head_dim"),
        (
            {
                "num_hidden_layers": 2,
                "use_sliding_window": True,
                "sliding_window": 8,
                "num_key_value_heads": 1,
                "head_dim": 8,
            },
            "max_window_layers",
        ),
    ],
)
def test_missing_fields_are_named(config, field):
    with pytest.raises(GeometryError, match=f"missing field .*'{field}'"):
        parse(config)


def test_missing_field_in_text_config_is_named_with_its_section():
    with pytest.raises(GeometryError, match=r"'text_config\.num_hidden_layers'"):
        parse({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "sliding_window": 512}})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"num_hidden_layers": "32", "num_key_value_heads": 8, "head_dim": 128},
            r"'num_hidden_layers' must be an integer, got '32' \(string\)",
        ),
        (
            {"num_hidden_layers": True, "num_key_value_heads": 8, "head_dim": 128},
            "'num_hidden_layers' must be an integer",
        ),
        (
            {"num_hidden_layers": 0, "num_key_value_heads": 8, "head_dim": 128},
            "'num_hidden_layers' must be >= 1",
        ),
        (
            {"num_hidden_layers": 2, "num_key_value_heads": 8.5, "head_dim": 128},
            "'num_key_value_heads' must be an integer",
        ),
        ({"num_hidden_layers": 2, "num_key_value_heads": [8], "head_dim": 128}, r"\(array\)"),
        (
            {"num_hidden_layers": 2, "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": 16},
            "'torch_dtype' must be a dtype name",
        ),
        (
            {"num_hidden_layers": 2, "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "int2"},
            "unknown field 'torch_dtype' 'int2'",
        ),
        ({"text_config": [1, 2]}, "'text_config' must be an object"),
        (
            {"layer_types": ["full_attention", "conv"], "num_key_value_heads": 1, "head_dim": 8},
            r"'layer_types'\[1\] is 'conv'",
        ),
        (
            {"layer_types": "full_attention", "num_key_value_heads": 1, "head_dim": 8},
            "'layer_types' must be a non-empty list",
        ),
        (
            {
                "layer_types": ["full_attention"] * 3,
                "num_hidden_layers": 4,
                "num_key_value_heads": 1,
                "head_dim": 8,
            },
            "has 3 entries but 'num_hidden_layers' is 4",
        ),
        (
            {"hybrid_override_pattern": "M*X", "num_key_value_heads": 1, "head_dim": 8},
            "unknown layer symbol 'X'",
        ),
        (
            {"hybrid_override_pattern": "M*", "num_hidden_layers": 3},
            "has 2 layers but 'num_hidden_layers' is 3",
        ),
        (
            {
                "num_hidden_layers": 8,
                "attn_layer_period": 4,
                "attn_layer_offset": 4,
                "num_key_value_heads": 1,
                "head_dim": 8,
            },
            "attn_layer_offset",
        ),
        (
            {"num_hidden_layers": 2, "use_sliding_window": "yes", "num_key_value_heads": 1, "head_dim": 8},
            "'use_sliding_window' must be true or false",
        ),
    ],
)
def test_wrong_types_and_values_are_named(config, message):
    with pytest.raises(GeometryError, match=message):
        parse(config)


def test_integral_floats_are_accepted():
    g = parse({"num_hidden_layers": 2.0, "num_key_value_heads": 8, "head_dim": 128.0})
    assert g.full_attention_bytes_per_token() == 2 * 2 * 8 * 128 * 2


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(GeometryError, match="no such file"):
        geometry_from_file(tmp_path / "absent.json")
    with pytest.raises(GeometryError, match="no such file"):
        load_model(str(tmp_path / "absent" / "config.json"))

    bad = tmp_path / "bad.json"
    bad.write_text('{"num_hidden_layers": 32,\n "num_key_value_heads": }')
    with pytest.raises(GeometryError, match="malformed JSON at line 2 column"):
        geometry_from_file(bad)

    array = tmp_path / "array.json"
    array.write_text("[1, 2, 3]")
    with pytest.raises(GeometryError, match="must hold a JSON object, got array"):
        geometry_from_file(array)

    binary = tmp_path / "weights.json"
    binary.write_bytes(b"\x93NUMPY\xff\xfe")
    with pytest.raises(GeometryError, match="not UTF-8"):
        geometry_from_file(binary)

    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(GeometryError, match="malformed JSON"):
        geometry_from_file(empty)


def test_a_model_directory_means_its_config_json(tmp_path):
    model_dir = tmp_path / "Llama-3.1-8B"
    model_dir.mkdir()
    write_config(
        model_dir,
        {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096},
    )
    g = load_model(str(model_dir))
    assert g.name == "Llama-3.1-8B"
    assert g.full_attention_bytes_per_token() == load_preset("llama-3.1-8b").full_attention_bytes_per_token()


def test_nan_and_infinity_in_unrelated_fields_do_not_break_parsing(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(
        '{"num_hidden_layers": 2, "num_key_value_heads": 1, "head_dim": 8, "time_step_limit": [0.0, Infinity]}'
    )
    assert geometry_from_file(path).full_attention_bytes_per_token() == 2 * 2 * 1 * 8 * 2


def test_a_config_folder_name_with_control_characters_is_shown_escaped(tmp_path):
    folder = tmp_path / "evil\x1b]0;pwned\x07model"
    folder.mkdir()
    path = write_config(
        folder,
        {"model_type": "\x1b[31mllama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256},
    )
    g = geometry_from_file(path)
    shown = [g.name, *g.notes]
    assert not any(ch in text for text in shown for ch in "\x1b\x07")
    assert "\\x1b" in g.name
