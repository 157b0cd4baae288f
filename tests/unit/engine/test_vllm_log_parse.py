"""vLLM log lines of both generations, token-id extraction, truncation, stats and capacity lines."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from kvset.engine import vllm_log as v
from kvset.formats.vllm_hash import block_keys
from tests.support import paths

FIXTURES = paths.FIXTURES / "logs"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def parse(line: str):
    return v.parse_line(line)[1]


@pytest.mark.parametrize(
    ("line", "proc", "pid", "level", "mdt", "src"),
    [
        (
            "(EngineCore_DP0 pid=2390) INFO 03-14 09:12:40 [kv_cache_utils.py:1286] msg",
            "EngineCore_DP0",
            2390,
            "INFO",
            (3, 14, 9, 12, 40, 0.0),
            "kv_cache_utils.py:1286",
        ),
        (
            "DEBUG 11-02 17:40:12 [logger.py:41] msg",
            None,
            None,
            "DEBUG",
            (11, 2, 17, 40, 12, 0.0),
            "logger.py:41",
        ),
        # early vLLM: no opening bracket before the file name
        (
            "WARNING 04-12 10:00:00 config.py:123] msg",
            None,
            None,
            "WARNING",
            (4, 12, 10, 0, 0, 0.0),
            "config.py:123",
        ),
        # Ray workers, a VLLM_LOGGING_PREFIX, milliseconds, colours from a terminal
        (
            "(RayWorkerWrapper pid=77, ip=10.1.2.3) [node-7] INFO 01-05 08:00:01.250 [worker.py:9] msg",
            "RayWorkerWrapper",
            77,
            "INFO",
            (1, 5, 8, 0, 1, 0.25),
            "worker.py:9",
        ),
        (
            "\x1b[1;36m(APIServer pid=5)\x1b[0;0m \x1b[32mINFO\x1b[0m 06-30 23:59:59 [api.py:1] msg",
            "APIServer",
            5,
            "INFO",
            (6, 30, 23, 59, 59, 0.0),
            "api.py:1",
        ),
    ],
)
def test_prefix_forms(line, proc, pid, level, mdt, src) -> None:
    prefix, msg = v.split_prefix(v.strip_ansi(line))
    assert (prefix.proc, prefix.pid, prefix.level, prefix.month_day_time, prefix.source) == (
        proc,
        pid,
        level,
        mdt,
        src,
    )
    assert msg == "msg"


def test_line_without_prefix_is_still_read() -> None:
    rec = parse("Request r1 details: prompt: 'x', prompt_token_ids: [5, 6], prompt_embeds shape: None.")
    assert isinstance(rec, v.RequestPrompt)
    assert rec.token_ids.tolist() == [5, 6]


def test_prompt_repr_with_brackets_quotes_and_the_field_name_inside() -> None:
    text = 'say "prompt_token_ids: [1, 2]", it\'s [3, 4], C:\\new\n'
    line = (
        f"(APIServer pid=1) DEBUG 03-14 09:13:05 [logger.py:48] Request chatcmpl-9 details: prompt: {text!r}, "
        "prompt_token_ids: [10, 20, 30], prompt_embeds shape: None."
    )
    rec = parse(line)
    assert rec.request_id == "chatcmpl-9"
    assert rec.token_ids.tolist() == [10, 20, 30]
    assert rec.prompt_chars == len(text)
    assert rec.form == "details" and rec.truncated == ""


def test_old_received_line_skips_params_that_mention_the_field() -> None:
    params = "SamplingParams(n=1, stop=[', prompt_token_ids: [9, 9]'], max_tokens=16)"
    line = (
        f"INFO 11-02 17:40:12 [logger.py:41] Received request cmpl-1-0: prompt: 'hi', params: {params}, "
        "prompt_token_ids: [1, 2, 3], prompt_embeds shape: None, lora_request: None."
    )
    rec = parse(line)
    assert rec.form == "received" and rec.token_ids.tolist() == [1, 2, 3]


def test_newer_received_line_without_ids_and_with_an_info_preview() -> None:
    plain = parse(
        "INFO 03-14 09:13:05 [logger.py:62] Received request x: params: SamplingParams(n=1), lora_request: None."
    )
    assert plain == v.RequestWithoutIds("x")
    ids = list(range(100, 612))
    preview = parse(
        "INFO 03-14 09:13:05 [logger.py:62] Received request y: params: SamplingParams(n=1), "
        f"lora_request: None, prompt_token_ids: {ids}."
    )
    assert preview.form == "preview" and preview.token_ids.tolist() == ids
    # 512 ids is the cap of vLLM's INFO preview: presumed cut
    assert "512" in v.PromptTruncationJudge().judge(preview)


def test_id_list_forms() -> None:
    ids, cut = v.parse_token_list("[1, 2, 3], rest", 0)
    assert ids.tolist() == [1, 2, 3] and cut == ""
    ids, cut = v.parse_token_list("[]", 0)
    assert ids.tolist() == [] and cut == ""
    ids, cut = v.parse_token_list("[4, 5, 6, ...], x", 0)
    assert ids.tolist() == [4, 5, 6] and "..." in cut
    ids, cut = v.parse_token_list("[7, 8, 9, 1", 0)
    assert ids.tolist() == [7, 8, 9] and "closing bracket" in cut  # the last number may be cut itself
    assert v.parse_token_list("None, x", 0) == (None, "")
    with pytest.raises(v.LogLineError, match="negative"):
        v.parse_token_list("[1, -2]", 0)
    with pytest.raises(v.LogLineError, match="malformed"):
        v.parse_token_list("[1, 2x]", 0)


def test_unterminated_prompt_repr_is_a_rejection() -> None:
    with pytest.raises(v.LogLineError, match="quoted string"):
        parse("DEBUG 03-14 09:13:05 [logger.py:48] Request r details: prompt: 'abc")


def test_stats_lines_v1_and_v0() -> None:
    rec = parse(
        "(APIServer pid=2311) INFO 03-14 09:13:15 [loggers.py:123] Engine 000: Avg prompt throughput: 845.3 "
        "tokens/s, Avg generation throughput: 112.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, Preemptions: 2, "
        "GPU KV cache usage: 41.2%, Prefix cache hit rate: 61.4%, External prefix cache hit rate: 5.0%"
    )
    assert rec == v.EngineStats("Engine 000", pytest.approx(0.412), pytest.approx(0.614), 3, 1, "tokens")
    v0 = parse(
        "INFO 08-01 10:00:00 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
        "25.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.3%, CPU KV "
        "cache usage: 0.0%."
    )
    assert v0.kv_usage == pytest.approx(0.003) and v0.prefix_hit_rate is None and v0.waiting == 0
    v0_hit = parse("INFO 08-01 10:00:00 metrics.py:367] Prefix cache hit rate: GPU: 45.10%, CPU: 0.00%")
    assert v0_hit.prefix_hit_rate == pytest.approx(0.451) and v0_hit.hit_rate_unit == "blocks"
    with pytest.raises(v.LogLineError, match="usage"):
        parse("INFO 03-14 09:13:15 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s, broken")


def test_capacity_lines() -> None:
    assert parse(
        "(EngineCore_DP1 pid=9) INFO 12-11 00:06:53 [kv_cache_utils.py:1286] GPU KV cache size: 686,320 tokens"
    ) == v.CacheCapacity("EngineCore_DP1", tokens=686320)
    merged = parse(
        "INFO 12-11 00:06:53 [kv_cache_utils.py:2481] GPU KV cache size: 1,024 tokens, Maximum concurrency "
        "for 4,096 tokens per request: 0.25x"
    )
    assert merged.tokens == 1024
    assert parse(
        "INFO 03-14 09:12:58 [loggers.py:147] Engine 001: vllm cache_config_info with initialization after "
        "num_gpu_blocks is: 61275"
    ) == v.CacheCapacity("Engine 001", blocks=61275)
    assert (
        parse("INFO 07-01 10:00:00 executor_base.py:92] # cuda blocks: 27306, # CPU blocks: 2048").blocks
        == 27306
    )
    assert parse("INFO 03-14 09:12:40 [gpu_worker.py:298] Available KV cache memory: 52.36 GiB") is None


def test_every_request_of_the_0_13_fixture_parses_to_its_ids_and_keys() -> None:
    exp = EXPECTED["vllm_0_13_debug"]["requests"]
    got = []
    for line in (FIXTURES / "vllm_0_13_debug.log").read_text().splitlines():
        try:
            rec = parse(line)
        except v.LogLineError:
            continue
        if (
            isinstance(rec, v.RequestPrompt)
            and rec.request_id.startswith("chatcmpl-")
            and rec.token_ids is not None
        ):
            got.append(rec)
    assert [r.request_id for r in got] == [e["request_id"] for e in exp]
    for rec, e in zip(got, exp, strict=True):
        assert rec.token_ids.tolist() == e["token_ids"]
        keys = v.prompt_block_keys(rec.token_ids)
        assert np.array_equal(keys, block_keys(e["token_ids"], 16, "sha256"))
        assert len(keys) == len(e["token_ids"]) // 16


def test_every_request_of_the_0_10_fixture_parses_both_layouts() -> None:
    exp = EXPECTED["vllm_0_10_info"]["requests"]
    got = [
        rec
        for line in (FIXTURES / "vllm_0_10_info.log").read_text().splitlines()
        if isinstance(rec := parse(line), v.RequestPrompt)
    ]
    assert [r.token_ids.tolist() for r in got] == [e["token_ids"] for e in exp]
    assert {r.form for r in got} == {"received"}


def test_max_log_len_fixture_cut_lists_are_recognised() -> None:
    info = EXPECTED["vllm_max_log_len"]
    judge = v.PromptTruncationJudge()
    verdicts = {}
    for line in (FIXTURES / "vllm_0_13_max_log_len.log").read_text().splitlines():
        rec = parse(line)
        if isinstance(rec, v.RequestPrompt):
            verdicts[rec.request_id] = judge.judge(rec)
    for r in info["cut_requests"]:
        assert bool(verdicts[r["request_id"]]) == (r["real_ids"] > r["logged_ids"]), r
    assert verdicts["chatcmpl-short"] == ""
    assert verdicts["cmpl-ids-only"] != ""  # 64 ids and no text: known only from the inferred cap
    assert judge.inferred_cap == info["cap"]


def test_known_max_log_len_judges_without_inference() -> None:
    judge = v.PromptTruncationJudge(max_log_len=8)
    full = v.RequestPrompt("a", np.arange(8), "details", "", None)
    short = v.RequestPrompt("b", np.arange(7), "details", "", None)
    assert judge.judge(full).startswith("cut at --max-log-len 8")
    assert judge.judge(short) == ""


def test_log_clock_year_is_inferred_and_wraps() -> None:
    ref = time.mktime((2026, 1, 1, 0, 5, 0, 0, 0, -1))
    clock = v.LogClock(reference=ref)
    t1 = clock.to_epoch((12, 31, 23, 59, 58, 0.0))  # before the reference: last year
    t2 = clock.to_epoch((1, 1, 0, 0, 3, 0.0))  # New Year
    assert time.localtime(t1).tm_year == 2025
    assert time.localtime(t2).tm_year == 2026
    assert t2 - t1 == pytest.approx(5.0)
    assert clock.to_epoch((13, 1, 0, 0, 0, 0.0)) is None
    summer = v.LogClock(reference=time.mktime((2026, 7, 1, 12, 0, 0, 0, 0, -1)))
    assert time.localtime(summer.to_epoch((6, 30, 8, 0, 0, 0.0))).tm_year == 2026
