"""The large-trace benchmark's own code on a tiny trace, so that `make bench-large` cannot rot."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from benchmarks import c_baseline
from benchmarks.large import main
from benchmarks.large_trace import large_trace


def test_the_generated_trace_is_mooncake_jsonl_with_arrays_that_match_it(tmp_path):
    trace = large_trace(20_000, seed=3, data=tmp_path, progress=lambda _: None)
    rows = [json.loads(line) for line in gzip.decompress(trace.path.read_bytes()).splitlines()]
    keys = np.load(trace.arrays / "keys.npy")
    assert [h for r in rows for h in r["hash_ids"]] == keys.tolist()
    assert trace.accesses == len(keys) >= 20_000 and trace.requests == len(rows)
    assert all(-(-r["input_length"] // 64) == len(r["hash_ids"]) for r in rows)  # 64-token blocks
    assert [r["timestamp"] for r in rows] == sorted(r["timestamp"] for r in rows)
    assert trace.distinct_blocks == len(np.unique(keys))
    assert large_trace(20_000, seed=3, data=tmp_path, progress=lambda _: None) == trace  # cached


def test_the_whole_run_checks_equality_with_the_msgspec_path(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "--accesses",
                "20000",
                "--data",
                str(tmp_path),
                "--c-distinct",
                "20000",
                "--repeat",
                "1",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "identical to the msgspec path at" in printed and ": yes" in printed
    report = json.loads(out.read_text())
    assert report["parts"][0]["label"].startswith("gzip -dc")
    c = report["c_baseline"]
    assert c.get("skipped") or c["identical"]


def test_the_c_baseline_counts_what_the_analyzer_counts(tmp_path):
    if c_baseline.compile_baseline(tmp_path) is None:
        pytest.skip("no gcc on this machine (the benchmark says so and skips the comparison)")
    r = c_baseline.compare(3_000, 5_000)
    assert r["identical"] and r["c"]["first_time"] == 3_000 and r["c"]["accesses"] == 8_000
