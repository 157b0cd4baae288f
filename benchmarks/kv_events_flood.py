"""A KV-event flood against a replay endpoint that never answers: does `kvset serve` keep counting?

A publisher on 127.0.0.1 sends 10,000-block batches at 100 messages/s and leaves out every second
one, so every batch that arrives reveals a gap; its replay (ROUTER) socket accepts connections and
never answers. `kvset serve --events ... --replay-endpoint ... --listen 127.0.0.1:0` runs in a
child process (its snapshots every --interval seconds); /metrics is scraped every --interval and the child's RSS and CPU time read from /proc.
Printed: the longest time kvset_accesses_total stood still while batches were arriving (and after
the publisher stopped, until every block delivered was counted or counted as shed:
kvset_batches_shed_total), and the longest at the start, in the run and at the end; the accesses
counted and shed against the blocks delivered, the largest RSS, the child's CPU seconds and the
machine's load.

    .venv/bin/python -m benchmarks.kv_events_flood [--seconds 40] [--rate 100] [--blocks 10000]
        [--replay-timeout 1] [--interval 0.25] [--no-gaps]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from pathlib import Path

import httpx
import msgspec
import zmq

from benchmarks.serve_child import start_serve
from benchmarks.tui_bench import cpu_seconds


def _rss_mb(pid: int) -> tuple[float, float]:
    """(RSS, its file-backed part: the shared libraries' pages, llvmlite's about 100 MB) in MB."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0, 0.0
    rss, file = (re.search(rf"{field}:\s+(\d+) kB", text) for field in ("VmRSS", "RssFile"))
    return (int(rss.group(1)) / 1024 if rss else 0.0, int(file.group(1)) / 1024 if file else 0.0)


def _scrape(url: str) -> tuple[float, float] | None:
    """(kvset_accesses_total, the batches shed: kvset_batches_shed_total), or None."""
    try:
        text = httpx.get(url, timeout=2.0).text
    except httpx.HTTPError:
        return None
    m = re.search(r"^kvset_accesses_total (\S+)$", text, re.M)
    shed = re.search(r"^kvset_batches_shed_total\{[^}]*\} (\S+)$", text, re.M)
    return (float(m.group(1)), float(shed.group(1)) if shed else 0.0) if m else None


def _stalls(
    samples: list[tuple[float, float, float, float]], blocks: int, delivered: int, seconds: float
) -> dict[str, list[float]]:
    """How long kvset_accesses_total stood still while some delivered block was neither counted nor
    shed, from the first scrape showing a value to the first showing another (or the last scrape),
    by where it ended: at the first count ("start"), after the publisher stopped ("end"), or between
    ("run")."""
    stalls: dict[str, list[float]] = {"start": [0.0], "run": [0.0], "end": [0.0]}
    since, last, waiting = 0.0, -1.0, False
    for t, acc, shed, _ in samples:
        if acc != last:
            if waiting:
                phase = "start" if last <= 0 else "end" if t > seconds else "run"
                stalls[phase].append(t - since)
            last, since = acc, t
        waiting = acc + shed * blocks < delivered  # standing still with accesses to count
    if waiting:
        stalls["end"].append(samples[-1][0] - since)
    return stalls


def flood_message(encoder: msgspec.msgpack.Encoder, tokens: msgspec.Raw, seq: int, blocks: int, ts: float):
    """Batch `seq` of the flood: one BlockStored of `blocks` new blocks (hashes never seen before)."""
    first = 1 + seq * blocks
    event = ["BlockStored", list(range(first, first + blocks)), None, tokens, 16, None, "GPU"]
    return [b"", seq.to_bytes(8, "big"), encoder.encode([ts, [event], 0])]


class Publisher:
    """vLLM's framing (topic, 8-byte sequence, msgpack payload), array-tagged BlockStored events."""

    def __init__(self, blocks: int) -> None:
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.SNDHWM, 100_000)
        self.pub_port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.router = self.ctx.socket(zmq.ROUTER)  # bound, connected to, never read: a dead replay
        self.replay_port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.blocks = blocks
        self.encoder = msgspec.msgpack.Encoder()
        self.tokens = msgspec.Raw(self.encoder.encode(list(range(16)) * blocks))  # encoded once
        self.seq = 0
        self.delivered_blocks = 0
        self.stamps: list[float] = []  # each delivered batch's time stamp (kvset's quiet wait reads them)

    def send(self, deliver: bool) -> None:
        if deliver:
            ts = time.time()
            self.pub.send_multipart(flood_message(self.encoder, self.tokens, self.seq, self.blocks, ts))
            self.stamps.append(ts)
            self.delivered_blocks += self.blocks
        self.seq += 1

    def close(self) -> None:
        self.pub.close(linger=0)
        self.router.close(linger=0)
        self.ctx.term()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=40.0, help="how long the publisher floods")
    ap.add_argument("--after", type=float, default=20.0, help="how long to watch after it stops")
    ap.add_argument(
        "--rate", type=float, default=100.0, help="messages per second (every second one left out)"
    )
    ap.add_argument("--blocks", type=int, default=10_000, help="blocks per batch")
    ap.add_argument(
        "--replay-timeout", type=float, default=1.0, help="kvset's stated wait for a replay (default 1 s)"
    )
    ap.add_argument(
        "--interval",
        type=float,
        default=0.25,
        help="kvset serve's snapshot interval and the scrapes' (default 0.25 s): a stall is known to about it",
    )
    ap.add_argument("--verbose", action="store_true", help="print every scrape and the end of stderr")
    ap.add_argument("--no-gaps", action="store_true", help="deliver every batch (the steady baseline)")
    args = ap.parse_args(argv)
    pub = Publisher(args.blocks)
    serve, url, log = start_serve(
        "--events",
        f"tcp://127.0.0.1:{pub.pub_port}",
        "--replay-endpoint",
        f"tcp://127.0.0.1:{pub.replay_port}",
        "--interval",
        f"{args.interval:g}",
        "--replay-timeout",
        f"{args.replay_timeout:g}",
    )
    time.sleep(1.0)  # the subscription reaches the publisher
    samples: list[tuple[float, float, float, float]] = []  # (t, accesses, batches shed, rss MB)
    file_mb = 0.0  # the file-backed part of the largest RSS
    stop_sending = threading.Event()

    def flood() -> None:
        t0 = time.monotonic()
        n = 0
        while not stop_sending.is_set() and time.monotonic() - t0 < args.seconds:
            pub.send(deliver=args.no_gaps or n % 2 == 0)
            n += 1
            time.sleep(max(0.0, t0 + n / args.rate - time.monotonic()))

    sender = threading.Thread(target=flood, daemon=True)
    start = time.monotonic()
    sender.start()
    try:
        while time.monotonic() - start < args.seconds + args.after:
            got = _scrape(url)
            acc, shed = got if got is not None else (-1.0, 0.0)
            rss, file = _rss_mb(serve.pid)
            if rss > max((r for _, _, _, r in samples), default=0.0):
                file_mb = file
            samples.append((time.monotonic() - start, acc, shed, rss))
            if not sender.is_alive() and acc + shed * args.blocks >= pub.delivered_blocks:
                break  # everything delivered is counted, or counted as shed
            time.sleep(args.interval)
    finally:
        stop_sending.set()
        sender.join()
        try:
            cpu = cpu_seconds(serve.pid)  # user + system, all its threads
        except (OSError, IndexError):  # it already ended
            cpu = 0.0
        serve.terminate()
        serve.wait(timeout=20)
        pub.close()
    stalls = _stalls(samples, args.blocks, pub.delivered_blocks, args.seconds)
    longest = max(max(seen) for seen in stalls.values())
    times = [t for t, _, _, _ in samples]
    spacing = [b - a for a, b in zip(times, times[1:], strict=False)] or [0.0]
    counted = max(a for _, a, _, _ in samples)
    shed = max(s for _, _, s, _ in samples)
    print(
        f"flood: {args.rate:g} msg/s x {args.blocks:,} blocks for {args.seconds:g} s, "
        + ("every batch delivered" if args.no_gaps else "every second batch left out")
        + ", replay endpoint silent"
    )
    print(
        f"  longest stall of kvset_accesses_total: {longest:.2f} s "
        f"(stated wait for a replay: {args.replay_timeout:g} s; scrapes every {min(spacing):.2f} "
        f"to {max(spacing):.2f} s, median {sorted(spacing)[len(spacing) // 2]:.2f} s)"
    )
    print(
        "  longest at the start, in the run, at the end: "
        + ", ".join(f"{max(stalls[phase]):.2f} s" for phase in ("start", "run", "end"))
        + " (from the first scrape showing a value to the first showing another)"
    )
    print(
        f"  accesses counted {counted:,.0f} of {pub.delivered_blocks:,} delivered; "
        f"{shed:,.0f} batches ({shed * args.blocks:,.0f} accesses) shed, counted"
    )
    print(
        f"  largest RSS of kvset serve: {max(r for _, _, _, r in samples):,.0f} MB "
        f"({file_mb:,.0f} MB of it file-backed: the shared libraries' pages)"
    )
    decoded = counted / args.blocks
    print(
        f"  CPU of kvset serve: {cpu:.1f} s in all"
        + (f", {1000 * cpu / decoded:.1f} ms a batch counted" if decoded else "")
        + " (start-up and imports included)"
    )
    last = pub.stamps[-513:]
    longest = sorted((b - a for a, b in zip(last, last[1:], strict=False)), reverse=True)[:16]
    print(
        f"  the publisher's 16 longest gaps between batches among its last 512: {sum(longest):.2f} s "
        f"together, the longest {1000 * max(longest, default=0.0):.0f} ms (kvset's quiet wait at the "
        "end, 0.25 to 1 s: its source's details state it)"
    )
    print("  load average during the run: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if args.verbose:
        for t, acc, shed, rss in samples:
            print(f"  {t:6.2f} s  {acc:12,.0f} accesses  {shed:6,.0f} shed  {rss:7,.0f} MB")
        print("".join(log[-20:]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
