"""benchmarks/runs_bench.py (make bench's real-trace section) on tiny traces, so that it cannot rot: every
part runs, the two kernels' curves agree, and its figures are read back."""

from __future__ import annotations

import json

from benchmarks.runs_bench import main


def test_runs_bench_measures_every_part_and_finds_the_curves_identical(tmp_path):
    out = tmp_path / "runs.json"
    assert main(["--accesses", "30000", "--random-accesses", "20000", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    labels = [row[0] for row in report["rows"]]
    assert any("gzip -dc" in label for label in labels) and any("kvset analyze" in label for label in labels)
    assert sum("Belady MIN" in label for label in labels) == 2  # on both traces
    assert set(report["figures"]["min_rates"]) == {"prefix-chained", "agentic, not prefix-chained"}
    prefix = report["figures"]["prefix-chained"]
    assert prefix["identical"] and report["figures"]["agentic, not prefix-chained"]["identical"]
    # conversations re-sent whole: almost every access is in a run, and the runs are long
    assert prefix["share_in_runs"] > 0.8 and prefix["blocks_per_run"] > 100
