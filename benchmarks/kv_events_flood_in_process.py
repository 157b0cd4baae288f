"""The dead-replay flood without sockets or threads: when would the figures move, and at what CPU?

The flood of benchmarks.kv_events_flood (10,000-block batches at 100 messages/s, every second one
left out, a replay endpoint that never answers) fed to kvset's KvEventTracker in-process, in steps
of 0.01 s on a clock of its own: each delivered batch at its arrival time, the replay deadlines
kept (`tick`), an update taken every step. Printed: the longest time the accesses handed out stood
still at the start, in the run and at the end (the logic's own waits: the replay waits, the engine
model's delay line, the quiet second; no CPU counted), and the tracker's CPU per delivered batch
(process time, with and without the gaps: every batch delivered, no replay endpoint).

    .venv/bin/python -m benchmarks.kv_events_flood_in_process [--seconds 12] [--cpu-batches 400]
"""

from __future__ import annotations

import argparse
import sys
import time

import msgspec

from benchmarks.kv_events_flood import flood_message
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.rejects import RejectCounter
from kvset.sources.kv_event_warm_up import load_compiled_code

BLOCKS, RATE = 10_000, 100
STEP = 1 / RATE  # one message a step


def _messages(encoder: msgspec.msgpack.Encoder, seqs: range) -> list[list[bytes]]:
    tokens = msgspec.Raw(encoder.encode(list(range(16)) * BLOCKS))
    return [flood_message(encoder, tokens, seq, BLOCKS, 1000.0 + seq / RATE) for seq in seqs]


def stalls(seconds: float) -> tuple[dict[str, float], int, int, float]:
    """The longest stand-still of the accesses handed out by phase, the accesses, the delivered blocks,
    and the quiet wait at the end (the tracker's)."""
    encoder = msgspec.msgpack.Encoder()
    tracker = KvEventTracker(["flood"], ["tcp://127.0.0.1:1"], RejectCounter())  # never answers
    longest = {"start": 0.0, "run": 0.0, "end": 0.0}
    counted = delivered = 0
    last_change = 0.0
    quiet = tracker.quiet_seconds
    for step in range(int((seconds + 5) / STEP)):
        now = step * STEP
        # batch `step` is sent now (a step is one message at RATE); every second one is left out
        if now < seconds and step % 2 == 0:
            tracker.published(0, _messages(encoder, range(step, step + 1))[0], now, 1000 + now)
            delivered += BLOCKS
        tracker.tick(now, 1000 + now)
        if now < seconds:
            quiet = tracker.quiet_wait(tracker.publishers[0])
        update = tracker.take(1000 + now)
        if update.accesses is not None and len(update.accesses.keys):
            phase = "start" if counted == 0 else "end" if now > seconds else "run"
            longest[phase] = max(longest[phase], now - last_change)
            counted, last_change = counted + len(update.accesses.keys), now
        if now > seconds and counted >= delivered:
            break
    return longest, counted, delivered, quiet


def cpu_per_batch(batches: int, gaps: bool) -> float:
    """The tracker's CPU (process time) per delivered batch, in ms, after 100 batches of warm-up."""
    encoder = msgspec.msgpack.Encoder()
    messages = _messages(encoder, range(0, 2 * (batches + 100), 2 if gaps else 1))[: batches + 100]
    tracker = KvEventTracker(["flood"], [None], RejectCounter())
    for i, message in enumerate(messages[:100]):
        tracker.published(0, message, i / RATE, 1000 + i / RATE)
        tracker.take(1000 + i / RATE)
    start = time.process_time()
    for i, message in enumerate(messages[100:], start=100):
        tracker.published(0, message, i / RATE, 1000 + i / RATE)
        tracker.take(1000 + i / RATE)
    return 1000 * (time.process_time() - start) / batches


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=12.0, help="how long the publisher floods")
    ap.add_argument("--cpu-batches", type=int, default=400, help="batches timed for the CPU figure")
    args = ap.parse_args(argv)
    load_compiled_code()
    longest, counted, delivered, quiet = stalls(args.seconds)
    print(
        "longest stand-still at the start, in the run, at the end (no CPU counted): "
        + ", ".join(f"{longest[phase]:.2f} s" for phase in ("start", "run", "end"))
        + f"; {counted:,} of {delivered:,} accesses counted; the quiet wait {quiet:.2f} s"
    )
    with_gaps, without = cpu_per_batch(args.cpu_batches, True), cpu_per_batch(args.cpu_batches, False)
    print(f"tracker CPU a delivered batch: {with_gaps:.1f} ms, every batch delivered {without:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
