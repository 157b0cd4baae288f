"""`kvset analyze --opt`, `kvset verify --opt` and `kvset-top --replay FILE --opt` as a user runs them:
Belady MIN's curve beside LRU's, checked against MIN replayed with a heap per capacity."""

import dataclasses
import json
import math

import numpy as np
import pytest

from kvset.cli import main
from kvset.core.naive import naive_min_curve
from kvset.report.as_csv import COLUMNS
from kvset_tui.cli import main as top_main
from tests.support.paths import MOONCAKE_TRACE

BLOCK = 512  # the Mooncake trace's tokens per block


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def mooncake_accesses(lines: list[str]) -> tuple[list[int], list[int]]:
    """The trace's block keys and tokens, read straight from its JSON lines (requests in timestamp
    order; every block 512 tokens but a request's last, which covers the rest of its input)."""
    requests = sorted((json.loads(line) for line in lines if line.strip()), key=lambda r: r["timestamp"])
    keys, tokens = [], []
    for r in requests:
        n = len(r["hash_ids"])
        keys += r["hash_ids"]
        tokens += [BLOCK] * (n - 1) + [r["input_length"] - BLOCK * (n - 1)]
    return keys, tokens


@pytest.fixture(scope="module")
def mooncake_naive_min():
    """MIN replayed with a heap at 20 log-spaced capacities of the trace (a few seconds, once)."""
    keys, tokens = mooncake_accesses(MOONCAKE_TRACE.read_text().splitlines())
    caps = sorted(set(np.round(np.geomspace(1, len(set(keys)), 20)).astype(int).tolist()))
    return len(keys), sum(tokens), caps, naive_min_curve(keys, caps, tokens)


def test_analyze_opt_equals_min_replayed_per_capacity_on_the_mooncake_trace(capsys, mooncake_naive_min):
    accesses, tokens, caps, naive = mooncake_naive_min
    code, out, _ = run_cli(
        capsys, "analyze", str(MOONCAKE_TRACE), "--opt", "--json", "--capacities", ",".join(map(str, caps))
    )
    assert code == 0
    r = json.loads(out)
    assert r["accesses"] == accesses and r["tokens"] == tokens and len(caps) == len(r["curve"]) >= 18
    for row in r["curve"]:
        blocks, token_hits = naive[row["capacity_blocks"]]
        assert round(row["opt_block_hit_rate"] * accesses) == blocks
        assert round(row["opt_token_hit_rate"] * tokens) == token_hits
        assert row["opt_block_hit_rate"] >= row["block_hit_rate"]  # MIN is never below LRU
    assert r["opt"]["exact"] and r["opt"]["distinct_blocks"] == r["distinct_blocks"]


@pytest.mark.parametrize(
    "mode, targets", [("coverage", "0.5,0.9,0.95,0.99,0.999"), ("absolute", "0.3,0.5,0.6")]
)
def test_min_never_needs_more_capacity_than_lru_for_any_target(capsys, mode, targets):
    code, out, _ = run_cli(
        capsys, "analyze", str(MOONCAKE_TRACE), "--opt", "--json", "--target-mode", mode, "--targets", targets
    )
    assert code == 0
    r = json.loads(out)
    gaps = r["policy_gap"]["working_sets"]
    assert (
        [w["target"] for w in [w for w in r["working_sets"] if w["window"] == "all"]]
        == [g["target"] for g in gaps]
        == [float(t) for t in targets.split(",")]
    )
    for w, g in zip([w for w in r["working_sets"] if w["window"] == "all"], gaps, strict=True):
        assert w["opt_capacity_blocks"] is not None and w["opt_capacity_blocks"] <= w["capacity_blocks"]
        assert (
            g["opt_capacity_blocks"] == w["opt_capacity_blocks"]
            and g["lru_capacity_blocks"] == w["capacity_blocks"]
        )
        assert g["capacity_gap_blocks"] == w["capacity_blocks"] - w["opt_capacity_blocks"] >= 0
        assert g["capacity_ratio"] == pytest.approx(w["capacity_blocks"] / w["opt_capacity_blocks"])
    # the smallest capacity: the curve reaches the target there and not one block below
    rows = {w["opt_capacity_blocks"]: w for w in [w for w in r["working_sets"] if w["window"] == "all"]}
    caps = sorted({c for c in rows} | {c - 1 for c in rows})
    _, out, _ = run_cli(
        capsys, "analyze", str(MOONCAKE_TRACE), "--opt", "--json", "--capacities", ",".join(map(str, caps))
    )
    rate = {row["capacity_blocks"]: row["opt_block_hit_rate"] for row in json.loads(out)["curve"]}
    for c, w in rows.items():
        need = w["target"] * (r["attainable_hit_rate"] if mode == "coverage" else 1.0)
        assert rate[c] >= need - 1e-12 and rate[c - 1] < need


def test_the_text_shows_the_gap_at_the_capacity_and_the_knee(capsys):
    code, text, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--opt", "--capacity", "10000")
    assert code == 0
    _, out, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--opt", "--capacity", "10000", "--json")
    r = json.loads(out)
    lines = text.splitlines()
    start = (
        lines.index("policy gap: LRU against Belady MIN (a policy with foresight) on the same accesses:") + 3
    )
    for w, line in zip(
        [w for w in r["working_sets"] if w["window"] == "all"], lines[start : start + 3], strict=True
    ):
        cells = [c.strip() for c in line.split("  ") if c.strip()]
        lru, opt = w["capacity_blocks"], w["opt_capacity_blocks"]
        assert cells[1:] == [f"{lru:,}", f"{opt:,}", f"{lru - opt:,}", f"{lru / opt:.2f}x"]
    pool, knee = r["policy_gap"]["hit_rates"]
    assert (pool["where"], pool["capacity_blocks"], knee["where"]) == ("chosen", 10_000, "knee")
    assert knee["capacity_blocks"] == r["knee"]["capacity_blocks"]
    pool_line = next(line for line in lines if line.startswith("  at 10,000 blocks (--capacity):"))
    gain = 100 * (pool["opt_block_hit_rate"] - pool["lru_block_hit_rate"])
    assert (
        f"LRU {100 * pool['lru_block_hit_rate']:.2f} %, MIN {100 * pool['opt_block_hit_rate']:.2f} % ({gain:+.2f} pt)"
        in pool_line
    )
    assert gain > 10  # on this trace the policy, not the size, is most of the gap at 10,000 blocks
    assert any(line.startswith(f"  at the knee, {knee['capacity_blocks']:,} blocks:") for line in lines)
    header = next(line for line in lines if line.startswith("capacity (blocks)"))
    assert "MIN block hit rate" in header and "MIN token hit rate" in header
    _, plain, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE))
    assert "policy gap" not in plain and "MIN block" not in plain


def test_csv_has_min_columns_filled_only_with_opt(capsys):
    _, with_opt, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--opt", "--csv")
    _, without, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--csv")
    i, j = COLUMNS.index("opt_block_hit_rate"), COLUMNS.index("opt_token_hit_rate")
    rows = [line.split(",") for line in with_opt.splitlines()]
    assert rows[0] == list(COLUMNS)
    assert all(1 >= float(row[i]) >= float(row[COLUMNS.index("block_hit_rate")]) for row in rows[1:])
    assert all(row[j] for row in rows[1:])
    assert all(row[i] == row[j] == "" for row in (line.split(",") for line in without.splitlines()[1:]))


def test_opt_flags_that_do_not_fit_are_one_line_errors(capsys):
    for argv, words in (
        ((str(MOONCAKE_TRACE), "--capacity", "100"), "--capacity needs --opt"),
        ((str(MOONCAKE_TRACE), "--opt", "--sample", "0.1"), "not with --sample"),
    ):
        code, _, err = run_cli(capsys, "analyze", *argv)
        assert code == 2 and len(err.splitlines()) == 1 and words in err


def test_verify_opt_passes_on_the_mooncake_trace(capsys, tmp_path):
    # its first 1,500 requests: the whole trace's MIN is checked against the heap replays above
    head = tmp_path / "head.jsonl"
    head.write_text("\n".join(MOONCAKE_TRACE.read_text().splitlines()[:1500]) + "\n")
    code, out, _ = run_cli(capsys, "verify", str(head), "--opt", "--json")
    assert code == 0
    r = json.loads(out)
    assert r["identical"] and r["opt"]["identical"] and r["opt"]["never_below_lru"]
    opt_caps = [row["capacity_blocks"] for row in r["opt"]["capacities"]]
    assert opt_caps == [row["capacity_blocks"] for row in r["capacities"]] and len(opt_caps) >= 20
    _, out, _ = run_cli(capsys, "analyze", str(head), "--opt", "--json")
    for w in [
        w for w in json.loads(out)["working_sets"] if w["window"] == "all"
    ]:  # MIN's own working sets and the capacity below are checked
        assert {w["opt_capacity_blocks"], w["opt_capacity_blocks"] - 1} <= set(opt_caps)


def test_verify_opt_fails_when_the_one_pass_curve_is_off_by_one_access(capsys, monkeypatch, tmp_path):
    small = tmp_path / "small.jsonl"
    small.write_text("\n".join(MOONCAKE_TRACE.read_text().splitlines()[:400]) + "\n")
    code, out, _ = run_cli(capsys, "verify", str(small), "--opt")
    assert code == 0 and "MIN identical at every capacity: yes" in out

    import kvset.offline

    real = kvset.offline.opt_histogram

    def one_access_later(keys, tokens):
        """The true histogram with one access of the smallest distance moved to the largest one."""
        h = real(keys, tokens)
        blocks, toks = h.blocks.copy(), h.tokens.copy()
        d = int(np.flatnonzero(blocks[1:])[0]) + 1
        blocks[d] -= 1
        blocks[-1] += 1
        return dataclasses.replace(h, blocks=blocks, tokens=toks)

    monkeypatch.setattr(kvset.offline, "opt_histogram", one_access_later)
    code, out, _ = run_cli(capsys, "verify", str(small), "--opt")
    assert code == 1
    assert "MIN identical at every capacity: no" in out and "DIFFERS" in out
    assert "identical at every capacity: yes" in out.splitlines()  # LRU's check is not the one that failed
    # percentages as for LRU: both tables print the one-pass rate of each capacity in the same form
    rates = [line.split()[1:3] for line in out.splitlines() if line[:1].isdigit()]
    assert rates and all(r[1] == "%" for r in rates)


def test_kvset_top_once_opt_gives_what_analyze_opt_gives(capsys):
    code = top_main(["--once", "--json", "--replay", str(MOONCAKE_TRACE), "--opt", "--capacity", "10000"])
    snap = json.loads(capsys.readouterr().out)
    assert code == 0 and snap["opt_note"] is None
    _, out, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--opt", "--json", "--capacity", "10000")
    offline = json.loads(out)
    assert snap["curve"] == offline["curve"]  # LRU and MIN rows alike
    assert snap["opt"]["max_stack_distance"] == offline["opt"]["max_stack_distance"]
    live = {
        w["target"]: w["opt_capacity_blocks"]
        for w in snap["working_sets"]
        if w["window"] == "all" and w["mode"] == "coverage"
    }
    assert live == {
        w["target"]: w["opt_capacity_blocks"]
        for w in [w for w in offline["working_sets"] if w["window"] == "all"]
    }
    assert all(w["opt_capacity_blocks"] is None for w in snap["working_sets"] if w["window"] != "all")
    pool = next(h for h in snap["policy_gap"]["hit_rates"] if h["where"] == "chosen")
    assert pool == offline["policy_gap"]["hit_rates"][0]


@pytest.mark.parametrize(
    "argv",
    [
        ["--events", "tcp://127.0.0.1:5557"],
        ["--demo"],
        ["--replay", "t.jsonl", "--follow"],
        ["--metrics", "http://127.0.0.1:8000/metrics"],
        [],
    ],
)
def test_kvset_top_refuses_opt_without_a_whole_file(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        top_main(["--once", "--opt", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1
    assert "--opt needs the whole trace in advance" in err and "--replay FILE" in err


def test_demo_input_min_at_least_lru_and_alike_with_an_infinite_cache(capsys):
    """The built-in workload (no file, but generated whole): MIN's rows at least LRU's, and both
    policies' infinite caches hit the same accesses."""
    code, out, _ = run_cli(capsys, "analyze", "--demo", "--demo-accesses", "50000", "--opt", "--json")
    r = json.loads(out)
    assert code == 0
    for row in r["curve"]:
        assert row["opt_block_hit_rate"] >= row["block_hit_rate"]
    assert math.isclose(
        r["opt"]["attainable_hit_rate"], r["attainable_hit_rate"]
    )  # an infinite cache is one cache
