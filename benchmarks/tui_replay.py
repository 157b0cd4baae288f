"""kvset-top replaying a prefix-chained trace at --speed max: how long until the whole file is analysed.

Run: .venv/bin/python -m benchmarks.tui_replay [--accesses 20000000] [--json FILE]

The trace is benchmarks.prefix_trace's (the shape of WEKA's Claude Code traces: conversations re-sent
whole), written as gzip'd Mooncake JSONL. Timed on the same file, one after the other, each a fresh
process: `gzip -dc` (the floor), `kvset analyze FILE --block-size 64 --json`, `kvset-top --once
--replay FILE` (the live monitor's path without a screen) and `kvset-top --replay FILE --speed max`
in a 120x40 tmux pane, from its start to its source line saying "finished" on the captured screen
(polled every 0.1 s). The app's time includes its start-up, which is given apart (to the first drawn screen).
Needs tmux for the last part; nothing is written to the repository.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.large import run_child_rusage
from benchmarks.prefix_trace import make_prefix_trace
from benchmarks.runs_bench import write_mooncake
from benchmarks.tui_bench import ROOT, tmux

FINISHED = "· finished: "  # the source line once the whole file is read (a replay at max speed shows all time already)
FOOTER = "q Quit"  # the first drawn screen


def app_replay(path: Path, timeout: float = 600.0) -> tuple[float, float]:
    """(seconds to the first drawn screen, seconds to the source finished) of kvset-top in tmux."""
    socket = f"kvset-bench-replay-{time.monotonic_ns()}"
    cmd = f"exec {sys.executable} -m kvset_tui --replay {path} --block-size 64 --speed max --no-mouse"
    t0 = time.monotonic()
    tmux(socket, "new-session", "-d", "-s", "top", "-x", "120", "-y", "40", "-c", str(ROOT), cmd)
    first = None
    try:
        while time.monotonic() - t0 < timeout:
            screen = tmux(socket, "capture-pane", "-p", "-t", "top", check=False)
            if first is None and FOOTER in screen:
                first = time.monotonic() - t0
            if FINISHED in screen:
                return first or 0.0, time.monotonic() - t0
            time.sleep(0.1)
        raise RuntimeError(f"{FINISHED!r} never appeared within {timeout:.0f} s")
    finally:
        tmux(socket, "send-keys", "-t", "top", "q", check=False)
        time.sleep(0.5)
        tmux(socket, "kill-server", check=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tui_replay", description=__doc__.splitlines()[0])
    p.add_argument("--accesses", type=int, default=20_000_000, help="prefix trace size (default 20,000,000)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    trace = make_prefix_trace(args.accesses)
    with tempfile.TemporaryDirectory(prefix="kvset-bench-tui-replay-") as tmp:
        gz = Path(tmp) / "prefix.jsonl.gz"
        write_mooncake(trace, gz)
        kvset, top = [sys.executable, "-m", "kvset"], [sys.executable, "-m", "kvset_tui"]
        commands = {
            "gzip -dc": ["gzip", "-dc", str(gz)],
            "kvset analyze": [*kvset, "analyze", str(gz), "--block-size", "64", "--json"],
            "kvset-top --once --replay": [*top, "--once", "--replay", str(gz), "--block-size", "64"],
        }
        times = {label: run_child_rusage(cmd, stdout_to_null=True)[0] for label, cmd in commands.items()}
        if shutil.which("tmux"):
            first, finished = app_replay(gz)
            times["kvset-top --replay --speed max: first screen"] = first
            times["kvset-top --replay --speed max: finished"] = finished
    print(f"{trace.accesses:,} prefix-chained accesses, {len(trace.request_starts):,} requests")
    for label, seconds in times.items():
        if label.endswith("first screen"):  # start-up: no accesses to rate it by
            print(f"  {label:<50} {seconds:7.2f} s")
            continue
        rate = trace.accesses / seconds / 1e6
        print(
            f"  {label:<50} {seconds:7.2f} s  {rate:6.1f} M accesses/s  {seconds / times['gzip -dc']:5.2f}x gzip"
        )
    if args.json:
        args.json.write_text(json.dumps({"accesses": trace.accesses, "seconds": times}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
