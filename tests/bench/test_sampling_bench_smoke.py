"""benchmarks/sampling.py on a tiny trace, so that the sampling section of `make bench` cannot rot."""

from __future__ import annotations

import numpy as np

from benchmarks.sampling import goals, measure, plain_shards, report_lines
from benchmarks.trace import make_trace, save_trace
from kvset.core.analyzer import Analyzer


def test_plain_shards_at_rate_one_is_the_exact_curve():
    trace = make_trace(30_000)
    exact = Analyzer()
    exact.feed(trace.keys, timestamps=0.0)
    caps = exact.curve().log_capacities(20)
    assert np.allclose(plain_shards(trace, 1.0, 3, caps), exact.curve().hit_rates(caps))


def test_measure_reports_speed_memory_and_errors_side_by_side(tmp_path):
    trace = make_trace(60_000)
    save_trace(trace, tmp_path / "t")
    r = measure("tiny", trace, tmp_path / "t", seeds=2, repeat=1, cpu=None, progress=lambda _: None)
    assert r["accesses"] == trace.accesses and len(r["capacities"]) >= 10
    for side in ("exact", "sampled"):
        assert r[side]["accesses_per_second"] > 0 and r[side]["state_bytes"] > 0
    assert 0 <= r["sampled"]["mae"] <= r["sampled"]["worst"] < 1 and len(r["sampled"]["mae_per_seed"]) == 2
    assert r["plain_shards"]["mae"] >= 0 and r["fixed_size"]["sample_size"] == r["sampled"]["tracked_blocks"]
    lines = report_lines([r])
    assert any(line.startswith("tiny") for line in lines) and len(goals([r])) == 2  # error and speed


def test_the_boost_comparison_runs_and_puts_the_table_back(capsys):
    from benchmarks import sampling_boosts
    from kvset.core import sampling_rates as sampling

    before = sampling.HEAD_BOOSTS
    assert sampling_boosts.main(["--accesses", "20000", "--boosts", "0"]) == 0
    out = capsys.readouterr().out
    assert out.count("HEAD_BOOSTS") == 4 and out.count("previous rule") == 4 and "looked at" in out
    assert before == sampling.HEAD_BOOSTS  # the table is put back
