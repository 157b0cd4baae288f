"""`kvset analyze` and `kvset verify` as a user runs them."""

import gzip
import json
import subprocess
import sys

import pytest

from kvset.cli import main
from kvset.core.naive import naive_curve
from tests.support.paths import MOONCAKE_TRACE


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_json_schema_on_the_real_mooncake_trace(capsys):
    code, out, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--json", "--capacities", "100,1000,10000")
    assert code == 0
    r = json.loads(out)
    assert (r["accesses"], r["distinct_blocks"], r["requests"]) == (121_877, 43_924, 3_993)
    assert r["block_tokens"] == 512 and r["format"] == "mooncake"
    assert [p["capacity_blocks"] for p in r["curve"]] == [100, 1000, 10000]
    assert {"capacity_blocks", "block_hit_rate", "token_hit_rate"} <= set(r["curve"][0])
    assert [w["target"] for w in [w for w in r["working_sets"] if w["window"] == "all"]] == [
        0.95,
        0.99,
        0.999,
    ]
    assert all(
        w["mode"] == "coverage" and w["capacity_blocks"]
        for w in [w for w in r["working_sets"] if w["window"] == "all"]
    )
    assert 0 < r["attainable_hit_rate"] < 1
    rates = [p["block_hit_rate"] for p in r["curve"]]
    assert rates == sorted(rates)


def test_analyze_hit_rates_match_naive_replay(capsys, tmp_path):
    lines = MOONCAKE_TRACE.read_text().splitlines()[:300]
    small = tmp_path / "small.jsonl"
    small.write_text("\n".join(lines) + "\n")
    code, out, _ = run_cli(capsys, "analyze", str(small), "--json", "--capacities", "50,500,3000")
    r = json.loads(out)
    keys = [k for line in lines for k in json.loads(line)["hash_ids"]]
    naive = naive_curve(keys, [50, 500, 3000])
    for p in r["curve"]:
        assert p["block_hit_rate"] == pytest.approx(naive[p["capacity_blocks"]][0] / len(keys))


def test_analyze_text_report_and_model(capsys):
    code, out, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--model", "llama-3.1-70b")
    assert code == 0
    assert "distinct blocks 43,924" in out
    assert "GiB" in out and "327,680 B of full-attention KV per token" in out
    assert "hybrid-layer reserve: 0" in out
    assert "identical" not in out and "LRU only" in out


def test_analyze_model_with_hybrid_layers_shows_reserve_separately(capsys):
    code, out, _ = run_cli(
        capsys,
        "analyze",
        str(MOONCAKE_TRACE),
        "--model",
        "gemma-3-27b",
        "--concurrency",
        "8",
        "--context",
        "32768",
        "--json",
    )
    r = json.loads(out)
    assert r["hybrid_reserve_bytes"] > 0
    per_block = r["model"]["full_attention_bytes_per_block"]
    assert per_block == 81_920 * 512
    for w in [w for w in r["working_sets"] if w["window"] == "all"]:
        assert w["capacity_bytes"] == w["capacity_blocks"] * per_block  # reserve not mixed in


def test_absolute_targets_and_not_reached(capsys):
    code, out, _ = run_cli(
        capsys, "analyze", str(MOONCAKE_TRACE), "--json", "--target-mode", "absolute", "--targets", "0.5,0.9"
    )
    r = json.loads(out)
    reached, unreached = [w for w in r["working_sets"] if w["window"] == "all"]
    assert reached["capacity_blocks"] and reached["reached"]
    assert unreached["capacity_blocks"] is None and not unreached["reached"]  # 0.9 > attainable 0.64
    code, out, _ = run_cli(
        capsys, "analyze", str(MOONCAKE_TRACE), "--target-mode", "absolute", "--targets", "0.9"
    )
    assert "not reached" in out


def test_gzip_and_stdin(tmp_path):
    gz = tmp_path / "t.jsonl.gz"
    gz.write_bytes(gzip.compress(MOONCAKE_TRACE.read_bytes()))
    out = subprocess.run(
        [sys.executable, "-m", "kvset", "analyze", "-", "--json"],
        input=gz.read_bytes(),
        capture_output=True,
        check=True,
    )
    assert json.loads(out.stdout)["accesses"] == 121_877


def test_malformed_lines_are_counted_not_fatal(capsys, tmp_path):
    lines = MOONCAKE_TRACE.read_text().splitlines()[:50]
    lines.insert(3, "{not json")
    lines.insert(10, '{"timestamp": 1, "input_length": 10}')
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code, out, _ = run_cli(capsys, "analyze", str(bad))
    assert code == 0
    assert "1 line rejected: not JSON" in out and "line 4" in out  # one line each: singular
    code, _, err = run_cli(capsys, "analyze", str(bad), "--strict")
    assert code == 2 and "line 4" in err


def test_errors_exit_2(capsys, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("garbage\n\n")
    assert run_cli(capsys, "analyze", str(empty))[0] == 2
    code, _, err = run_cli(capsys, "analyze", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "no such file" in err
    code, _, err = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--targets", "1.5")
    assert code == 2 and "(0, 1]" in err
    code, _, err = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--model", "llama-9")
    assert code == 2


def test_verify_says_identical_and_exit_0(capsys):
    code, out, _ = run_cli(capsys, "verify", str(MOONCAKE_TRACE))
    assert code == 0
    assert "identical at every capacity: yes" in out
    assert out.count("\n") > 20  # 20 log-spaced capacities plus working sets


def test_verify_reverse_order_and_small_horizon(capsys):
    code, out, _ = run_cli(
        capsys, "verify", str(MOONCAKE_TRACE), "--order", "reverse", "--horizon", "5000", "--json"
    )
    r = json.loads(out)
    assert code == 0 and r["identical"]
    assert max(c["capacity_blocks"] for c in r["capacities"]) <= 5000


def test_demo_analysis(capsys):
    code, out, _ = run_cli(capsys, "analyze", "--demo", "--demo-accesses", "200000", "--json")
    r = json.loads(out)
    assert code == 0 and r["format"] == "demo" and r["accesses"] >= 200_000
    assert 0.5 < r["attainable_hit_rate"] < 1.0


def _table(text, header_start):
    """The cells of the plain-text table whose header line starts with `header_start`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start)) + 2  # header, rule
    rows = []
    for line in lines[start:]:
        if not line.strip() or line.startswith(" "):
            break
        rows.append([cell.strip() for cell in line.split("  ") if cell.strip()])
    return rows


def test_analyze_and_once_print_the_same_working_sets_and_gib_columns_hold_gib(capsys):
    import argparse

    from kvset.cli.flags import add_monitor_arguments
    from kvset.cli.live_monitor import build_monitor, once_seconds
    from kvset.report import snapshot_text

    code, offline, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--model", "llama-3.1-70b")
    assert code == 0
    p = argparse.ArgumentParser()
    add_monitor_arguments(p)
    args = p.parse_args(["--once", "--replay", str(MOONCAKE_TRACE), "--model", "llama-3.1-70b"])
    monitor = build_monitor(args)
    live = snapshot_text(monitor.collect(once_seconds(args, monitor)))
    # the offline pass and the live pipeline: the same working sets, printed the same way
    offline_ws = _table(offline, "target ")
    assert len(offline_ws) == 3 and offline_ws[0][:2] == ["95 %", "25,549"]
    # target, blocks, tokens, GiB and the hit rates there
    assert [row[:6] for row in _table(live, "target ")] == offline_ws
    # the same curve rows too: the same capacities, the knee's row marked in both
    offline_curve = _table(offline, "capacity (blocks)")
    assert _table(live, "capacity (blocks)") == offline_curve and len(offline_curve) >= 16
    assert len([row for row in offline_curve if row[-1] == "<- knee"]) == 1
    # a GiB column is in GiB on every row, the 1-block capacity (320 KiB x 512 tokens) too
    for text in (offline, live):
        gib = [row[2] for row in _table(text, "capacity (blocks)")]
        assert gib[0] == "0.156 GiB" and all(cell.endswith(" GiB") for cell in gib)
