"""Prometheus text from vLLM (current and deprecated names) and SGLang: capacity, usage, hit rate."""

from __future__ import annotations

import re

import pytest

from kvset.engine import prometheus as prom
from kvset.engine.metrics_tracker import MetricsTracker
from kvset.units import NULL_BLOCKS_VLLM, EnginePool
from tests.support import paths

FIXTURES = paths.FIXTURES / "metrics"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def with_values(body: str, **values: float) -> str:
    """The fixture body with the named samples (sample name without labels) set to new values."""
    for name, value in values.items():
        metric = name.replace("__", ":")
        body = re.sub(rf"^({re.escape(metric)}(?:\{{[^}}]*\}})?) \S+$", rf"\g<1> {value!r}", body, flags=re.M)
    return body


def test_vllm_current_names() -> None:
    c = prom.counters_from_text(text("vllm_0_13.prom"))
    assert c.engine == "vllm"
    assert sum(c.queries.values()) == 8812352 and sum(c.hits.values()) == 6170224
    assert c.pools == (EnginePool(61275, 16, NULL_BLOCKS_VLLM, "0"),) and c.block_size == 16
    assert c.kv_usage == pytest.approx(0.4183)
    assert c.running == 3
    assert c.describe == ()


def test_vllm_deprecated_names_up_to_0_11() -> None:
    c = prom.counters_from_text(text("vllm_0_8_v1.prom"))
    assert sum(c.queries.values()) == 52480 and sum(c.hits.values()) == 31488
    assert c.pools == (
        EnginePool(27306, 16, NULL_BLOCKS_VLLM, ""),
    )  # cache_config_info without an engine label
    assert c.kv_usage == pytest.approx(0.0734)
    assert any("deprecated" in d for d in c.describe)


def test_vllm_data_parallel_engines_keep_their_own_pools_and_usage_is_weighted_by_capacity() -> None:
    c = prom.counters_from_text(text("vllm_dp2.prom"))
    # each engine (data-parallel rank) its own pool, with its own null block: unequal ranks are kept
    assert c.pools == (
        EnginePool(30000, 16, NULL_BLOCKS_VLLM, "0"),
        EnginePool(10000, 16, NULL_BLOCKS_VLLM, "1"),
    )
    assert c.kv_usage == pytest.approx((0.8 * 30000 + 0.2 * 10000) / 40000)
    assert c.running == 12
    assert sum(c.queries.values()) == 500000 and sum(c.hits.values()) == 320000
    assert any("2 engines" in d for d in c.describe)


def test_sglang_shards_of_one_pool_count_once_and_only_device_hits_count() -> None:
    c = prom.counters_from_text(text("sglang_0_5.prom"))
    assert c.engine == "sglang"
    assert c.pools == (EnginePool(402713 // 16, 16, 0, ""),)  # tp_rank 0 and 1 report the same pool
    assert c.block_size == 16
    assert sum(c.hits.values()) == 900000  # host hits are not GPU hits
    assert sum(c.queries.values()) == 1200000
    assert c.kv_usage == pytest.approx(0.37) and c.running == 12
    assert c.engine_hit_gauge == pytest.approx(0.7512)
    assert any("host" in d for d in c.describe)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("", "empty"),
        (text("vllm_0_13.prom")[:-1], "newline"),  # cut at the very end
        (text("vllm_0_13.prom")[: text("vllm_0_13.prom").index("0.4183") + 3], "newline"),  # cut mid-value
        ('vllm:kv_cache_usage_perc{engine="0",mod\n', "unparsable"),
        ("# HELP up up\n# TYPE up gauge\nup 1\n", "no vllm"),
    ],
)
def test_unusable_bodies_are_rejected_with_a_reason(body: str, reason: str) -> None:
    with pytest.raises(prom.MetricsError) as e:
        prom.counters_from_text(body)
    assert reason in e.value.reason


def test_tracker_hit_rate_from_counter_deltas_over_a_window() -> None:
    base = text("vllm_0_13.prom")
    t = MetricsTracker(window_s=10)
    r0 = t.update(
        with_values(base, vllm__prefix_cache_queries_total=1000.0, vllm__prefix_cache_hits_total=0.0), 0.0
    )
    assert r0.error is None and r0.reading.token_hit_rate is None  # one poll: no delta yet
    assert r0.reading.capacity_blocks == 61275 and r0.reading.label == "vllm metrics"
    r1 = t.update(
        with_values(base, vllm__prefix_cache_queries_total=2000.0, vllm__prefix_cache_hits_total=800.0), 4.0
    )
    assert r1.reading.token_hit_rate == pytest.approx(0.8) and r1.reading.hit_rate_window_s == 4.0
    r2 = t.update(
        with_values(base, vllm__prefix_cache_queries_total=4000.0, vllm__prefix_cache_hits_total=1000.0), 8.0
    )
    assert r2.reading.token_hit_rate == pytest.approx(1000 / 3000)
    # at 15 s the first delta (0..4 s) ended before the 10 s window began
    r3 = t.update(
        with_values(base, vllm__prefix_cache_queries_total=5000.0, vllm__prefix_cache_hits_total=1900.0), 15.0
    )
    assert r3.reading.token_hit_rate == pytest.approx((200 + 900) / (2000 + 1000))
    assert r3.reading.hit_rate_window_s == 11.0


def test_tracker_idle_window_falls_back_to_the_rate_since_start() -> None:
    base = text("vllm_0_13.prom")
    t = MetricsTracker(window_s=5)
    t.update(
        with_values(base, vllm__prefix_cache_queries_total=100.0, vllm__prefix_cache_hits_total=0.0), 0.0
    )
    t.update(
        with_values(base, vllm__prefix_cache_queries_total=300.0, vllm__prefix_cache_hits_total=100.0), 1.0
    )
    idle = t.update(
        with_values(base, vllm__prefix_cache_queries_total=300.0, vllm__prefix_cache_hits_total=100.0), 30.0
    )
    assert idle.reading.token_hit_rate == pytest.approx(0.5)
    assert idle.reading.hit_rate_window_s == 30.0


def test_counters_going_down_mean_an_engine_restart() -> None:
    base = text("vllm_0_13.prom")
    t = MetricsTracker(window_s=60)
    t.update(
        with_values(base, vllm__prefix_cache_queries_total=10000.0, vllm__prefix_cache_hits_total=9000.0), 0.0
    )
    t.update(
        with_values(base, vllm__prefix_cache_queries_total=20000.0, vllm__prefix_cache_hits_total=18000.0),
        1.0,
    )
    r = t.update(
        with_values(base, vllm__prefix_cache_queries_total=50.0, vllm__prefix_cache_hits_total=0.0), 2.0
    )
    assert [e.kind for e in r.events] == ["engine-reset"]
    assert r.reading.token_hit_rate is None  # no negative deltas, no stale rate from before the restart
    r = t.update(
        with_values(base, vllm__prefix_cache_queries_total=150.0, vllm__prefix_cache_hits_total=25.0), 3.0
    )
    assert r.reading.token_hit_rate == pytest.approx(0.25) and r.events == []
    assert t.resets == 1


def test_a_body_cut_at_a_line_end_is_rejected_until_it_persists() -> None:
    base = text("vllm_0_13.prom")
    t = MetricsTracker(window_s=60, accept_missing_after=3)
    t.update(base, 0.0)
    cut = base[: base.index("# HELP vllm:prefix_cache_queries_total")]
    assert t.update(cut, 1.0).error.startswith("incomplete response")
    assert t.update(cut, 2.0).error is not None
    third = t.update(cut, 3.0)  # three in a row: the engine really stopped exporting them
    assert third.error is None and third.reading.token_hit_rate is None


def test_sglang_hit_rate_from_device_cached_tokens_over_prompt_tokens() -> None:
    base = text("sglang_0_5.prom")
    t = MetricsTracker(window_s=60)
    t.update(base, 0.0)

    def bump(body: str, device: float, host: float, prompt: float) -> str:
        body = body.replace(
            'cache_source="device",model_name="meta-llama/Llama-3.1-8B-Instruct"} 900000.0',
            f'cache_source="device",model_name="meta-llama/Llama-3.1-8B-Instruct"}} {device!r}',
        )
        body = body.replace(
            'cache_source="host",model_name="meta-llama/Llama-3.1-8B-Instruct"} 60000.0',
            f'cache_source="host",model_name="meta-llama/Llama-3.1-8B-Instruct"}} {host!r}',
        )
        return with_values(body, sglang__prompt_tokens_total=prompt)

    r = t.update(bump(base, 900600.0, 61000.0, 1201000.0), 1.0)
    assert r.reading.token_hit_rate == pytest.approx(600 / 1000)  # host hits are not GPU hits
    assert r.reading.pools == (EnginePool(402713 // 16, 16, 0, ""),) and r.reading.block_size == 16
    assert r.reading.label == "sglang metrics"
    # each tier's own share since the first poll, for the Tiers figure (HiCache's host tier)
    assert dict(r.reading.tier_hits_since_start) == {"device": 600.0, "host": 1000.0}
    assert r.reading.queries_since_start == 1000.0


def test_sglang_storage_sources_are_kept_each_and_none_when_the_engine_names_no_source() -> None:
    body = text("sglang_0_5.prom").replace(
        'sglang:cached_tokens_total{cache_source="host",',
        'sglang:cached_tokens_total{cache_source="storage_hf3fs",model_name="m"} 7.0\n'
        'sglang:cached_tokens_total{cache_source="host",',
    )
    counters = prom.counters_from_text(body)
    assert dict(counters.hits_by_source) == {"device": 900000.0, "host": 60000.0, "storage_hf3fs": 7.0}
    plain = re.sub(
        r'cache_source="\w+",',
        "",
        text("sglang_0_5.prom").replace(
            'sglang:cached_tokens_total{cache_source="host",model_name="meta-llama/Llama-3.1-8B-Instruct"} 60000.0\n',
            "",
        ),
    )
    reading = MetricsTracker().update(plain, 0.0).reading
    assert reading.tier_hits_since_start is None and reading.queries_since_start == 0.0
