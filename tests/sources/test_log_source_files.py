"""LogSource over whole log files: accesses equal vLLM's hashing of the logged ids; readings; health."""

from __future__ import annotations

import gzip
import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from kvset.formats.vllm_hash import block_keys
from kvset.sources.base import IDLE_TICK
from kvset.sources.log import LogSource
from kvset.types import SourceUpdate
from kvset.units import StreamUnits
from tests.support import paths
from tests.support.fake_clock import FakeClock

FIXTURES = paths.FIXTURES / "logs"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def run(src: LogSource) -> list[SourceUpdate]:
    ups = list(src.updates(threading.Event()))
    src.close()
    return ups


def accesses(ups: list[SourceUpdate]) -> tuple[np.ndarray, list[int], np.ndarray]:
    keys, starts, stamps, offset = [], [], [], 0
    for u in ups:
        if u.accesses is not None:
            b = u.accesses
            keys.append(b.keys)
            starts += [offset + int(s) for s in b.request_starts]
            stamps.append(np.broadcast_to(b.timestamps, len(b.keys)))
            assert b.block_size is not None and np.all(b.tokens == b.block_size)
            offset += len(b.keys)
    if not keys:
        return np.zeros(0, np.uint64), [], np.zeros(0)
    return np.concatenate(keys), starts, np.concatenate(stamps)


def expected_stream(token_lists: list[list[int]], block_size: int = 16, algo: str = "sha256"):
    keys, starts, n = [], [], 0
    for ids in token_lists:
        k = block_keys(ids, block_size, algo)
        if len(k):
            starts.append(n)
            keys.append(k)
            n += len(k)
    return np.concatenate(keys), starts


def last_engine(ups: list[SourceUpdate]):
    readings = [u.engine for u in ups if u.engine is not None]
    return readings[-1] if readings else None


def test_vllm_0_13_debug_log_gives_the_exact_key_stream_and_operating_point() -> None:
    info = EXPECTED["vllm_0_13_debug"]
    ups = run(LogSource(FIXTURES / "vllm_0_13_debug.log", follow=False))
    keys, starts, _ = accesses(ups)
    want, want_starts = expected_stream([r["token_ids"] for r in info["requests"]])
    assert keys.dtype == np.uint64
    assert np.array_equal(keys, want)
    assert starts == want_starts
    eng = last_engine(ups)
    assert eng.capacity_blocks == info["capacity_blocks"] and eng.capacity_tokens == info["capacity_tokens"]
    assert eng.token_hit_rate == pytest.approx(info["last_hit_rate"])
    assert eng.kv_usage == pytest.approx(info["last_usage"])
    h = ups[-1].health
    assert h.finished and h.state == "finished" and h.kind == "log"
    assert h.accesses == len(want)
    reasons = {r.reason: r.count for r in h.rejected}
    assert reasons == {"request logged without token ids": 1, "malformed token id list": 1}
    assert all(ex.startswith("line ") for r in h.rejected for ex in r.examples)
    details = dict(h.details)
    # the short prompt is a request with no full block; it is not a rejection
    assert details["prompts shorter than a block"] == "1"
    assert details["prompts"] == str(len(info["requests"]) + 1)
    assert int(details["unrelated lines"]) > 0
    assert details["engines"] == "vllm"


def test_vllm_0_10_info_log_across_new_year() -> None:
    info = EXPECTED["vllm_0_10_info"]
    ups = run(LogSource(FIXTURES / "vllm_0_10_info.log", follow=False))
    keys, starts, stamps = accesses(ups)
    want, want_starts = expected_stream([r["token_ids"] for r in info["requests"]])
    assert np.array_equal(keys, want) and starts == want_starts
    per_request = stamps[starts]
    assert np.all(np.diff(per_request) >= 0)  # the year advanced at 01-01, not went back
    first_new_year = next(i for i, r in enumerate(info["requests"]) if r["stamp"].startswith("01-01"))
    gap = per_request[first_new_year] - per_request[first_new_year - 1]
    assert 0 <= gap < 60
    assert ups[-1].health.rejected == ()
    eng = last_engine(ups)
    assert eng.capacity_blocks == info["capacity_blocks"]


def test_gzip_log_and_other_block_size_and_hash(tmp_path: Path) -> None:
    info = EXPECTED["vllm_0_13_debug"]
    want, _ = expected_stream([r["token_ids"] for r in info["requests"]], 32, "sha256_cbor")
    gz = tmp_path / "vllm.log.gz"
    with open(FIXTURES / "vllm_0_13_debug.log", "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    ups = run(LogSource(gz, follow=False, block_size=32, hash_algo="sha256_cbor"))
    keys, _, _ = accesses(ups)
    assert np.array_equal(keys, want)
    assert last_engine(ups).block_size == 32


def test_cut_prompts_are_counted_not_taken_as_short_prompts() -> None:
    info = EXPECTED["vllm_max_log_len"]
    ups = run(LogSource(FIXTURES / "vllm_0_13_max_log_len.log", follow=False))
    keys, _, _ = accesses(ups)
    complete = [r for r in info["cut_requests"] if r["real_ids"] == r["logged_ids"]]
    assert len(complete) == 1
    lines = (FIXTURES / "vllm_0_13_max_log_len.log").read_text()
    assert complete[0]["request_id"] in lines
    # only the complete prompts contribute: the uncut first turn and the short question
    first_ids = json.loads(lines.split("prompt_token_ids: ")[1].split("]")[0] + "]")
    want, _ = expected_stream([first_ids, info["short_ids"]])
    assert np.array_equal(keys, want)
    h = ups[-1].health
    d = dict(h.details)
    cut = sum(1 for r in info["cut_requests"] if r["real_ids"] > r["logged_ids"]) + 1  # + the id-only one
    assert d["truncated prompts"] == str(cut)
    assert d["inferred --max-log-len"] == str(info["cap"])
    assert h.rejected == ()  # cut prompts are not rejections
    assert any("cut" in n for n in h.notes)


def test_truncated_prefix_policy_keeps_the_first_blocks() -> None:
    ups = run(LogSource(FIXTURES / "vllm_cut_lines.log", follow=False, truncated="prefix"))
    keys, starts, _ = accesses(ups)
    assert len(starts) == 3  # the cut line, the elided line, the complete line
    skip = run(LogSource(FIXTURES / "vllm_cut_lines.log", follow=False))
    k2, s2, _ = accesses(skip)
    assert np.array_equal(k2, block_keys(EXPECTED["vllm_max_log_len"]["complete_ids"]))
    assert len(s2) == 1
    # the cut prompts' first blocks are the complete prompt's first blocks (same ids up front)
    assert np.array_equal(keys[starts[2] :], k2)
    assert np.array_equal(keys[: starts[1]][:3], k2[: min(3, starts[1])])


def test_known_max_log_len_option() -> None:
    ups = run(LogSource(FIXTURES / "vllm_0_13_max_log_len.log", follow=False, max_log_len=64))
    d = dict(ups[-1].health.details)
    assert d["truncated prompts"] == "4"
    assert "inferred --max-log-len" not in d


def test_sglang_logs_give_the_engine_hit_rate_and_pool() -> None:
    info = EXPECTED["sglang"]
    ups = run(LogSource(FIXTURES / "sglang_0_4.log", follow=False))
    assert accesses(ups)[0].size == 0
    eng = last_engine(ups)
    new = sum(b["new"] for b in info["old"])
    cached = sum(b["cached"] for b in info["old"])
    assert eng.token_hit_rate == pytest.approx(cached / (new + cached))  # all inside the 60 s window
    assert eng.capacity_tokens == info["old_capacity_tokens"]
    assert eng.block_size == 1 and eng.capacity_blocks == info["old_capacity_tokens"]
    assert eng.kv_usage == pytest.approx(info["old"][-1]["usage"])
    h = ups[-1].health
    assert [(r.reason, r.count) for r in h.rejected] == [("prefill line without #cached-token", 1)]
    assert any("no token ids" in n for n in h.notes)

    dp = run(LogSource(FIXTURES / "sglang_0_5_dp.log", follow=False, engine="sglang"))
    eng = last_engine(dp)
    new = sum(b["new"] for b in info["new"])
    cached = sum(b["cached"] for b in info["new"])
    assert eng.token_hit_rate == pytest.approx(cached / (new + cached))
    assert eng.capacity_tokens == info["new_capacity_tokens"]  # two data-parallel pools
    last = {b["rank"]: b["full_usage"] for b in info["new"]}
    assert eng.kv_usage == pytest.approx(sum(last.values()) / 2)


def test_engine_filter_leaves_the_other_engine_unrelated() -> None:
    ups = run(LogSource(FIXTURES / "sglang_0_4.log", follow=False, engine="vllm"))
    h = ups[-1].health
    assert last_engine(ups) is None
    assert dict(h.details)["unrelated lines"] == dict(h.details)["lines"]


def test_bad_options_are_clear_errors(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    p.write_text("")
    with pytest.raises(ValueError, match="engine"):
        LogSource(p, engine="tgi")
    with pytest.raises(ValueError, match="hash"):
        LogSource(p, hash_algo="md5")
    with pytest.raises(FileNotFoundError):
        LogSource(tmp_path / "missing.log", follow=False)


def test_stop_ends_a_follow_promptly(tmp_path: Path) -> None:
    p = tmp_path / "quiet.log"
    p.write_text("")
    clock = FakeClock()
    src = LogSource(p, follow=True, clock=clock.clock())
    stop = threading.Event()
    clock.at(0.3, stop.set)
    ups = list(src.updates(stop))
    assert clock.now <= 0.3 + IDLE_TICK  # it noticed the stop within the tick it was waiting in
    assert ups and all(u.health is not None for u in ups)
    assert ups[-1].health.state == "following" and not ups[-1].health.finished


def test_command_line_options_build_the_sources() -> None:
    import argparse

    from kvset.cli.flags import add_log_arguments, add_metrics_arguments, add_units_arguments
    from kvset.cli.from_flags import log_source_from_args, metrics_source_from_args

    p = argparse.ArgumentParser()
    add_log_arguments(p)
    add_metrics_arguments(p)
    add_units_arguments(p)
    args = p.parse_args(
        ["--log", str(FIXTURES / "vllm_0_13_debug.log"), "--block-size", "32", "--hash-algo", "sha256_cbor"]
    )
    src = log_source_from_args(args, follow=False)
    assert (src.block_size, src.hash_algo, src.follow) == (32, "sha256_cbor", False)
    assert src.units == StreamUnits(32, "flag", "sha256_cbor")
    src.close()
    assert metrics_source_from_args(args) is None
    args = p.parse_args(["--metrics", "http://127.0.0.1:9/metrics", "--metrics-interval", "0.5"])
    m = metrics_source_from_args(args)
    assert m.interval == 0.5 and m.url.endswith("/metrics")
    m.close()
    assert log_source_from_args(args, follow=True) is None
    with pytest.raises(SystemExit):
        p.parse_args(["--block-size", "0"])


def test_an_engine_that_logs_its_start_again_is_a_reset_event(tmp_path: Path) -> None:
    lines = (FIXTURES / "vllm_0_13_debug.log").read_text()
    p = tmp_path / "restarted.log"
    p.write_text(lines + lines.replace("980,400", "490,200"))
    ups = run(LogSource(p, follow=False))
    resets = [e for u in ups for e in u.events if e.kind == "engine-reset"]
    assert len(resets) == 1  # the size line and the num_gpu_blocks line both repeat: one restart
    eng = last_engine(ups)
    # the new pool replaces the old one, it is not added
    assert [(p.num_gpu_blocks, p.block_size) for p in eng.pools] == [(490200 // 16, 16)]
