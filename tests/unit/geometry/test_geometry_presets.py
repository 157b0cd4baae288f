"""Built-in presets: bytes per token and per block for every family, computed by hand from the configs."""

import pytest

from kvset.geometry import (
    PRESETS,
    GeometryError,
    UnknownPresetError,
    canonical_dtype,
    load_model,
    load_preset,
    preset_names,
)

REQUIRED_PRESETS = {
    "llama-3.1-8b",
    "llama-3.1-70b",
    "qwen3-32b",
    "qwen3-235b-a22b",
    "mistral-large-2",
    "gemma-3-27b",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "qwen3-next-80b-a3b",
    "deepseek-v3",
}

# Expected bf16 bytes per cached token, each from the preset's config fields by hand.
BF16_BYTES_PER_TOKEN = {
    # 32 layers x 2 (K, V) x 8 KV heads x 128 (= 4096 / 32) x 2 B = 131,072
    "llama-3.1-8b": 131_072,
    # 80 layers x 2 x 8 KV heads x 128 (= 8192 / 64) x 2 B = 327,680
    "llama-3.1-70b": 327_680,
    # 28 layers x 2 x 4 KV heads x 128 (= 3584 / 28) x 2 B = 57,344 (sliding_window unused)
    "qwen2.5-7b": 57_344,
    # 80 layers x 2 x 8 x 128 (= 8192 / 64) x 2 B = 327,680
    "qwen2.5-72b": 327_680,
    # 64 layers x 2 x 8 KV heads x 128 head_dim x 2 B = 262,144
    "qwen3-32b": 262_144,
    # 94 layers x 2 x 4 KV heads x 128 head_dim x 2 B = 192,512
    "qwen3-235b-a22b": 192_512,
    # 32 layers x 2 x 8 x 128 (= 4096 / 32) x 2 B = 131,072
    "mistral-7b-v0.3": 131_072,
    # 88 layers x 2 x 8 KV heads x 128 (= 12288 / 96) x 2 B = 360,448
    "mistral-large-2": 360_448,
    # 62 layers, global every 6th -> layers 5, 11, ..., 59 = 10 full; 10 x 2 x 16 x 128 x 2 B = 81,920
    "gemma-3-27b": 81_920,
    # 24 layers alternating -> 12 full; 12 x 2 x 8 KV heads x 64 head_dim x 2 B = 24,576
    "gpt-oss-20b": 24_576,
    # 36 layers alternating -> 18 full; 18 x 2 x 8 x 64 x 2 B = 36,864
    "gpt-oss-120b": 36_864,
    # 48 layers, full every 4th -> 12 full; 12 x 2 x 2 KV heads x 256 head_dim x 2 B = 24,576
    "qwen3-next-80b-a3b": 24_576,
    # MLA: 61 layers x (512 kv_lora_rank + 64 qk_rope_head_dim) x 2 B = 70,272 (no factor 2)
    "deepseek-v3": 70_272,
    # pattern has 4 '*' -> 4 attention layers; 4 x 2 x 8 KV heads x 128 x 2 B = 16,384
    "nemotron-h-8b-base-8k": 16_384,
    # attention where i % 8 == 4 -> layers 4, 12, 20, 28; 4 x 2 x 8 x 128 (= 4096 / 32) x 2 B = 16,384
    "jamba-v0.1": 16_384,
}


def test_required_presets_exist_and_every_preset_has_an_expected_value():
    assert set(preset_names()) >= REQUIRED_PRESETS
    assert set(preset_names()) == set(BF16_BYTES_PER_TOKEN)
    assert any(PRESETS[n].family.lower().count("mamba") for n in preset_names())


@pytest.mark.parametrize(("name", "expected"), sorted(BF16_BYTES_PER_TOKEN.items()))
def test_bf16_bytes_per_token(name, expected):
    geometry = load_preset(name)
    assert geometry.full_attention_bytes_per_token("bf16") == expected
    assert geometry.full_attention_bytes_per_token() == expected  # auto = the model's bfloat16
    assert geometry.full_attention_bytes_per_block(16, "bf16") == expected * 16
    assert geometry.full_attention_bytes_per_block(1, "bf16") == expected


def test_llama_3_1_70b_is_320_kib_per_token():
    # docs/geometry.md, section 1: 80 x 8 x 128 x 2 (K, V) x 2 B = 327,680 B = 320 KiB.
    assert load_model("llama-3.1-70b").full_attention_bytes_per_token("bf16") == 327_680 == 320 * 1024


def test_preset_sources_name_a_repository():
    for name in preset_names():
        repo = PRESETS[name].repo
        assert repo.count("/") == 1, repo
        assert load_preset(name).source == f"preset {repo}"


def test_preset_layer_layouts():
    gemma = load_preset("gemma-3-27b")
    assert (gemma.num_layers, gemma.full_attention_layers, gemma.sliding_window_layers) == (62, 10, 52)
    assert [i for i, k in enumerate(gemma.layer_kinds) if k == "full_attention"] == [
        5,
        11,
        17,
        23,
        29,
        35,
        41,
        47,
        53,
        59,
    ]
    assert gemma.sliding_window == 1024
    assert any("sliding_window_pattern" in note for note in gemma.notes)  # the applied default is visible

    oss = load_preset("gpt-oss-20b")
    assert oss.layer_kinds[:4] == (
        "sliding_attention",
        "full_attention",
        "sliding_attention",
        "full_attention",
    )
    assert (oss.full_attention_layers, oss.sliding_window_layers, oss.sliding_window) == (12, 12, 128)

    nxt = load_preset("qwen3-next-80b-a3b")
    assert (nxt.full_attention_layers, nxt.linear_attention_layers) == (12, 36)
    assert nxt.layer_kinds[3] == "full_attention" and nxt.layer_kinds[0] == "linear_attention"

    nemo = load_preset("nemotron-h-8b-base-8k")
    assert (nemo.num_layers, nemo.full_attention_layers, nemo.mamba_layers) == (52, 4, 24)
    assert nemo.layer_kinds.count("mlp") == 24

    jamba = load_preset("jamba-v0.1")
    assert [i for i, k in enumerate(jamba.layer_kinds) if k == "full_attention"] == [4, 12, 20, 28]
    assert jamba.mamba_layers == 28

    ds = load_preset("deepseek-v3")
    assert ds.is_mla and not ds.has_hybrid_layers and ds.full_attention_layers == 61

    for dense in ("llama-3.1-8b", "qwen2.5-72b", "qwen3-235b-a22b", "mistral-large-2"):
        g = load_preset(dense)
        assert not g.has_hybrid_layers and g.full_attention_layers == g.num_layers


def test_qwen2_5_notes_that_its_sliding_window_is_off():
    assert any("use_sliding_window is false" in n for n in load_preset("qwen2.5-7b").notes)


@pytest.mark.parametrize(
    ("kv_dtype", "expected"),
    [
        # 80 x 2 x 8 x 128 = 163,840 elements per token for Llama-3.1-70B
        ("bf16", 327_680),
        ("bfloat16", 327_680),
        ("fp16", 327_680),
        ("float16", 327_680),
        ("half", 327_680),
        ("auto", 327_680),
        ("fp8", 163_840),
        ("fp8_e4m3", 163_840),
        ("fp8_e5m2", 163_840),
        ("float8_e4m3fn", 163_840),
        ("FP8", 163_840),
        ("fp32", 655_360),
        ("float32", 655_360),
    ],
)
def test_kv_dtype_aliases(kv_dtype, expected):
    assert load_preset("llama-3.1-70b").full_attention_bytes_per_token(kv_dtype) == expected


def test_mla_fp8_halves_the_latent():
    # 61 x (512 + 64) x 1 B = 35,136
    assert load_preset("deepseek-v3").full_attention_bytes_per_token("fp8") == 35_136


def test_canonical_dtype_names():
    assert canonical_dtype("fp8") == "fp8_e4m3"
    assert canonical_dtype("torch.bfloat16") == "bf16"
    assert canonical_dtype(" Float16 ") == "fp16"


def test_unknown_kv_dtype_lists_the_accepted_names():
    with pytest.raises(GeometryError, match="unknown KV cache dtype 'int3'.*bf16.*fp8"):
        load_preset("llama-3.1-8b").full_attention_bytes_per_token("int3")


def test_block_size_must_be_positive():
    g = load_preset("llama-3.1-8b")
    for bad in (0, -16, 1.5, True):
        with pytest.raises(GeometryError, match="block size"):
            g.full_attention_bytes_per_block(bad)


def test_preset_names_are_case_insensitive_and_unknown_names_get_suggestions():
    assert load_model("Llama-3.1-70B").name == "llama-3.1-70b"
    with pytest.raises(UnknownPresetError) as info:
        load_model("llama-3.1-7b")
    assert "llama-3.1-70b" in info.value.suggestions or "llama-3.1-8b" in info.value.suggestions
    assert "did you mean" in str(info.value)
    with pytest.raises(UnknownPresetError) as info:
        load_model("gpt-oss")
    assert set(info.value.suggestions) >= {"gpt-oss-20b", "gpt-oss-120b"}
