"""`kvset serve` and `kvset-top --serve-metrics` refuse what they cannot do with one line and exit 2;
`--tiers` in `kvset analyze` and `kvset-top --once`, text and JSON."""

from __future__ import annotations

import argparse
import json
import socket

import pytest

from kvset.cli import main
from kvset.cli.argtypes import listen_address
from kvset_tui.cli import main as top_main
from tests.support.paths import MOONCAKE_TRACE

TRACE = str(MOONCAKE_TRACE)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("9477", ("127.0.0.1", 9477)),
        ("0", ("127.0.0.1", 0)),
        (":9477", ("127.0.0.1", 9477)),
        ("0.0.0.0:9477", ("0.0.0.0", 9477)),
        ("[::1]:9477", ("::1", 9477)),
        ("gpu-node-01:80", ("gpu-node-01", 80)),
    ],
)
def test_listen_address_host_defaults_to_loopback(text, address):
    assert listen_address(text) == address


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("http", "not \\[HOST:\\]PORT"),
        ("::1:9477", "brackets"),
        ("70000", "0..65535"),
        ("host:", "not \\[HOST"),
    ],
)
def test_listen_address_refuses_what_is_no_address(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        listen_address(text)


def test_serve_asks_for_an_address_or_a_textfile_and_a_source(capsys):
    code, _, err = run(capsys, "serve", "--replay", TRACE)
    assert code == 2 and "nothing listens unless asked" in err and err.count("\n") == 1
    code, _, err = run(capsys, "serve", "--listen", "0")
    assert code == 2 and "give a source" in err


def test_serve_says_when_the_port_is_taken(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = run(capsys, "serve", "--replay", TRACE, "--listen", f"127.0.0.1:{port}")
    assert code == 2 and f"--listen 127.0.0.1:{port}: cannot listen there" in err and "Traceback" not in err


def test_serve_refuses_a_textfile_it_cannot_write(capsys, tmp_path):
    code, _, err = run(
        capsys, "serve", "--replay", TRACE, "--textfile", str(tmp_path / "missing" / "kvset.prom")
    )
    assert code == 2 and "no such folder" in err
    code, _, err = run(capsys, "serve", "--replay", TRACE, "--textfile", str(tmp_path))
    assert code == 2 and "is a folder" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--once", "--serve-metrics", "9477"], "--once exits after one report"),
        (["--capacities", "1000"], "needs --serve-metrics"),
        (["--serve-metrics", "0"], "needs a port"),
        (["--tiers", "80GiB"], "sizes in bytes need the KV bytes per block; give --model"),
    ],
)
def test_kvset_top_refuses_exporter_flags_that_cannot_work(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        top_main(["--replay", TRACE, *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_analyze_tiers_json_follows_the_curve_and_sizes_the_next_tier(capsys):
    code, out, _ = run(
        capsys,
        "analyze",
        TRACE,
        "--json",
        "--capacities",
        "5000,25000",
        "--tiers",
        "5000,20000",
        "--size-next-tier",
        "0.95",
    )
    r = json.loads(out)
    curve = {p["capacity_blocks"]: p for p in r["curve"]}
    assert r["tier_mode"] == "exclusive"
    assert [(t["tier"], t["capacity_blocks"], t["reach_blocks"]) for t in r["tiers"]] == [
        (1, 5000, 5000),
        (2, 20000, 25000),
    ]
    for unit in ("block", "token"):
        key = f"{unit}_hit_rate"
        assert r["tiers"][0][key] == pytest.approx(curve[5000][key])
        assert r["tiers"][1][key] == pytest.approx(curve[25000][key] - curve[5000][key])
        assert r["tier_misses"][f"{unit}_miss_rate"] == pytest.approx(1 - curve[25000][key])
    ws95 = next(w for w in [w for w in r["working_sets"] if w["window"] == "all"] if w["target"] == 0.95)[
        "capacity_blocks"
    ]
    assert r["next_tier"]["capacity_blocks"] == ws95 - 25000 and r["next_tier"]["reached"]


def test_analyze_tiers_in_bytes_with_a_model_and_inclusive_text(capsys):
    code, out, _ = run(
        capsys,
        "analyze",
        TRACE,
        "--json",
        "--model",
        "llama-3.1-70b",
        "--tiers",
        "80GiB,512GiB",
        "--tier-mode",
        "inclusive",
        "--size-next-tier",
        "99%",
    )
    r = json.loads(out)
    per_block = 512 * 327_680  # Mooncake blocks of 512 tokens, Llama-3.1-70B's bytes per token
    assert [t["capacity_blocks"] for t in r["tiers"]] == [80 * 2**30 // per_block, 512 * 2**30 // per_block]
    assert [t["capacity_gib"] for t in r["tiers"]] == pytest.approx([80, 512], abs=0.2)
    ws99 = next(w for w in [w for w in r["working_sets"] if w["window"] == "all"] if w["target"] == 0.99)[
        "capacity_blocks"
    ]
    assert r["next_tier"]["capacity_blocks"] == ws99  # inclusive: the next tier holds the whole working set
    code, out, _ = run(
        capsys,
        "analyze",
        TRACE,
        "--model",
        "llama-3.1-70b",
        "--tiers",
        "80GiB,512GiB",
        "--tier-mode",
        "inclusive",
        "--size-next-tier",
        "99%",
    )
    assert "tiers (inclusive: each tier holds a copy of the tiers above it" in out
    assert f"smallest next tier for 99 % (coverage): {ws99:,} blocks (" in out and "GiB)" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tiers", "80GiB"], "need the KV bytes per block; give --model or --bytes-per-token"),
        (
            ["--tiers", "5000,1000", "--tier-mode", "inclusive"],
            "tier 2 (1,000 blocks) must be at least as large",
        ),
        (["--tiers", "80GiB,1000", "--model", "llama-3.1-70b"], "not both"),
        (["--size-next-tier", "0.9"], "--size-next-tier needs --tiers"),
        (["--tiers", "1000", "--size-next-tier", "0.9,0.95"], "takes one target"),
        (["--tiers", "1KiB", "--model", "llama-3.1-70b"], "at least one block of 167,772,160 B"),
    ],
)
def test_analyze_refuses_tiers_it_cannot_size(capsys, argv, message):
    code, _, err = run(capsys, "analyze", TRACE, *argv)
    assert code == 2 and message in err and err.count("\n") == 1


def test_kvset_top_once_reports_the_same_tiers_as_analyze(capsys):
    tiers = ["--tiers", "5000,20000", "--size-next-tier", "0.95"]
    _, out, _ = run(capsys, "analyze", TRACE, "--json", *tiers)
    offline = json.loads(out)
    assert top_main(["--once", "--json", "--replay", TRACE, *tiers]) == 0
    live = json.loads(capsys.readouterr().out)
    assert live["tiers"] == offline["tiers"] and live["next_tier"] == offline["next_tier"]
    assert top_main(["--once", "--replay", TRACE, *tiers]) == 0
    text = capsys.readouterr().out
    assert "tiers (exclusive" in text and "smallest next tier for 95 % (coverage)" in text
