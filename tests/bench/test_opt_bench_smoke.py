"""benchmarks/opt_bench.py on a tiny trace, so that the OPT section of `make bench` cannot rot: it runs,
its heap replays of MIN agree with the one-pass curve, and its report holds every contender. Its main,
as `make bench` runs it, is tested in test_benchmarks_smoke.py."""

from __future__ import annotations

from benchmarks.opt_bench import COVERAGE, measure, report_lines
from benchmarks.trace import make_trace
from kvset.core.naive import simulate_min
from kvset.core.opt import opt_histogram

TINY = 20_000


def test_measure_runs_every_contender_and_its_replays_agree_with_the_curve():
    r = measure(TINY, heap=True)
    assert r["accesses"] == make_trace(TINY).accesses and r["distinct"] > 0
    assert len(r["replays"]) == len(COVERAGE) and all(same for _, _, same in r["replays"])
    assert r["opt_seconds"] > 0 and r["lru_seconds"] > 0 and r["heap_bytes"] is not None
    # the working sets it reports are MIN's: the heap replay at one reaches what the curve says
    trace = make_trace(TINY)
    curve = opt_histogram(trace.keys, trace.block_size, request_starts=trace.request_starts).curve()
    for target, opt_ws, lru_ws in r["working_sets"]:
        assert opt_ws == curve.working_set(target) <= lru_ws
    c = r["capacities"][0]
    assert simulate_min(trace.keys.tolist(), c)[0] == curve.hits(c)
    lines = report_lines([r, measure(2 * TINY, heap=False)], cpu=None)
    assert any("OPT one pass" in line for line in lines) and any("projected" in line for line in lines)
    assert any("skipped" in line for line in lines)  # the second size had no replays
