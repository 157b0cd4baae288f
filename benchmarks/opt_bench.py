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
import math
import time

from benchmarks.contenders import pin_to
from benchmarks.memory import PeakMemory
from benchmarks.run import default_cpu
from benchmarks.trace import make_trace, split_batches
from kvset.core.analyzer import Analyzer
from kvset.core.naive import simulate_min
from kvset.core.opt import opt_histogram

COVERAGE = (0.5, 0.95, 0.99)
WARMUP = 50_000


def _warm(trace) -> None:
    small = trace.prefix(WARMUP)
    opt_histogram(small.keys, request_starts=small.request_starts).curve()
    a = Analyzer(block_tokens=trace.block_tokens)
    for batch in split_batches(small, 1 << 13):
        a.feed_batch(batch)
    a.curve()


def measure(accesses: int, heap: bool) -> dict:
    trace = make_trace(accesses)
    _warm(trace)
    gc.collect()
    mem = PeakMemory()
    mem.start()
    started = time.perf_counter()
    hist = opt_histogram(trace.keys, trace.block_tokens, request_starts=trace.request_starts)
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
    a = Analyzer(block_tokens=trace.block_tokens)
    for batch in batches:
        a.feed_batch(batch)
    lru = a.curve()
    lru_seconds = time.perf_counter() - started
    lru_bytes = mem.delta_bytes()
    del a, batches
    gc.collect()

    capacities = [opt.working_set(t) for t in COVERAGE]
    replays = []
    if heap:
        keys = trace.keys.tolist()  # Python ints, made before the clock starts
        for capacity in capacities:
            started = time.perf_counter()
            hits, _ = simulate_min(keys, capacity)
            replays.append((capacity, time.perf_counter() - started, hits == opt.hits(capacity)))
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
        "working_sets": [(t, opt.working_set(t), lru.working_set(t)) for t in COVERAGE],
        "rates_at": [(c, opt.hit_rate(c), lru.hit_rate(c)) for c in capacities],
    }


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds / 1e6:6.2f} M/s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e6,1e7", help="accesses per trace, comma separated")
    parser.add_argument("--no-heap", action="store_true", help="skip the per-capacity MIN replays")
    parser.add_argument("--cpu", type=int, default=default_cpu(), help="core to pin to (default: the last)")
    args = parser.parse_args(argv)
    pin_to(args.cpu)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    results = [measure(n, not args.no_heap) for n in sizes]

    print(f"OPT (Belady MIN) one pass vs LRU analyzer vs MIN heap replay, one core (cpu {args.cpu})")
    head = f"{'accesses':>11} {'distinct':>9} | {'OPT one pass':>24} | {'LRU analyzer':>24} | MIN heap replay per capacity"
    print(head)
    print("-" * len(head))
    for r in results:
        n = r["accesses"]
        replay = (
            "  ".join(f"C={c:,}: {_rate(n, s)} {'=' if same else '!= curve'}" for c, s, same in r["replays"])
            or "skipped"
        )
        print(
            f"{n:>11,} {r['distinct']:>9,} | {_rate(n, r['opt_seconds'])} {r['opt_seconds']:6.2f} s "
            f"{r['opt_bytes'] / 2**20:5.0f} MB | {_rate(n, r['lru_seconds'])} {r['lru_seconds']:6.2f} s "
            f"{r['lru_bytes'] / 2**20:5.0f} MB | {replay}"
        )
    print()
    print("working sets (blocks, coverage of the infinite-cache hits): OPT vs LRU")
    for r in results:
        sets = "  ".join(f"{100 * t:g} %: {o:,} vs {lr:,}" for t, o, lr in r["working_sets"])
        print(f"{r['accesses']:>11,}  {sets}")
        rates = "  ".join(f"C={c:,}: {100 * o:.2f} % vs {100 * lr:.2f} %" for c, o, lr in r["rates_at"])
        print(f"{'':>11}  block hit rate at the OPT working sets: {rates}")
    if results[0]["replays"]:
        last = results[-1]
        per_replay = sum(s for _, s, _ in last["replays"]) / len(last["replays"])
        print()
        print(
            f"20 MIN replays of {last['accesses']:,} accesses would take about {20 * per_replay:,.0f} s "
            f"against {last['opt_seconds']:.1f} s for the whole OPT curve"
        )
    if len(results) >= 2:
        a, b = results[-2], results[-1]
        ra, rb = a["accesses"] / a["opt_seconds"], b["accesses"] / b["opt_seconds"]
        decades = math.log10(b["accesses"] / a["accesses"])
        per_decade = (rb / ra) ** (1 / decades)  # the rate's change per tenfold accesses
        rate = rb * per_decade ** (8 - math.log10(b["accesses"]))
        grow = 1e8 / b["accesses"]
        print()
        print(
            f"1e8 accesses, projected: OPT about {1e8 / rate:,.0f} s ({rate / 1e6:.2f} M/s: the rate "
            f"x{per_decade:.2f} per tenfold accesses, as measured), peak memory about "
            f"{grow * b['opt_bytes'] / 2**30:.1f} GiB beside the keys; LRU about {grow * b['lru_seconds']:,.0f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
