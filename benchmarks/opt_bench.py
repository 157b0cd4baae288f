"""`python -m benchmarks.opt_bench`: the one-pass OPT curve against the LRU analyzer and MIN replays.

On the benchmark's agentic workload (benchmarks.trace.make_trace: kvset.workload.generate with
more, shorter sessions) of 1e6 and 1e7 accesses, in one process pinned to one core, it times
  - the one-pass OPT histogram and curve (kvset.core.opt.opt_histogram), next uses included;
  - the exact LRU analyzer on the same trace (its reader's batches, then the whole curve);
  - Belady's MIN replayed with a heap (kvset.core.naive.simulate_min) at three capacities, the
    OPT working sets for 50, 95 and 99 % coverage, checking that its hits equal the curve's;
and prints them side by side, then projects 1e8 accesses from the two sizes measured.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import time
from pathlib import Path

from benchmarks.contenders import pin_to
from benchmarks.memory import PeakMemory
from benchmarks.run import default_cpu
from benchmarks.trace import make_trace, split_batches
from kvset.core.analyzer import Analyzer
from kvset.core.naive import simulate_min
from kvset.core.opt import opt_histogram
from kvset.units import StreamUnits

COVERAGE = (0.5, 0.95, 0.99)
WARMUP = 50_000


def _warm(trace) -> None:
    small = trace.prefix(WARMUP)
    opt_histogram(small.keys, request_starts=small.request_starts).curve()
    a = Analyzer(units=StreamUnits(trace.block_size, "format"))
    for batch in split_batches(small, 1 << 13):
        a.feed_batch(batch)
    a.curve()


def measure(accesses: int, heap: bool) -> dict:
    """One trace of `accesses`: the three contenders' times and peak memory; heap: run the MIN replays."""
    trace = make_trace(accesses)
    _warm(trace)
    gc.collect()
    mem = PeakMemory()
    mem.start()
    started = time.perf_counter()
    hist = opt_histogram(trace.keys, trace.block_size, request_starts=trace.request_starts)
    opt = hist.curve()
    opt_seconds = time.perf_counter() - started
    opt_bytes = mem.delta_bytes()
    distinct = hist.distinct_blocks
    del hist
    gc.collect()

    batches = split_batches(trace)
    mem = PeakMemory()
    mem.start()
    started = time.perf_counter()
    a = Analyzer(units=StreamUnits(trace.block_size, "format"))
    for batch in batches:
        a.feed_batch(batch)
    lru = a.curve()
    lru_seconds = time.perf_counter() - started
    lru_bytes = mem.delta_bytes()
    del a, batches
    gc.collect()

    capacities = [opt.working_set(t) for t in COVERAGE]
    replays = []
    heap_bytes = None
    if heap:
        keys = trace.keys.tolist()  # Python ints, made before the clock starts
        mem = PeakMemory()
        mem.start()
        for capacity in capacities:
            started = time.perf_counter()
            hits, _ = simulate_min(keys, capacity)
            replays.append((capacity, time.perf_counter() - started, hits == opt.hits(capacity)))
        heap_bytes = mem.delta_bytes()  # the largest replay's next uses, heap and residents
        del keys
    return {
        "accesses": trace.accesses,
        "distinct": distinct,
        "opt_seconds": opt_seconds,
        "opt_bytes": opt_bytes,
        "lru_seconds": lru_seconds,
        "lru_bytes": lru_bytes,
        "capacities": capacities,
        "replays": replays,
        "heap_bytes": heap_bytes,
        "working_sets": [(t, opt.working_set(t), lru.working_set(t)) for t in COVERAGE],
        "rates_at": [(c, opt.hit_rate(c), lru.hit_rate(c)) for c in capacities],
    }


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds / 1e6:6.2f} M/s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e6,1e7", help="accesses per trace, comma separated")
    parser.add_argument("--no-heap", action="store_true", help="skip the per-capacity MIN replays")
    parser.add_argument(
        "--heap-up-to",
        type=float,
        default=None,
        metavar="N",
        help="run the MIN replays only on traces of at most N accesses (default: every size)",
    )
    parser.add_argument("--cpu", type=int, default=default_cpu(), help="core to pin to (default: the last)")
    parser.add_argument(
        "--no-pin", action="store_true", help="run on whatever core (no timing figure to keep)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.no_pin:
        args.cpu = None
    pin_to(args.cpu)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    heap_limit = float("inf") if args.heap_up_to is None else args.heap_up_to
    results = [measure(n, not args.no_heap and n <= heap_limit) for n in sizes]
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    print("\n".join(report_lines(results, args.cpu)))
    return 0 if all(same for r in results for _, _, same in r["replays"]) else 1


def report_lines(results: list[dict], cpu: int | None) -> list[str]:
    """The figures side by side: per trace size, the one pass, the analyzer and each heap replay (time,
    accesses/s and peak memory added), then the working sets and the projection to 1e8 accesses."""
    out = [f"OPT (Belady MIN) one pass vs LRU analyzer vs MIN heap replay, one core (cpu {cpu})"]
    head = (
        f"{'accesses':>11} {'distinct':>9} | {'OPT one pass':>24} | {'LRU analyzer':>24} | "
        "MIN heap replay per capacity (peak memory of the replays)"
    )
    out += [head, "-" * len(head)]
    for r in results:
        n = r["accesses"]
        replay = "  ".join(
            f"C={c:,}: {_rate(n, s)} {'=' if same else '!= curve'}" for c, s, same in r["replays"]
        )
        if r["heap_bytes"] is not None:
            replay += f"  ({r['heap_bytes'] / 2**20:,.0f} MB)"
        out.append(
            f"{n:>11,} {r['distinct']:>9,} | {_rate(n, r['opt_seconds'])} {r['opt_seconds']:6.2f} s "
            f"{r['opt_bytes'] / 2**20:5.0f} MB | {_rate(n, r['lru_seconds'])} {r['lru_seconds']:6.2f} s "
            f"{r['lru_bytes'] / 2**20:5.0f} MB | {replay or 'skipped'}"
        )
    out += ["", "working sets (blocks, coverage of the infinite-cache hits): OPT vs LRU"]
    for r in results:
        sets = "  ".join(f"{100 * t:g} %: {o:,} vs {lr:,}" for t, o, lr in r["working_sets"])
        rates = "  ".join(f"C={c:,}: {100 * o:.2f} % vs {100 * lr:.2f} %" for c, o, lr in r["rates_at"])
        out += [f"{r['accesses']:>11,}  {sets}", f"{'':>11}  block hit rate at the OPT working sets: {rates}"]
    replayed = [r for r in results if r["replays"]]
    if replayed:
        last = replayed[-1]
        per_replay = sum(s for _, s, _ in last["replays"]) / len(last["replays"])
        out += [
            "",
            f"20 MIN replays of {last['accesses']:,} accesses would take about {20 * per_replay:,.0f} s "
            f"against {last['opt_seconds']:.1f} s for the whole OPT curve",
        ]
    if len(results) >= 2:
        a, b = results[-2], results[-1]
        ra, rb = a["accesses"] / a["opt_seconds"], b["accesses"] / b["opt_seconds"]
        decades = math.log10(b["accesses"] / a["accesses"])
        per_decade = (rb / ra) ** (1 / decades)  # the rate's change per tenfold accesses
        rate = rb * per_decade ** (8 - math.log10(b["accesses"]))
        grow = 1e8 / b["accesses"]
        out += [
            "",
            f"1e8 accesses, projected: OPT about {1e8 / rate:,.0f} s ({rate / 1e6:.2f} M/s: the rate "
            f"x{per_decade:.2f} per tenfold accesses, as measured), peak memory about "
            f"{grow * b['opt_bytes'] / 2**30:.1f} GiB beside the keys; LRU about {grow * b['lru_seconds']:,.0f} s",
        ]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
