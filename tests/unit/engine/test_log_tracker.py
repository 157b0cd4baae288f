"""What vLLM and SGLang log lines mean, on plain values: no file, no thread."""

from __future__ import annotations

import time

import numpy as np
import pytest

from kvset.engine.log_tracker import LogTracker
from kvset.formats.vllm_hash import block_keys

# The year of vLLM's year-less timestamps comes from the reference: a log written in 2025.
REFERENCE = time.mktime((2025, 3, 14, 12, 0, 0, 0, 0, -1))
HEAD = "(APIServer pid=2311) DEBUG 03-14 09:12:{s:02d} [logger.py:48] "
IDS = list(range(100, 140))  # 40 ids: two full blocks of 16


def request(rid: str, ids: list[int], second: int, tail: str = "]") -> bytes:
    listed = str(ids)[:-1] + tail
    line = (
        HEAD.format(s=second)
        + f"Request {rid} details: prompt: 'p', prompt_token_ids: {listed}, prompt_embeds shape: None."
    )
    return line.encode()


def test_a_logged_prompt_is_one_request_of_its_full_blocks_at_the_logs_own_time() -> None:
    t = LogTracker(clock_reference=REFERENCE)
    t.read_line(1, request("a", IDS, second=5), at=REFERENCE)
    t.read_line(2, b"an unrelated line", at=REFERENCE)
    update = t.take(at=REFERENCE + 60)
    batch = update.accesses
    assert batch is not None
    assert np.array_equal(batch.keys, block_keys(IDS))  # vLLM's own hashes of the two full blocks
    assert batch.request_starts.tolist() == [0] and batch.tokens.tolist() == [16, 16]
    logged_at = time.mktime((2025, 3, 14, 9, 12, 5, 0, 0, -1))
    assert np.broadcast_to(batch.timestamps, (2,)).tolist() == [logged_at, logged_at]
    details = dict(t.health_parts().details)
    assert details["prompt tokens outside full blocks"] == "8"
    assert (details["lines"], details["unrelated lines"], details["prompts"]) == ("2", "1", "1")
    assert t.take(at=REFERENCE + 61).accesses is None


@pytest.mark.parametrize(("policy", "keys"), [("skip", 0), ("prefix", 2)])
def test_a_cut_id_list_is_skipped_or_used_for_its_first_blocks(policy: str, keys: int) -> None:
    t = LogTracker(truncated=policy, clock_reference=REFERENCE)
    t.read_line(1, request("cut", IDS, second=1, tail=""), at=REFERENCE)  # no closing bracket: cut on the way
    batch = t.take(at=REFERENCE).accesses
    assert (0 if batch is None else len(batch)) == keys
    parts = t.health_parts()
    assert dict(parts.details)["truncated prompts"] == "1"
    assert any("token id lists cut" in n for n in parts.notes)


def test_an_sglang_pool_logged_again_is_an_engine_restart_and_the_reading_follows_it() -> None:
    t = LogTracker(engine="sglang")
    pool = b"[2025-03-02 08:00:22 TP0] max_total_num_tokens=402713, chunked_prefill_size=8192"
    t.read_line(1, pool, at=0.0)
    first = t.take(at=1.0)
    assert first.engine is not None and first.engine.capacity_tokens == 402713 and first.events == ()
    t.read_line(2, pool.replace(b"08:00:22", b"09:00:00"), at=2.0)
    again = t.take(at=3.0)
    assert [e.kind for e in again.events] == ["engine-reset"]
    assert t.take(at=4.0).engine is None  # nothing new since
    assert any("no token ids" in n for n in t.health_parts().notes)
