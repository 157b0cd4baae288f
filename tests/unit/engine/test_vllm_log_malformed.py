"""Malformed vLLM lines: every one is a LogLineError with a reason, never another exception."""

from __future__ import annotations

import pytest

from kvset.engine import vllm_log as v

HEAD = "(APIServer pid=2311) DEBUG 03-14 09:12:59 [logger.py:48] "
STATS = "(APIServer pid=2311) INFO 03-14 09:13:10 [loggers.py:147] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
INFO = "(EngineCore_DP0 pid=2390) INFO 03-14 09:12:40 [kv_cache_utils.py:1286] "


def details(ids: str) -> str:
    return HEAD + f"Request r1 details: prompt: 'x', prompt_token_ids: {ids}"


CASES = [
    (details("[1, 9223372036854775808], prompt_embeds shape: None."), "token id out of range"),
    (details("[1, 2, 18446744073709551616], prompt_embeds shape: None."), "token id out of range"),
    (details("[1, -9223372036854775809], prompt_embeds shape: None."), "token id out of range"),
    (details("[1, 99999999999999999999, 3"), "token id out of range"),  # cut line
    (details("[1, 99999999999999999999, ...]"), "token id out of range"),  # elided list
    (details("[1, 2, " + "9" * 5000 + ", 3"), "token id out of range"),  # past int()'s digit limit
    (
        STATS + "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2.3%, Prefix cache hit rate: 5.0%",
        "bad percentage",
    ),
    (
        STATS + "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: ..%",
        "bad percentage",
    ),
    (STATS + "Running: 1 reqs, GPU KV cache usage: .%, Prefix cache hit rate: 0.0%", "bad percentage"),
    (STATS + "Running: " + "9" * 5000 + " reqs, GPU KV cache usage: 1.0%", "number out of range"),
    (INFO + "Prefix cache hit rate: GPU: ..%, CPU: 0.00%", "bad percentage"),
    (INFO + "Prefix cache hit rate: GPU: 1.2.3%, CPU: 0.00%", "bad percentage"),
    (INFO + "Prefix cache hit rate: GPU: 120.00%, CPU: 0.00%", "percentage out of range"),
    (INFO + "GPU KV cache size: 1" + "0" * 5000 + " tokens", "number out of range"),
    (
        INFO
        + "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 1"
        + "0" * 5000,
        "number out of range",
    ),
    (INFO + "# GPU blocks: 1" + "0" * 30 + ", # CPU blocks: 0", "number out of range"),
]


@pytest.mark.parametrize(("line", "reason"), CASES, ids=[f"{r}-{i}" for i, (_, r) in enumerate(CASES)])
def test_malformed_numbers_are_rejections_with_a_reason(line: str, reason: str) -> None:
    with pytest.raises(v.LogLineError) as info:
        v.parse_line(line)
    assert info.value.reason == reason


def test_a_cut_list_with_a_non_ascii_digit_keeps_the_ids_before_it() -> None:
    # "²" passes str.isdigit() but int() refuses it: the list is read up to it and reported cut.
    rec = v.parse_line(details("[1, 2, 3², 4, 5"))[1]
    assert isinstance(rec, v.RequestPrompt)
    assert rec.token_ids.tolist() == [1, 2] and rec.truncated


def test_non_ascii_digits_are_not_numbers_in_counts() -> None:
    # Arabic-Indic digits match a Unicode \d and int() would take them; vLLM never writes them.
    line = STATS + "Running: \u0661 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 5.0%"
    rec = v.parse_line(line)[1]
    assert isinstance(rec, v.EngineStats) and rec.running is None and rec.kv_usage == pytest.approx(0.01)


def test_a_huge_pid_in_the_process_prefix_does_not_raise() -> None:
    prefix, msg = v.split_prefix("(APIServer pid=" + "9" * 5000 + ") INFO 03-14 09:12:40 [x.py:1] hello")
    assert prefix.pid is None and prefix.level == "INFO" and msg == "hello"


def test_largest_int64_token_id_is_accepted() -> None:
    rec = v.parse_line(details("[1, 9223372036854775807], prompt_embeds shape: None."))[1]
    assert rec.token_ids.tolist() == [1, 2**63 - 1] and not rec.truncated
