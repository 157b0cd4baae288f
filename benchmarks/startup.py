"""Time to the first useful screen (issue 20, items 8 and 9): the command lines' start-up and the app's
first curve, on a fresh install and after it.

Run: .venv/bin/python -m benchmarks.startup [--runs 7] [--no-app | --commands-only]   (make bench-startup)

1. Wall and CPU time of each command that answers without analysing (`--version`, `--help`, a
   completion script), the median of --runs fresh processes after one that writes the bytecode, and
   the packages each one loaded. The runs write and read bytecode as an installed package does, even
   where PYTHONDONTWRITEBYTECODE is set: compiling every module from source would cost each command
   0.1-0.3 s that no installed kvset pays.
2. The kernels' compile, as the Makefile's setup step runs it (`kvset-top --once --demo`), from a cache
   dropped here (the package's own numba cache files, which a fresh install lacks) and again warm.
3. `kvset-top --demo` in a 120x40 tmux pane (benchmarks.tui_bench.Pane): seconds from the process start
   to the app on screen, and from the app on screen to the first curve, on a dropped cache (a fresh
   install that skipped the setup step) and on the cache the setup step leaves. Needs tmux.
The caches dropped here are rebuilt by the runs themselves. Figures depend on the machine's load: the
script prints `uptime` first.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HEAVY = ("numpy", "numba", "httpx", "zmq", "prometheus_client", "textual")
COMMANDS = (
    ["kvset", "--version"],
    ["kvset", "--help"],
    ["kvset", "completion", "bash"],
    ["kvset", "analyze", "--help"],
    ["kvset-top", "--version"],
    ["kvset-top", "--help"],
    ["kvset-top", "--completion", "bash"],
)
WAITING = ("waiting for block accesses", "compiling the kernels")


# as installed: bytecode written once and read afterwards
WITH_BYTECODE = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def seconds_of(argv: list[str], runs: int) -> tuple[float, float]:
    """(median wall, median CPU: user + system) of `runs` fresh processes, after one that writes bytecode."""
    command = [str(BIN / argv[0]), *argv[1:]]
    subprocess.run(command, capture_output=True, check=True, env=WITH_BYTECODE)
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, env=WITH_BYTECODE)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def heavy_loaded(argv: list[str]) -> list[str]:
    module = "kvset_tui.cli" if argv[0] == "kvset-top" else "kvset.cli"
    probe = (
        "import sys, atexit, json\n"
        "atexit.register(lambda: sys.stderr.write('LOADED ' + json.dumps(sorted(m for m in sys.modules)) + '\\n'))\n"
        f"from {module} import main\nsys.argv = {argv!r}\nraise SystemExit(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED "))
    loaded = set(json.loads(line.removeprefix("LOADED ")))
    return [name for name in HEAVY if name in loaded]


def drop_kernel_caches() -> int:
    files = list((ROOT / "kvset").rglob("__pycache__/*.nb[ic]"))
    for f in files:
        f.unlink(missing_ok=True)
    return len(files)


def setup_compile_seconds() -> float:
    t0 = time.perf_counter()
    subprocess.run([str(BIN / "kvset-top"), "--once", "--demo"], capture_output=True, check=True)
    return time.perf_counter() - t0


def first_curve(name: str) -> dict:
    from benchmarks.tui_bench import Pane

    pane = Pane("1", name)
    try:
        pane.wait_for("? Help", timeout=120)
        on_screen = time.monotonic() - pane.started
        said_compiling = False
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            screen = pane.screen()
            said_compiling |= "compiling the kernels" in screen
            if not any(w in screen for w in WAITING):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"no curve within 180 s:\n{pane.screen()}")
        curve = time.monotonic() - pane.started
    finally:
        pane.close()
    return {
        "app_on_screen_s": round(on_screen, 2),
        "first_curve_after_app_s": round(curve - on_screen, 2),
        "said_compiling": said_compiling,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="processes per command (the median is shown)")
    ap.add_argument("--no-app", action="store_true", help="skip the tmux runs of the app")
    ap.add_argument(
        "--commands-only", action="store_true", help="part 1 only: no compile from a dropped cache, no app"
    )
    args = ap.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"{'command':32} {'median wall':>12} {'median CPU':>11}  heavy packages loaded")
    for argv in COMMANDS:
        loaded = ", ".join(heavy_loaded(argv)) or "none"
        wall, cpu = seconds_of(argv, args.runs)
        print(f"{' '.join(argv):32} {wall:>10.3f} s {cpu:>9.3f} s  {loaded}")
    if args.commands_only:
        return 0
    dropped = drop_kernel_caches()
    cold = setup_compile_seconds()
    warm = setup_compile_seconds()
    print(
        f"setup step `kvset-top --once --demo`: {cold:.1f} s on a dropped cache ({dropped} files), {warm:.1f} s warm"
    )
    if not args.no_app:
        drop_kernel_caches()
        print("kvset-top --demo, no cached kernels:", first_curve("cold"))
        print("kvset-top --demo, after the setup step:", first_curve("warm"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
