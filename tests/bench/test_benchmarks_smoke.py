"""The benchmark's own code on a tiny trace, so that `make bench` cannot rot between runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.contenders import analyzer_histogram, run_analyzer, run_python
from benchmarks.memory import PeakMemory
from benchmarks.opt_bench import COVERAGE
from benchmarks.pyfenwick import stack_distance_histogram
from benchmarks.run import run_opt_benchmark
from benchmarks.trace import (
    ORACLE_GENERAL,
    log_capacities,
    make_trace,
    shape_of,
    split_batches,
    write_oracle_general,
)
from kvset.core.naive import naive_curve, naive_stack_distances

TINY = 20_000


@pytest.fixture(scope="module")
def tiny():
    return make_trace(TINY)


def test_pure_python_baseline_matches_an_explicit_lru_stack():
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 60, 1500).tolist()
    hist, first = stack_distance_histogram(keys)
    distances = naive_stack_distances(keys)
    expected = [0] * (len(keys) + 1)
    for d in distances:
        expected[d] += 1
    assert first == expected[0] == len(set(keys))
    assert hist[1:] == expected[1:]


def test_pure_python_histogram_equals_the_analyzers(tiny):
    py = run_python(tiny, 8_000)
    ref_hist, ref_first = analyzer_histogram(tiny.prefix(8_000))
    assert py["accesses"] == tiny.prefix(8_000).accesses >= 8_000
    assert py["histogram"] == ref_hist
    assert py["first_accesses"] == ref_first
    assert sum(ref_hist) + ref_first == py["accesses"]


def test_trace_shape_and_batches(tiny):
    shape = shape_of(tiny)
    assert shape.accesses == tiny.accesses >= TINY
    assert shape.distinct_blocks == len(set(tiny.keys.tolist()))
    assert 0 < shape.attainable_hit_rate < 1
    batches = split_batches(tiny, 3_000)
    assert np.array_equal(np.concatenate([b.keys for b in batches]), tiny.keys)
    assert sum(len(b.request_starts) for b in batches) == len(tiny.request_starts)
    for b in batches:
        assert b.request_starts[0] == 0  # every batch starts a request
        assert len(b) <= 3_000 or len(b.request_starts) == 1
    prefix = tiny.prefix(5_000)
    assert prefix.accesses >= 5_000 and prefix.accesses in set(tiny.request_starts.tolist())


def test_log_capacities_are_distinct_and_span_the_blocks():
    caps = log_capacities(1_000_000, 20)
    assert caps[0] == 1 and caps[-1] == 1_000_000 and len(caps) == 20
    assert caps == sorted(set(caps))


def test_analyzer_run_reports_consistent_figures(tiny):
    caps = log_capacities(shape_of(tiny).distinct_blocks, 6)
    r = run_analyzer(tiny, caps, 5_000)
    assert r["accesses"] == tiny.accesses
    assert r["tracked_blocks"] == r["first_accesses"] == shape_of(tiny).distinct_blocks
    assert r["state_bytes_per_block"] <= r["worst_state_bytes_per_block"]
    head = tiny.prefix(4000)
    expected = naive_curve(head.keys.tolist(), [1, 50, 100, 500])
    small = run_analyzer(head, [1, 50, 100, 500], 1000)
    assert small["hits"] == [expected[c][0] for c in (1, 50, 100, 500)]
    assert small["hits"][-1] > 0


def test_libcachesim_hits_equal_the_analyzers(tiny, tmp_path):
    pytest.importorskip("libcachesim")
    from benchmarks.contenders import run_libcachesim

    assert ORACLE_GENERAL.itemsize == 24  # libCacheSim's packed oracleGeneral record
    path = tmp_path / "tiny.oracleGeneral.bin"
    write_oracle_general(tiny, path)
    caps = [1, 100, 1000, 5000]
    lcs = run_libcachesim(path, tiny.accesses, caps)
    hist, _ = analyzer_histogram(tiny)
    ours = [int(sum(hist[:c])) for c in caps]
    assert lcs["reader_requests"] == tiny.accesses
    assert lcs["hits"] == ours
    assert ours[-1] > ours[1] > 0


def test_peak_memory_sees_an_allocation():
    mem = PeakMemory()
    mem.start()
    block = np.ones(40 * 2**20 // 8)  # 40 MiB, touched
    grown = mem.delta_bytes()
    del block
    assert grown >= 30 * 2**20


def test_whole_benchmark_end_to_end(tmp_path):
    from benchmarks.run import main

    out = tmp_path / "r.json"
    # the sampling section has its own smoke test (test_sampling_bench_smoke.py): it would generate 10M-access traces
    rc = main(
        [
            "--accesses",
            "6000",
            "--python-prefix",
            "2000",
            "--repeat",
            "1",
            "--no-parse",
            "--no-sampling",
            "--no-opt",  # Belady MIN's section runs opt_bench at 1e6 and 1e7 accesses: tested below on 2e4
            "--no-runs",  # the real-trace shape's section: test_runs_bench_smoke.py, on a tiny trace
            "--capacities",
            "4",
            "--tui-seconds",  # kvset-top in tmux: the code path, not the figures (1 s windows)
            "1",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["checks"]["python_histogram_equals_analyzer"] is True
    assert report["checks"]["analyzer_hits_stable"] is True
    assert report["checks"]["libcachesim_hits_equal_analyzer"] in (True, None)
    assert {g["result"] for g in report["goals"]} <= {"PASS", "MISS"}
    assert report["trace"]["accesses"] >= 6000


def test_the_min_section_runs_opt_bench_and_reads_its_figures():
    # make bench's Belady MIN section: benchmarks/opt_bench.py in a process of its own, its JSON read back
    lines, figures = run_opt_benchmark(None, sizes="20000,40000", heap_up_to="20000")
    assert figures is not None, lines
    assert [len(f["replays"]) for f in figures] == [len(COVERAGE), 0]  # heap replays on the first size only
    assert all(same for _, _, same in figures[0]["replays"])  # MIN replayed agrees with the one pass
    assert any("MIN heap replay" in line for line in lines) and any("projected" in line for line in lines)
