"""LogSource never dies on a line or a damaged file: bad lines are counted, later good lines still come."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from kvset.cli import main
from kvset.engine import vllm_log
from kvset.formats.vllm_hash import block_keys
from kvset.sources.log import LogSource
from kvset.types import SourceUpdate

HEAD = "(APIServer pid=2311) DEBUG 03-14 09:12:{s:02d} [logger.py:48] "
STATS = "(APIServer pid=2311) INFO 03-14 09:13:10 [loggers.py:147] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
GOOD_A = list(range(100, 140))  # 40 ids: two full blocks of 16
GOOD_B = GOOD_A[:32] + list(range(900, 920))  # shares the first two blocks with A

# The review's lines, each of which used to end the source with an uncaught exception.
BAD_LINES = {
    "token id out of range": [
        "Request bad1 details: prompt: 'x', prompt_token_ids: [1, 9223372036854775808], prompt_embeds shape: None.",
        "Request bad2 details: prompt: 'x', prompt_token_ids: [1, 99999999999999999999, 3",
    ],
    "bad percentage": [
        "Engine 000: Avg prompt throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 1.2.3%, Prefix cache hit rate: 5.0%",
        "Prefix cache hit rate: GPU: ..%, CPU: 0.00%",
    ],
}


def request(rid: str, ids: list[int], second: int) -> str:
    return (
        HEAD.format(s=second)
        + f"Request {rid} details: prompt: 'p', prompt_token_ids: {ids}, prompt_embeds shape: None."
    )


def damaged_log_lines() -> list[str]:
    lines = [request("good-a", GOOD_A, 1)]
    for i, bad in enumerate(sum(BAD_LINES.values(), [])):
        lines.append(HEAD.format(s=10 + i) + bad)
    # a cut line whose "²" passes str.isdigit(): read as a cut list, not a crash
    lines.append(HEAD.format(s=20) + "Request cut1 details: prompt: 'x', prompt_token_ids: [1, 2, 3², 4, 5")
    lines.append(request("good-b", GOOD_B, 30))
    lines.append(
        STATS + "Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.5%, Prefix cache hit rate: 40.0%"
    )
    return lines


def run(src: LogSource) -> list[SourceUpdate]:
    ups = list(src.updates(threading.Event()))
    src.close()
    return ups


def keys_of(ups: list[SourceUpdate]) -> np.ndarray:
    parts = [u.accesses.keys for u in ups if u.accesses is not None]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def test_malformed_lines_are_counted_and_the_source_keeps_going(tmp_path: Path) -> None:
    p = tmp_path / "vllm.log"
    p.write_text("\n".join(damaged_log_lines()) + "\n")
    ups = run(LogSource(p, follow=False))
    h = ups[-1].health
    assert h.finished
    assert np.array_equal(keys_of(ups), np.concatenate([block_keys(GOOD_A), block_keys(GOOD_B)]))
    reasons = {r.reason: r.count for r in h.rejected}
    assert reasons == {reason: len(lines) for reason, lines in BAD_LINES.items()}
    assert dict(h.details)["truncated prompts"] == "1"
    eng = [u.engine for u in ups if u.engine is not None][-1]
    assert eng.kv_usage == pytest.approx(0.125) and eng.token_hit_rate == pytest.approx(0.40)


def test_any_other_parser_exception_is_a_counted_rejection(tmp_path: Path, monkeypatch) -> None:
    real = vllm_log.parse_message

    def fragile(msg: str, prefix=None):
        if "boom" in msg:
            raise RuntimeError("a parser bug")
        return real(msg, prefix)

    monkeypatch.setattr(vllm_log, "parse_message", fragile)
    p = tmp_path / "vllm.log"
    p.write_text(
        request("good-a", GOOD_A, 1)
        + "\n"
        + HEAD.format(s=2)
        + "boom\n"
        + request("good-b", GOOD_B, 3)
        + "\n"
    )
    ups = run(LogSource(p, follow=False))
    h = ups[-1].health
    assert h.finished
    assert [(r.reason, r.count) for r in h.rejected] == [("unparsable line: RuntimeError", 1)]
    assert h.rejected[0].examples[0].startswith("line 2: ")
    assert np.array_equal(keys_of(ups), np.concatenate([block_keys(GOOD_A), block_keys(GOOD_B)]))


def cut_gzip(path: Path, text: str, keep: float = 0.6) -> None:
    """A gzip file whose compressed stream stops part-way (a copy interrupted, a disk filled)."""
    whole = gzip.compress(text.encode(), mtime=0)
    path.write_bytes(whole[: int(len(whole) * keep)])


def test_a_cut_gzip_log_keeps_what_was_read_and_reports_the_damage(tmp_path: Path) -> None:
    # Enough distinct prompts that the cut falls well after the first ones.
    rng = np.random.default_rng(7)
    prompts = [rng.integers(0, 150_000, 48).tolist() for _ in range(200)]
    text = "".join(request(f"r{i}", ids, i % 60) + "\n" for i, ids in enumerate(prompts))
    p = tmp_path / "cut.log.gz"
    cut_gzip(p, text)
    ups = run(LogSource(p, follow=False))
    h = ups[-1].health
    assert h.finished
    errors = [e for u in ups for e in u.events if e.kind == "read-error"]
    assert len(errors) == 1 and "input ends early" in errors[0].text
    assert any("could not be read to its end" in n and "input ends early" in n for n in h.notes)
    keys = keys_of(ups)
    got = len(keys) // 3  # three full blocks per prompt
    assert 0 < got < len(prompts)
    want = np.concatenate([block_keys(ids) for ids in prompts[:got]])
    assert np.array_equal(keys, want)


def test_kvset_analyze_reads_a_cut_gzip_log_with_bad_lines(tmp_path: Path, capsys) -> None:
    p = tmp_path / "cut.gz"
    lines = damaged_log_lines()
    filler = [request(f"f{i}", list(range(i, i + 16)), 40) for i in range(300)]
    cut_gzip(p, "\n".join(lines + filler) + "\n", keep=0.5)
    code = main(["analyze", "--log", str(p), "--json", "--capacities", "1,10"])
    out, _ = capsys.readouterr()
    assert code == 0
    r = json.loads(out)
    assert r["requests"] >= 2
    reasons = {x["reason"] for x in r["rejections"]}
    assert set(BAD_LINES) <= reasons
    assert any("input ends early" in n for n in r["notes"])  # the user learns the file was cut


def test_kvset_analyze_on_an_unreadable_log_path_ends_with_an_error(tmp_path: Path, capsys) -> None:
    # A directory exists but cannot be read: this used to spin forever waiting for the file.
    code = main(["analyze", "--log", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code != 0 and str(tmp_path) in err
