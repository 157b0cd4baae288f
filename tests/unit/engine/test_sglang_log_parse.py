"""SGLang prefill-batch lines of several versions, pool size, and the engine's own hit rate."""

from __future__ import annotations

import json
import time

import pytest

from kvset.engine import sglang_log as s
from kvset.engine.vllm_log import LogLineError
from tests.support import paths

FIXTURES = paths.FIXTURES / "logs"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())["sglang"]


def test_prefix_with_and_without_ranks() -> None:
    p, msg = s.split_prefix("[2026-07-04 04:31:24 DP1 TP4] Prefill batch, #new-seq: 1")
    assert p.ranks == "DP1 TP4" and msg.startswith("Prefill batch")
    assert p.timestamp == time.mktime((2026, 7, 4, 4, 31, 24, 0, 0, -1))
    p, msg = s.split_prefix("[2025-03-02 08:00:30] INFO:     Started server process [1201]")
    assert p.ranks == "" and msg.startswith("INFO:")
    assert s.split_prefix("no prefix here") == (None, "no prefix here")


@pytest.mark.parametrize(
    ("msg", "new", "cached", "usage", "running"),
    [
        (  # 0.3/0.4: period after "batch", cumulative "cache hit rate" (ignored: we count tokens)
            "Prefill batch. #new-seq: 2, #new-token: 1024, #cached-token: 3072, cache hit rate: 52.10%, "
            "token usage: 0.05, #running-req: 1, #queue-req: 0",
            1024,
            3072,
            0.05,
            1,
        ),
        (  # chunked prefill mixed with decoding
            "Prefill batch(mixed #running-req: 3). #new-seq: 1, #new-token: 8192, #cached-token: 0, "
            "cache hit rate: 10.00%, token usage: 0.20, #queue-req: 4",
            8192,
            0,
            0.2,
            3,
        ),
        (  # 0.4.x later / 0.5: commas
            "Prefill batch, #new-seq: 1, #new-token: 896, #cached-token: 128, token usage: 0.00, "
            "#running-req: 0, #queue-req: 28, #pending-token: 0, cuda graph: False, input throughput (token/s): 1.0",
            896,
            128,
            0.0,
            0,
        ),
        (  # hybrid SWA model: the full-attention pool's usage
            "Prefill batch, #new-seq: 4, #new-token: 400, #cached-token: 100, full token usage: 0.31, "
            "swa token usage: 0.90, #running-req: 2, #queue-req: 0, ",
            400,
            100,
            0.31,
            2,
        ),
        (  # SGLANG_LOG_FORWARD_ITERS, hybrid linear-attention model
            "Prefill batch [1842], #new-seq: 12, #new-token: 43008, #cached-token: 0, full token usage: 0.14, "
            "mamba usage: 0.20, #running-req: 1, #queue-req: 97, ",
            43008,
            0,
            0.14,
            1,
        ),
    ],
)
def test_prefill_variants(msg, new, cached, usage, running) -> None:
    rec = s.parse_message(msg, "TP0")
    assert isinstance(rec, s.PrefillBatch)
    assert (rec.new_tokens, rec.cached_tokens, rec.running) == (new, cached, running)
    assert rec.token_usage == pytest.approx(usage)
    total = new + cached
    assert rec.hit_rate == pytest.approx(cached / total)


def test_prefill_without_cached_tokens_is_rejected_and_decode_lines_are_not_ours() -> None:
    with pytest.raises(LogLineError, match="#cached-token"):
        s.parse_message("Prefill batch. #new-seq: 1, #new-token: 12, token usage: 0.10, #queue-req: 0")
    assert (
        s.parse_message("Decode batch. #running-req: 1, #token: 74, token usage: 0.00, cuda graph: True")
        is None
    )


def test_pool_size_and_page_size() -> None:
    _, rec = s.parse_line(
        "[2025-03-02 08:00:22 TP0] max_total_num_tokens=402713, chunked_prefill_size=8192, max_prefill_tokens=16384"
    )
    assert rec == s.PoolSize("TP0", max_total_tokens=402713)
    _, rec = s.parse_line(
        "[2025-03-02 08:00:01] server_args=ServerArgs(model_path='m', page_size=16, tp_size=2)"
    )
    assert rec == s.PoolSize("", page_size=16)


def test_pool_key_keeps_data_parallel_ranks_only() -> None:
    assert s.pool_key("DP1 TP4") == "DP1"
    assert s.pool_key("TP3") == s.pool_key("") == ""
    assert s.pool_key("DP0 PP1 TP0 EP0") == "DP0"


def test_counter_on_the_old_fixture_matches_the_written_batches() -> None:
    counter = s.CachedTokenCounter(window_s=3600)
    for line in (FIXTURES / "sglang_0_4.log").read_text().splitlines():
        try:
            prefix, rec = s.parse_line(line)
        except LogLineError:
            continue
        if isinstance(rec, s.PrefillBatch):
            counter.add(rec, prefix.timestamp)
    new = sum(b["new"] for b in EXPECTED["old"])
    cached = sum(b["cached"] for b in EXPECTED["old"])
    assert counter.batches == len(EXPECTED["old"])
    assert counter.duplicates == 1  # the TP1 copy of one batch
    assert counter.cumulative_rate == pytest.approx(cached / (new + cached))
    last = EXPECTED["old"][-1]
    assert counter.last_batch_rate == pytest.approx(last["cached"] / (last["new"] + last["cached"]))


def test_window_rate_forgets_old_batches() -> None:
    c = s.CachedTokenCounter(window_s=10)
    c.add(s.PrefillBatch("", 1, 100, 0, None, None, None), at=0.0)
    c.add(s.PrefillBatch("", 1, 100, 300, None, None, None), at=5.0)
    assert c.window_rate(5.0) == (pytest.approx(300 / 500), 5.0)
    c.add(s.PrefillBatch("", 1, 50, 50, None, None, None), at=12.0)
    rate, span = c.window_rate(12.0)
    assert rate == pytest.approx(350 / 500) and span == 7.0  # the batch at t=0 left the window
    assert c.cumulative_rate == pytest.approx(350 / 600)
