"""What operators asked of the commands' output: shell completion, the curve as CSV, capacities
given in GiB, the knee, verify's percentages as analyze prints them."""

from __future__ import annotations

import argparse
import csv
import io
import json
import shlex
import shutil
import subprocess
import sys

import pytest

from kvset.cli import main
from kvset.geometry.resolve import load_model
from kvset.quantities import GIB
from tests.support.paths import MOONCAKE_TRACE, ROOT

BASH = shutil.which("bash")


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def script(*argv: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def complete(completion_script: str, prog: str, line: str) -> list[str]:
    """What bash offers for `line` (the cursor at its end) with the script loaded."""
    words = line.split(" ")
    quoted = " ".join(shlex.quote(w) for w in words)  # an empty last word: the cursor after a space
    probe = (
        f"{completion_script}\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        f"fn=$(complete -p {prog} | sed -E 's/.* -F ([^ ]+) .*/\\1/'); $fn\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run(
        [BASH, "--norc", "--noprofile"], input=probe, capture_output=True, text=True, check=True
    )
    return [w for w in out.stdout.splitlines() if w]


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_kvset_completion_bash_completes_commands_flags_and_choices():
    bash = script("kvset", "completion", "bash")
    assert complete(bash, "kvset", "kvset an") == ["analyze"]
    assert complete(bash, "kvset", "kvset analyze --for") == ["--format"]
    assert complete(bash, "kvset", "kvset analyze --format ") == ["bailian", "mooncake", "tokens"]
    assert complete(bash, "kvset", "kvset verify --ord") == ["--order"]
    assert complete(bash, "kvset", "kvset completion ") == ["bash", "zsh"]
    assert "--csv" in complete(bash, "kvset", "kvset analyze --c")


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_kvset_top_completion_comes_from_its_own_parser():
    from kvset_tui.cli import build_parser

    bash = script("kvset_tui", "--completion", "bash")
    assert complete(bash, "kvset-top", "kvset-top --the") == ["--theme"]
    themes = next(a.choices for a in build_parser()._actions if "--theme" in a.option_strings)
    assert complete(bash, "kvset-top", "kvset-top --theme ") == sorted(themes)
    # every flag of the parser completes, but the removed ones (hidden: they only say what replaced them)
    flags = {
        o
        for a in build_parser()._actions
        for o in a.option_strings
        if o.startswith("--") and a.help != argparse.SUPPRESS
    }
    assert set(complete(bash, "kvset-top", "kvset-top --")) == flags


def test_zsh_completion_loads_the_same_function_through_bashcompinit():
    zsh = script("kvset", "completion", "zsh")
    assert "bashcompinit" in zsh and "complete -o default -F _kvset_complete kvset" in zsh


def test_analyze_csv_holds_the_json_curve_and_marks_the_knee(capsys):
    code, out, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    _, js, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--json")
    report = json.loads(js)
    assert [int(r["capacity_blocks"]) for r in rows] == [p["capacity_blocks"] for p in report["curve"]]
    assert [float(r["block_hit_rate"]) for r in rows] == [p["block_hit_rate"] for p in report["curve"]]
    assert [int(r["capacity_blocks"]) for r in rows if r["knee"] == "1"] == [
        report["knee"]["capacity_blocks"]
    ]
    assert all(r["capacity_gib"] == "" for r in rows)  # no model: no sizes


def test_once_csv_has_the_same_rows_as_analyze_csv(capsys):
    _, offline, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--csv")
    live = subprocess.run(
        [sys.executable, "-m", "kvset_tui", "--once", "--csv", "--replay", str(MOONCAKE_TRACE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert live == offline


def test_capacities_in_gib_with_a_model_are_the_blocks_that_fit(capsys):
    per_block = (
        load_model("llama-3.1-70b").full_attention_bytes_per_token() * 512
    )  # Mooncake: 512 tokens a block
    code, out, _ = run_cli(
        capsys,
        "analyze",
        str(MOONCAKE_TRACE),
        "--model",
        "llama-3.1-70b",
        "--capacities",
        "80GiB,40GiB",
        "--json",
    )
    assert code == 0
    rows = json.loads(out)["curve"]
    assert [r["capacity_blocks"] for r in rows] == [40 * GIB // per_block, 80 * GIB // per_block]
    for row, size in zip(rows, (40 * GIB, 80 * GIB), strict=True):
        assert row["capacity_bytes"] <= size < row["capacity_bytes"] + per_block


def test_capacities_in_gib_without_a_model_is_a_one_line_error(capsys):
    code, _, err = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--capacities", "40GiB")
    assert code == 2
    [line] = err.splitlines()
    assert "40GiB" in line and "--model" in line


def test_verify_prints_percentages_as_analyze_does(capsys):
    code, verify_text, _ = run_cli(capsys, "verify", str(MOONCAKE_TRACE))
    assert code == 0
    lines = verify_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("capacity (blocks)")) + 2
    rows = [
        [c.strip() for c in line.split("  ") if c.strip()] for line in lines[start:] if line[:1].isdigit()
    ]
    capacities = [r[0].replace(",", "") for r in rows]
    _, analyze_text, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--capacities", ",".join(capacities))
    a_lines = analyze_text.splitlines()
    a_start = next(i for i, line in enumerate(a_lines) if line.startswith("capacity (blocks)")) + 2
    analyze_rates = [
        [c.strip() for c in line.split("  ") if c.strip()][2]
        for line in a_lines[a_start : a_start + len(rows)]
    ]
    assert [r[1] for r in rows] == analyze_rates  # one-pass block hit rate, as analyze prints it
    assert [r[2] for r in rows] == analyze_rates  # the naive replay agrees
    assert all(rate.endswith(" %") for rate in analyze_rates)


def test_with_the_horizon_reached_the_coverage_base_is_an_infinite_caches_hit_rate(capsys):
    # coverage targets count the re-references beyond the horizon: the report must print that base,
    # not only the hit rate at the horizon, or "95 % not reached" beside 42 % looks contradictory
    _, out, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--json")
    unbounded = json.loads(out)
    _, out, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--json", "--horizon", "10000")
    small = json.loads(out)
    assert small["horizon_reached"] and small["attainable_hit_rate"] < 0.5
    # the beyond-horizon count is the horizon's estimate (a Bloom filter): within a few blocks of the truth
    assert small["infinite_cache_hit_rate"] == pytest.approx(unbounded["attainable_hit_rate"], abs=1e-3)
    assert unbounded["infinite_cache_hit_rate"] == unbounded["attainable_hit_rate"]
    _, text, _ = run_cli(capsys, "analyze", str(MOONCAKE_TRACE), "--horizon", "10000")
    assert (
        f"an infinite cache: {100 * small['infinite_cache_hit_rate']:.2f} % of blocks" in text
        and "working sets (coverage: share of an infinite cache's hit rate)" in text
    )


def test_a_trace_that_rereads_nothing_says_so_instead_of_a_zero_block_working_set(capsys, tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "".join(
            json.dumps(
                {"timestamp": i, "input_length": 32, "output_length": 1, "hash_ids": [2 * i, 2 * i + 1]}
            )
            + "\n"
            for i in range(50)
        )
    )
    code, out, _ = run_cli(capsys, "analyze", str(trace), "--block-size", "16")
    assert code == 0 and "attainable hit rate (infinite cache): 0.00 %" in out
    assert out.count("0 (no re-references)") == 3  # the three coverage targets
