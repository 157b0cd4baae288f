"""The hybrid reserve: per-request sliding-window KV and linear / SSM state, times the concurrency."""

import pytest

from kvset.geometry import GeometryError, hybrid_reserve, load_preset


@pytest.mark.parametrize("name", ["llama-3.1-70b", "qwen3-32b", "mistral-large-2", "deepseek-v3"])
def test_a_model_without_hybrid_layers_reserves_nothing_and_says_so(name):
    reserve = hybrid_reserve(load_preset(name), concurrency=64, context_tokens=131_072, kv_dtype="bf16")
    assert reserve.total_bytes == 0
    assert reserve.per_request_bytes == 0
    assert not reserve.has_hybrid_layers
    assert reserve.summary() == "no hybrid layers: reserve 0"
    assert reserve.to_dict()["total_bytes"] == 0


def test_gemma_3_interleaved_sliding_window():
    g = load_preset("gemma-3-27b")
    # 52 sliding layers x 2 x 16 KV heads x 128 x 2 B = 425,984 B per token of window;
    # x min(1024, 32768) = 1024 tokens = 436,207,616 B (416 MiB) per request; x 8 = 3,489,660,928.
    r = hybrid_reserve(g, concurrency=8, context_tokens=32_768, kv_dtype="bf16")
    assert r.sliding_window_tokens == 1024
    assert r.sliding_window_bytes_per_request == 436_207_616
    assert r.per_request_bytes == 436_207_616
    assert r.total_bytes == r.sliding_window_bytes == 3_489_660_928
    assert r.state_bytes == 0 and r.linear_state_bytes == 0 and r.mamba_state_bytes == 0

    # A short context holds only its own tokens: 425,984 x 500 = 212,992,000.
    short = hybrid_reserve(g, concurrency=1, context_tokens=500, kv_dtype="bf16")
    assert short.sliding_window_tokens == 500
    assert short.total_bytes == 212_992_000

    # fp8 KV halves the window too: 436,207,616 / 2 = 218,103,808.
    assert hybrid_reserve(g, 1, 4096, "fp8").total_bytes == 218_103_808
    assert hybrid_reserve(g, 1, 0, "bf16").total_bytes == 0


def test_gpt_oss_alternating_sliding_and_full():
    # gpt-oss-120b: 18 sliding layers x 2 x 8 KV heads x 64 x 2 B = 36,864 B per window token.
    g = load_preset("gpt-oss-120b")
    r = hybrid_reserve(g, concurrency=64, context_tokens=100, kv_dtype="bf16")
    assert r.sliding_window_bytes_per_request == 3_686_400  # 36,864 x 100
    assert r.total_bytes == 235_929_600  # x 64
    # Beyond the 128-token window the per-request size stops growing: 36,864 x 128 = 4,718,592.
    assert hybrid_reserve(g, 1, 100_000, "bf16").total_bytes == 4_718_592
    # gpt-oss-20b: 12 x 2 x 8 x 64 x 2 B x 128 = 3,145,728 per request.
    assert hybrid_reserve(load_preset("gpt-oss-20b"), 1, 8192, "bf16").total_bytes == 3_145_728


def test_qwen3_next_linear_attention_state_is_fixed_per_request():
    g = load_preset("qwen3-next-80b-a3b")
    # Gated DeltaNet layer: conv (2 x 16 x 128 + 32 x 128) x (4 - 1) = 8,192 x 3 = 24,576 elements,
    # recurrent 32 value heads x 128 x 128 = 524,288 elements; bf16: (24,576 + 524,288) x 2 = 1,097,728 B.
    assert g.linear_conv_elements == 24_576
    assert g.linear_recurrent_elements == 524_288
    assert g.linear_state_bytes_per_layer == 1_097_728
    r = hybrid_reserve(g, concurrency=10, context_tokens=1_000, kv_dtype="bf16")
    assert r.linear_state_bytes_per_request == 39_518_208  # 36 layers x 1,097,728
    assert r.sliding_window_bytes_per_request == 0
    assert r.total_bytes == r.linear_state_bytes == 395_182_080  # x 10
    # The state does not depend on the context length, nor on the KV cache dtype.
    assert hybrid_reserve(g, 10, 200_000, "fp8").total_bytes == 395_182_080


def test_nemotron_h_mamba2_state():
    g = load_preset("nemotron-h-8b-base-8k")
    # Mamba2 layer: conv (128 heads x 64 + 2 x 8 groups x 128) x (4 - 1) = 10,240 x 3 = 30,720 elements,
    # SSM 128 x 64 x 128 = 1,048,576 elements; bf16: (30,720 + 1,048,576) x 2 = 2,158,592 B.
    assert (g.mamba_conv_elements, g.mamba_ssm_elements) == (30_720, 1_048_576)
    assert g.mamba_state_bytes_per_layer == 2_158_592
    r = hybrid_reserve(g, concurrency=16, context_tokens=8192, kv_dtype="bf16")
    assert r.mamba_state_bytes_per_request == 51_806_208  # 24 layers x 2,158,592
    assert r.total_bytes == r.mamba_state_bytes == 828_899_328  # x 16


def test_jamba_mamba1_state():
    g = load_preset("jamba-v0.1")
    # Mamba1 layer: inner 2 x 4096 = 8,192; conv 8,192 x 3 = 24,576, SSM 8,192 x 16 = 131,072 elements;
    # bf16: (24,576 + 131,072) x 2 = 311,296 B; 28 Mamba layers = 8,716,288 B per request.
    r = hybrid_reserve(g, concurrency=2, context_tokens=4096, kv_dtype="bf16")
    assert r.mamba_state_bytes_per_layer == 311_296
    assert r.total_bytes == 17_432_576  # 8,716,288 x 2


def test_state_dtype_override_changes_the_state_not_the_window():
    g = load_preset("qwen3-next-80b-a3b").with_overrides(state_dtype="fp32")
    # (24,576 + 524,288) x 4 B x 36 layers = 79,036,416
    assert hybrid_reserve(g, 1, 10, "bf16").total_bytes == 79_036_416
    # Only the recurrent part in fp32: 24,576 x 2 + 524,288 x 4 = 2,146,304 per layer x 36 = 77,266,944.
    mixed = load_preset("qwen3-next-80b-a3b").with_overrides(ssm_state_dtype="float32")
    assert hybrid_reserve(mixed, 1, 10).total_bytes == 77_266_944


def test_zero_concurrency_is_zero_and_bad_counts_are_refused():
    g = load_preset("gemma-3-27b")
    assert hybrid_reserve(g, 0, 32_768).total_bytes == 0
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(GeometryError, match="concurrency"):
            hybrid_reserve(g, bad, 1024)
        with pytest.raises(GeometryError, match="context"):
            hybrid_reserve(g, 1, bad)


def test_reserve_dict_breaks_the_parts_down():
    r = hybrid_reserve(load_preset("gemma-3-27b"), 2, 2048, "bf16").to_dict()
    assert r["sliding_window"] == {
        "layers": 52,
        "window_tokens": 1024,
        "tokens_per_request": 1024,
        "bytes_per_request": 436_207_616,
        "bytes": 872_415_232,
    }
    assert r["linear_attention"]["bytes"] == 0 and r["mamba"]["bytes"] == 0
    assert r["total_bytes"] == 872_415_232 and r["kv_dtype"] == "bf16"
    assert "per request" in r["summary"]


def test_model_dtype_override_carries_state_that_followed_it():
    g = load_preset("qwen3-next-80b-a3b").with_overrides(model_dtype="fp32")
    assert (g.conv_state_dtype, g.ssm_state_dtype) == ("fp32", "fp32")
    assert g.full_attention_bytes_per_token() == 49_152  # auto now means fp32: 12 x 2 x 2 x 256 x 4 B
    assert g.full_attention_bytes(10) == 491_520
    with pytest.raises(GeometryError, match="tokens"):
        g.full_attention_bytes(-1)
