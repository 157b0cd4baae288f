"""Unusable values in /metrics: bad labels and absurd gauges are ignored and noted, a broken counter rejects the poll."""

from __future__ import annotations

import re

import pytest

from kvset.engine import prometheus as prom
from kvset.engine.metrics_tracker import MetricsTracker
from tests.support import paths

FIXTURES = paths.FIXTURES / "metrics"
DP2 = (FIXTURES / "vllm_dp2.prom").read_text()  # two engines: 30000 and 10000 blocks of 16 tokens
SGLANG = (FIXTURES / "sglang_0_5.prom").read_text()


def engine0_config(block_size: str = "16", num_gpu_blocks: str = "30000") -> str:
    """vllm_dp2 with engine 0's cache_config_info labels replaced."""
    line = re.search(r'^vllm:cache_config_info\{[^}]*engine="0"[^}]*\} \S+$', DP2, flags=re.M)
    assert line is not None
    new = line.group().replace('block_size="16"', f'block_size="{block_size}"')
    new = new.replace('num_gpu_blocks="30000"', f'num_gpu_blocks="{num_gpu_blocks}"')
    return DP2.replace(line.group(), new)


def with_sample(body: str, name: str, value: str) -> str:
    """Every series of the sample `name` set to the literal `value`."""
    out, n = re.subn(rf"^({re.escape(name)}\{{[^}}]*\}}) \S+$", rf"\g<1> {value}", body, flags=re.M)
    assert n, name
    return out


@pytest.mark.parametrize("block_size", ["0", "-16", "abc", "None", "1_6", "\u0661\u0666", "9" * 5000, ""])
def test_an_engine_with_an_unusable_block_size_is_left_out_and_noted(block_size: str) -> None:
    c = prom.counters_from_text(engine0_config(block_size=block_size))
    # engine 0's capacity is unknown: no total is claimed from engine 1 alone
    assert c.pools is None
    assert c.block_size == 16  # engine 1's
    assert any("block_size" in d and "ignored" in d for d in c.describe)


@pytest.mark.parametrize("num_gpu_blocks", ["-5", "abc", "1e3", "1_000", "9" * 5000, "\u0661\u0660"])
def test_an_unusable_block_count_means_unknown_capacity_and_is_noted(num_gpu_blocks: str) -> None:
    c = prom.counters_from_text(engine0_config(num_gpu_blocks=num_gpu_blocks))
    assert c.pools is None and c.block_size == 16
    assert any("num_gpu_blocks" in d for d in c.describe)


def test_num_gpu_blocks_none_is_the_engine_before_profiling_not_an_error() -> None:
    c = prom.counters_from_text(engine0_config(num_gpu_blocks="None"))
    assert c.pools is None and c.block_size == 16
    assert not any("num_gpu_blocks" in d for d in c.describe)


def test_absurd_running_counts_on_several_engines_do_not_overflow() -> None:
    # 1e308 + 1e308 is inf, and int(inf) raises: the values are ignored instead
    c = prom.counters_from_text(with_sample(DP2, "vllm:num_requests_running", "1e308"))
    assert c.running is None and [p.num_gpu_blocks for p in c.pools] == [30000, 10000]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("sglang:page_size", "0.5"),
        ("sglang:page_size", "NaN"),
        ("sglang:page_size", "-16"),
        ("sglang:page_size", "1e308"),
    ],
)
def test_sglang_unusable_page_size_falls_back_to_the_default(name: str, value: str) -> None:
    c = prom.counters_from_text(with_sample(SGLANG, name, value))
    assert c.block_size == 1 and [(p.num_gpu_blocks, p.block_size) for p in c.pools] == [(402713, 1)]


@pytest.mark.parametrize("value", ["-5", "+Inf", "NaN", "1e308"])
def test_sglang_unusable_pool_size_is_unknown(value: str) -> None:
    c = prom.counters_from_text(with_sample(SGLANG, "sglang:max_total_num_tokens", value))
    assert c.pools is None


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1"])
def test_a_broken_counter_rejects_the_poll(value: str) -> None:
    # Dropping the series would turn the hit rate into 0; the poll is rejected and counted instead.
    body = with_sample(DP2, "vllm:prefix_cache_hits_total", value)
    with pytest.raises(prom.MetricsError) as info:
        prom.counters_from_text(body)
    assert info.value.reason == "unusable counter value"  # one reason counted, whatever the series
    assert "vllm:prefix_cache_hits_total" in info.value.detail and "vllm:prefix_cache_hits_total" in str(
        info.value
    )
    t = MetricsTracker()
    assert t.update(body, 0.0).error == str(info.value)


def test_the_tracker_never_raises_on_any_of_these_bodies() -> None:
    t = MetricsTracker(window_s=60.0)
    bodies = [
        DP2,
        engine0_config(block_size="0"),
        with_sample(DP2, "vllm:num_requests_running", "1e308"),
        with_sample(DP2, "vllm:prefix_cache_queries_total", "+Inf"),
        with_sample(DP2, "vllm:prefix_cache_hits_total", "NaN"),
        DP2,
    ]
    for i, body in enumerate(bodies):
        r = t.update(body, float(i))
        assert r.error is not None or r.reading is not None
        if r.reading is not None and r.reading.token_hit_rate is not None:
            assert 0.0 <= r.reading.token_hit_rate <= 1.0
