"""kvset-top in a real terminal (a tmux pane): CPU use and key-press latency.

Run: .venv/bin/python benchmarks/tui_bench.py [--seconds 10] [--speed 80] [--presses 20] [--json]

Scenarios, each a fresh `kvset-top --demo` in a 120x40 tmux pane:
  idle-paused  the demo at its live rate (speed 1), display paused with p: the app's idle cost
  live         the demo at its live rate, display running (one frame a second)
  load         the demo at --speed (default 80: about 1M block accesses/s on this machine), display running
CPU is read from /proc over the measurement window after a warm-up, for the whole process and for its
main thread alone (Textual's UI loop; ingestion and analysis run in other threads). Key latency is the
wall time from `tmux send-keys w` to the window label changing on the captured screen (polled every
2 ms, so it includes tmux's own delivery and capture). Needs tmux; nothing is written to the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
WINDOW_RX = re.compile(r"window (1m|5m|1h|all) ·")
RATE_RX = re.compile(r"([\d.,]+)([kMG]?) acc/s")


def tmux(socket: str, *args: str, check: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        ["tmux", "-L", socket, *args], capture_output=True, text=True, timeout=10, check=check, env=env
    ).stdout


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def parse_rate(screen: str) -> float | None:
    m = RATE_RX.search(screen)
    if not m:
        return None
    scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]
    return float(m.group(1).replace(",", "")) * scale


class Pane:
    def __init__(self, speed: str, name: str) -> None:
        self.started = time.monotonic()
        self.socket = f"kvset-bench-{os.getpid()}-{name}"
        cmd = f"exec {sys.executable} -m kvset_tui --demo --speed {speed} --no-mouse"
        tmux(self.socket, "new-session", "-d", "-s", "top", "-x", "120", "-y", "40", "-c", str(ROOT), cmd)
        self.pid = int(tmux(self.socket, "display-message", "-p", "-t", "top", "#{pane_pid}").strip())

    def screen(self) -> str:
        return tmux(self.socket, "capture-pane", "-p", "-t", "top")

    def keys(self, *keys: str) -> None:
        tmux(self.socket, "send-keys", "-t", "top", *keys)

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise RuntimeError(f"{text!r} never appeared:\n{self.screen()}")

    def cpu(self, seconds: float) -> tuple[float, float]:
        """(process, main thread) CPU over `seconds`, in % of one core."""
        p0, m0, t0 = cpu_seconds(self.pid), cpu_seconds(self.pid, self.pid), time.monotonic()
        time.sleep(seconds)
        p1, m1, t1 = cpu_seconds(self.pid), cpu_seconds(self.pid, self.pid), time.monotonic()
        return 100 * (p1 - p0) / (t1 - t0), 100 * (m1 - m0) / (t1 - t0)

    def key_latency(self, presses: int) -> list[float]:
        """Milliseconds from send-keys w to the status line showing the next window."""
        out = []
        for _ in range(presses):
            before = WINDOW_RX.search(self.screen())
            assert before is not None, "no window label on screen"
            t0 = time.monotonic()
            self.keys("w")
            while True:
                now = WINDOW_RX.search(self.screen())
                if now is not None and now.group(1) != before.group(1):
                    break
                if time.monotonic() - t0 > 5:
                    raise RuntimeError("the window label did not change within 5 s")
                time.sleep(0.002)
            out.append(1000 * (time.monotonic() - t0))
            time.sleep(0.15)  # let the frame settle; presses are not a burst
        return out

    def close(self) -> None:
        self.keys("q")
        time.sleep(0.5)
        tmux(self.socket, "kill-server", check=False)


def scenario(name: str, speed: str, paused: bool, seconds: float, presses: int, warmup: float) -> dict:
    pane = Pane(speed, name)
    try:
        pane.wait_for("? Help")  # the UI is up
        ui_up = time.monotonic() - pane.started
        pane.wait_for("near misses")  # the first analysed frame is on screen
        first_frame = time.monotonic() - pane.started
        time.sleep(warmup)
        if paused:
            pane.keys("p")
            pane.wait_for("PAUSED")
        process, ui = pane.cpu(seconds)
        rate = parse_rate(pane.screen())
        latency = pane.key_latency(presses) if presses else []
    finally:
        pane.close()
    result = {
        "scenario": name,
        "speed": speed,
        "paused": paused,
        "seconds": seconds,
        "startup_ui_s": round(ui_up, 2),
        "startup_first_frame_s": round(first_frame, 2),
        "ingest_accesses_per_s": rate,
        "cpu_process_pct": round(process, 1),
        "cpu_ui_thread_pct": round(ui, 1),
    }
    if latency:
        result |= {
            "key_latency_ms_median": round(statistics.median(latency), 1),
            "key_latency_ms_max": round(max(latency), 1),
            "presses": len(latency),
        }
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="CPU measurement window per scenario")
    ap.add_argument(
        "--warmup", type=float, default=5.0, help="seconds after the first frame before measuring"
    )
    ap.add_argument(
        "--speed", default="80", help="demo speed for the load scenario (default 80: ~1M acc/s here)"
    )
    ap.add_argument("--presses", type=int, default=20, help="key presses per scenario for the latency")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument(
        "--scenarios",
        default="idle-paused,live,load",
        help="comma-separated, of idle-paused, live, load (default: all three)",
    )
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is needed for this benchmark", file=sys.stderr)
        return 2
    plans = {"idle-paused": ("1", True), "live": ("1", False), "load": (args.speed, False)}
    chosen = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in plans]
    if unknown or not chosen:
        ap.error(f"--scenarios: {', '.join(unknown) or 'none given'}; choose from {', '.join(plans)}")
    results = [scenario(name, *plans[name], args.seconds, args.presses, args.warmup) for name in chosen]
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(
        f"{'scenario':<12} {'ingest acc/s':>13} {'CPU process':>12} {'CPU UI thread':>14} "
        f"{'key ms (median/max)':>20} {'start s (UI/frame)':>19}"
    )
    for r in results:
        rate = f"{r['ingest_accesses_per_s']:,.0f}" if r["ingest_accesses_per_s"] else "?"
        keys = f"{r.get('key_latency_ms_median', '-')}/{r.get('key_latency_ms_max', '-')}"
        start = f"{r['startup_ui_s']}/{r['startup_first_frame_s']}"
        print(
            f"{r['scenario']:<12} {rate:>13} {r['cpu_process_pct']:>11.1f}% {r['cpu_ui_thread_pct']:>13.1f}% "
            f"{keys:>20} {start:>19}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
