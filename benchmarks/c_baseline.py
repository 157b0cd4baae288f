"""The analyzer against a textbook C hash table + Fenwick tree, on many distinct blocks.

The C program (below, compiled here with the machine's `gcc -O2`; kvset never imports it) is
the plain method: an open-addressing hash table (linear probing) maps a block to the time of
its last access, and a Fenwick tree over access times counts the live "last accesses" after
it, so d = 1 + (live times after the previous access); one histogram of d. No compaction, no
horizon, no prefetching: what one would write first.

Both run on the same keys: a permutation of D blocks (every block once, a first access each)
followed by R accesses drawn uniformly from them, so D blocks are tracked and the table and
the tree are far beyond the last-level cache. Both must give the same hits at 20 capacities.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

C_SOURCE = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

int main(int argc, char **argv) {
    /* argv: keys file (uint64), number of capacities, capacities... */
    FILE *f = fopen(argv[1], "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f) / 8;
    fseek(f, 0, SEEK_SET);
    uint64_t *keys = malloc(n * 8);
    if (fread(keys, 8, n, f) != (size_t)n) return 2;
    fclose(f);
    uint64_t cells = 1;
    while (cells < 2 * (uint64_t)n) cells <<= 1;  /* room for every key: no resizing */
    uint64_t mask = cells - 1;
    uint64_t *tkey = malloc(cells * 8);
    int64_t *tval = malloc(cells * 8);
    memset(tval, 0xff, cells * 8);  /* -1: empty */
    int32_t *fen = calloc(n + 1, 4);
    int64_t *hist = calloc(n + 2, 8);
    int64_t first = 0;
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (long t = 0; t < n; t++) {
        uint64_t k = keys[t], h = mix(k) & mask;
        while (tval[h] >= 0 && tkey[h] != k) h = (h + 1) & mask;
        if (tval[h] >= 0) {
            long last = tval[h];
            int64_t after = 0;  /* live times in (last, t): prefix(t-1) - prefix(last) */
            for (long i = t; i > 0; i -= i & -i) after += fen[i];
            for (long i = last + 1; i > 0; i -= i & -i) after -= fen[i];
            hist[after + 1]++;
            for (long i = last + 1; i <= n; i += i & -i) fen[i]--;
        } else {
            tkey[h] = k;
            first++;
        }
        tval[h] = t;
        for (long i = t + 1; i <= n; i += i & -i) fen[i]++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    double cpu = (c1.tv_sec - c0.tv_sec) + 1e-9 * (c1.tv_nsec - c0.tv_nsec);
    printf("{\"seconds\": %.6f, \"cpu_seconds\": %.6f, \"accesses\": %ld, \"first_time\": %ld, \"hits\": [",
           s, cpu, n, (long)first);
    int ncap = atoi(argv[2]);
    for (int c = 0; c < ncap; c++) {
        long cap = atol(argv[3 + c]);
        int64_t hits = 0;
        for (long d = 1; d <= cap && d <= n; d++) hits += hist[d];
        printf(c ? ", %ld" : "%ld", (long)hits);
    }
    printf("]}\n");
    return 0;
}
"""

GOAL_VS_C = 1.3


def make_keys(distinct: int, reuses: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(distinct).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # spread-out ids
    return np.concatenate([ids, ids[rng.integers(0, distinct, reuses)]])


def compile_baseline(folder: Path) -> Path | None:
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    source, binary = folder / "lru_fenwick.c", folder / "lru_fenwick"
    source.write_text(C_SOURCE)
    subprocess.run([gcc, "-O2", "-o", str(binary), str(source)], check=True)
    return binary


def run_analyzer(keys_path: str, capacities: list[int]) -> dict:
    from kvset.core.analyzer import Analyzer

    keys = np.load(keys_path)
    warm = Analyzer()
    warm.feed(keys[:200_000], timestamps=0.0)
    del warm
    started, cpu_started = time.perf_counter(), time.process_time()
    a = Analyzer(horizon=1 << 26)  # no block forgotten: the same exact LRU as the C program
    step = 1 << 20
    for i in range(0, len(keys), step):
        a.feed(keys[i : i + step], timestamps=0.0)
    took, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    curve = a.curve()
    return {
        "seconds": took,
        "cpu_seconds": cpu,
        "accesses": a.accesses,
        "first_time": a.first_time,
        "hits": [curve.hits(c) for c in capacities],
        "compactions": int(a._t.meta[7]),
    }


def _analyzer_in(root: Path, keys: Path, caps: list[int]) -> dict:
    """The analyzer of the kvset tree under root, in its own process."""
    here = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{here}")
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.c_baseline", str(keys), json.dumps(caps)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def compare(distinct: int, reuses: int, other_tree: Path | None = None, progress=print) -> dict:
    """The contenders in their own processes, one after the other; the figures and the check.

    other_tree: a second kvset tree (e.g. main's, `git archive main kvset | tar -x -C DIR`) whose
    analyzer runs too, side by side."""
    with tempfile.TemporaryDirectory(prefix="kvset-cbase-") as tmp:
        folder = Path(tmp)
        keys = make_keys(distinct, reuses)
        np.save(folder / "keys.npy", keys)
        keys.tofile(folder / "keys.bin")
        del keys
        caps = [int(c) for c in np.unique(np.round(np.geomspace(1, distinct, 20)).astype(np.int64))]
        binary = compile_baseline(folder)
        if binary is None:
            return {"skipped": "no gcc"}
        progress(f"C baseline and analyzer on {distinct:,} distinct blocks, {distinct + reuses:,} accesses")
        c = json.loads(
            subprocess.run(
                [str(binary), str(folder / "keys.bin"), str(len(caps)), *map(str, caps)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        ours = _analyzer_in(Path(__file__).resolve().parent.parent, folder / "keys.npy", caps)
        other = _analyzer_in(other_tree, folder / "keys.npy", caps) if other_tree else None
    same = c["hits"] == ours["hits"] and c["first_time"] == ours["first_time"]
    if other is not None:
        same = same and other["hits"] == c["hits"]
    return {
        "distinct": distinct,
        "accesses": distinct + reuses,
        "c": c,
        "analyzer": ours,
        "other": other,
        "other_tree": str(other_tree) if other_tree else None,
        "identical": same,
        "ratio": ours["seconds"] / c["seconds"],
        "cpu_ratio": ours["cpu_seconds"] / c["cpu_seconds"],
    }


def report(r: dict) -> list[str]:
    if "skipped" in r:
        return [f"C baseline skipped: {r['skipped']}"]
    n = r["accesses"]
    out = [
        f"{'at ' + format(r['distinct'], ',') + ' distinct blocks':<46} {'seconds':>9} {'CPU s':>7} "
        f"{'CPU ns/access':>14} {'accesses/s':>12}"
    ]
    rows = [("textbook C hash table + Fenwick (gcc -O2)", r["c"]), ("kvset analyzer", r["analyzer"])]
    if r.get("other"):
        rows.append((f"kvset analyzer of {r['other_tree']}", r["other"]))
    for label, part in rows:
        out.append(
            f"{label:<46} {part['seconds']:9.2f} {part['cpu_seconds']:7.2f} "
            f"{1e9 * part['cpu_seconds'] / n:14.0f} {n / part['seconds'] / 1e6:8.1f} M/s"
        )
    out.append(f"identical hits at 20 capacities and first accesses: {'yes' if r['identical'] else 'NO'}")
    out.append(
        f"goal: analyzer within {GOAL_VS_C}x of the C baseline: {r['ratio']:.2f}x wall, {r['cpu_ratio']:.2f}x CPU "
        f"{'PASS' if max(r['ratio'], r['cpu_ratio']) <= GOAL_VS_C else 'MISS'}"
    )
    return out


if __name__ == "__main__":
    print(json.dumps(run_analyzer(sys.argv[1], json.loads(sys.argv[2]))))
