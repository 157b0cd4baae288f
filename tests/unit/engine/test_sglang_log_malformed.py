"""Malformed SGLang lines: every one is a LogLineError with a reason, never another exception."""

from __future__ import annotations

import pytest

from kvset.engine import sglang_log as s
from kvset.engine.vllm_log import LogLineError

P = "[2025-03-02 08:01:00 TP0] "
PREFILL = P + "Prefill batch. #new-seq: 1, #new-token: 64, #cached-token: 0, "


CASES = [
    (PREFILL + "token usage: 0.1.2, #running-req: 1, #queue-req: 0", "bad token usage"),
    (PREFILL + "token usage: ., #running-req: 1, #queue-req: 0", "bad token usage"),
    (PREFILL + "token usage: , #running-req: 1", "bad token usage"),
    (
        P + "Prefill batch. #new-seq: 1, #new-token: 1" + "0" * 5000 + ", #cached-token: 0",
        "number out of range",
    ),
    (PREFILL + "token usage: 0.10, #running-req: " + "9" * 5000, "number out of range"),
    (P + "max_total_num_tokens=" + "9" * 5000 + ", chunked_prefill_size=8192", "number out of range"),
    (P + "server_args=ServerArgs(model_path='m', page_size=" + "9" * 5000 + ")", "number out of range"),
]


@pytest.mark.parametrize(("line", "reason"), CASES, ids=[f"{r}-{i}" for i, (_, r) in enumerate(CASES)])
def test_malformed_numbers_are_rejections_with_a_reason(line: str, reason: str) -> None:
    with pytest.raises(LogLineError) as info:
        s.parse_line(line)
    assert info.value.reason == reason


def test_impossible_dates_and_non_ascii_digits_in_the_prefix_do_not_raise() -> None:
    prefix, rec = s.parse_line(
        "[9999-99-99 99:99:99] Prefill batch. #new-seq: 1, #new-token: 4, #cached-token: 4"
    )
    assert prefix is not None and prefix.timestamp is None and rec.cached_tokens == 4
    # Arabic-Indic digits are not a date SGLang writes: no prefix, and the message is not ours
    prefix, rec = s.parse_line("[\u0662\u0660\u0662\u0665-03-02 08:01:00] hello")
    assert prefix is None and rec is None
