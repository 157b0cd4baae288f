"""A GPU's worth of KV (kvset.geometry.gpus): the KV share of one GPU from what the operator gives,
and the copies of each token's KV that tensor parallelism makes where the heads do not split."""

from __future__ import annotations

import pytest

from kvset.geometry import load_model
from kvset.geometry.gpus import gpu_budget, gpu_named, gpu_of_memory, kv_replicas

MIB = 2**20
H100 = 81_559 * MIB  # nvidia-smi's total of an H100 SXM "80GB"


def test_presets_are_found_in_any_case_and_an_unknown_name_lists_them():
    assert gpu_named("h100").memory_bytes == H100 and gpu_named(" MI300x ").name == "MI300X"
    with pytest.raises(ValueError, match="known: H100, H200, B200, MI300X") as err:
        gpu_named("H900")
    assert "\n" not in str(err.value)


def test_a_given_kv_fraction_is_the_share_of_memory_whatever_the_weights():
    budget = gpu_budget(gpu_named("H100"), tp=2, kv_fraction=0.5)
    assert budget.kv_bytes_per_gpu == H100 // 2 and not budget.lower_bound
    assert budget.gpus(H100) == pytest.approx(2.0)  # a whole H100 of KV fills two halves


def test_the_weights_over_tp_come_off_vllms_ninety_percent():
    gpu = gpu_of_memory(80 * 2**30)
    budget = gpu_budget(gpu, tp=4, weights_bytes=140 * 10**9)
    assert budget.kv_bytes_per_gpu == int(0.9 * 80 * 2**30) - 35 * 10**9
    assert "activations not counted" in budget.kv_from


def test_without_weights_or_a_fraction_the_count_is_a_lower_bound_and_says_so():
    budget = gpu_budget(gpu_named("H200"))
    assert budget.lower_bound and budget.kv_bytes_per_gpu == int(0.9 * gpu_named("H200").memory_bytes)
    assert "weights not counted" in budget.describe() and "a model" in budget.describe()


def test_weights_that_leave_no_room_are_refused_in_one_line():
    with pytest.raises(ValueError, match="raise --tp") as err:
        gpu_budget(gpu_named("H100"), tp=1, weights_bytes=140 * 10**9)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("model", "tp", "copies"),
    [
        ("llama-3.1-70b", 8, 1.0),  # 8 KV heads over 8 GPUs: one each
        ("llama-3.1-70b", 16, 2.0),  # 8 heads over 16 GPUs: every head on two
        ("qwen3-next-80b-a3b", 4, 2.0),  # 2 heads over 4 GPUs
        ("deepseek-v3", 8, 8.0),  # MLA: the whole latent on every GPU
        ("deepseek-v3", 1, 1.0),
    ],
)
def test_tp_beyond_the_kv_heads_holds_each_tokens_kv_several_times(model, tp, copies):
    geometry = load_model(model)
    assert kv_replicas(geometry, tp) == copies
    budget = gpu_budget(gpu_named("B200"), tp=tp, kv_fraction=0.25, geometry=geometry)
    assert budget.gpus(budget.kv_bytes_per_gpu) == pytest.approx(copies)
