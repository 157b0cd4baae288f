"""Two KV-event questions under a flood (issue 20, items 23 and 26), in one process per run:

- ranks: rank 0 floods as fast as its socket takes it, rank 1 sends a small batch every 10 ms; how
  many of rank 1's batches kvset decodes, and how late (decode time minus the batch's timestamp);
- memory: one rank publishes faster than kvset decodes (--rate messages/s); the largest growth of
  this process's RSS over the run, the backlog kvset holds, and the messages it dropped.

The publishers run in child processes (their sends must not wait for kvset's GIL); kvset's
KvEventsSource runs here, its updates taken and thrown away (no analyzer: the source is measured).
Each batch stores its blocks and removes them again, and the blocks come back every 4th batch, so the
tracker's own state (a few thousand distinct blocks) stays small and the
RSS is the backlog (the tracker's memory of removed blocks is set to 10,000). `--backlog-mib 0` runs without a bound (what ZMQ piles up, up to RCVHWM).

    .venv/bin/python -m benchmarks.kv_events_ranks [--seconds 10] [--rate 2000] [--blocks 500]
"""

from __future__ import annotations

import argparse
import inspect
import multiprocessing
import re
import threading
import time
from pathlib import Path

import msgspec
import zmq

from kvset.sources.kv_events import KvEventsSource


def _rss_mib() -> float:
    m = re.search(r"VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text())
    return int(m.group(1)) / 1024 if m else 0.0


def _publish(port_out, rank: int, blocks: int, rate: float, seconds: float, start) -> None:
    """vLLM's framing and map-shaped events: store `blocks` blocks and remove them, `rate` per second."""
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, 100_000)
    port_out.put(pub.bind_to_random_port("tcp://127.0.0.1"))
    encoder = msgspec.msgpack.Encoder()
    tokens = list(range(16)) * blocks
    start.wait()
    time.sleep(0.5)  # the subscription arrives
    seq, t0 = 0, time.monotonic()
    base = (rank + 1) << 40
    while time.monotonic() - t0 < seconds:
        hashes = list(range(base + (seq % 4) * blocks, base + (seq % 4 + 1) * blocks))
        stored = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": None}
        stored |= {"token_ids": tokens, "block_size": 16, "lora_id": None, "medium": "GPU"}
        removed = {"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU"}
        payload = encoder.encode([time.time(), [stored, removed], rank])
        pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])
        seq += 1
        due = t0 + seq / rate if rate else 0.0
        while time.monotonic() < due:
            time.sleep(max(0.0, min(0.001, due - time.monotonic())))
    port_out.put(seq)
    time.sleep(1.0)
    pub.close(linger=0)
    ctx.term()


def _run(ranks: list[tuple[int, float]], seconds: float, backlog_mib: float) -> dict:
    """ranks: (blocks, rate) per rank (rate 0: as fast as it goes). Reads for seconds + 2."""
    start = multiprocessing.Event()
    ports, procs = [], []
    for rank, (blocks, rate) in enumerate(ranks):
        out = multiprocessing.Queue()
        proc = multiprocessing.Process(target=_publish, args=(out, rank, blocks, rate, seconds, start))
        proc.start()
        ports.append(out.get())
        procs.append((proc, out))
    kwargs: dict = {"removed_memory": 10_000}  # the tracker's memory of removed blocks: kept small
    if "backlog_bytes" in inspect.signature(KvEventsSource).parameters:  # absent before the bound
        kwargs["backlog_bytes"] = int(backlog_mib * 2**20) if backlog_mib else 1 << 50
    src = KvEventsSource([f"tcp://127.0.0.1:{p}" for p in ports], **kwargs)
    stop = threading.Event()
    gen = src.updates(stop)
    next(gen)
    rss0 = peak = _rss_mib()
    start.set()
    t0 = time.monotonic()
    for update in gen:
        peak = max(peak, _rss_mib())
        del update
        if time.monotonic() - t0 > seconds + 2:
            break
    health = src.health()
    stop.set()
    list(gen)
    sent = [out.get() for _, out in procs]
    for proc, _ in procs:
        proc.join()
    streams = src._streams
    return {
        "sent": sent,
        "decoded": [p.batches for p in src.tracker.publishers],
        "dropped": [getattr(s, "dropped", 0) for s in streams],
        "peak_backlog_mib": [getattr(s, "peak_queued_bytes", 0) / 2**20 for s in streams],
        "rss_growth_mib": peak - rss0,
        "unread": src.unread_at_stop,
        "lost": [p.sequence.lost for p in src.tracker.publishers],
        "backlog": dict(health.details).get("backlog", ""),
    }


def _isolated(ranks: list[tuple[int, float]], seconds: float, backlog_mib: float) -> dict:
    """_run in a fresh process: an earlier run's freed memory must not hide this one's RSS."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_child, args=(out, ranks, seconds, backlog_mib))
    proc.start()
    result = out.get()
    proc.join()
    return result


def _child(out, ranks, seconds, backlog_mib) -> None:
    out.put(_run(ranks, seconds, backlog_mib))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=2000.0, help="the flood's messages/s (memory run)")
    parser.add_argument("--blocks", type=int, default=500, help="blocks per flood batch")
    parser.add_argument("--backlog-mib", type=float, default=64.0, help="kvset's bound (0: none)")
    args = parser.parse_args()
    fair = _isolated([(args.blocks, 0.0), (4, 100.0)], args.seconds, args.backlog_mib)
    print(
        f"ranks: rank 1 (100 batches/s of 4 blocks): {fair['decoded'][1]:,} of {fair['sent'][1]:,} decoded; "
        f"rank 0 (flooding, {args.blocks} blocks a batch): {fair['decoded'][0]:,} of {fair['sent'][0]:,} "
        f"decoded, {fair['dropped'][0]:,} dropped"
    )
    print(f"ranks: backlog at the end: {fair['backlog'] or '-'}")
    memory = _isolated([(args.blocks, args.rate)], args.seconds, args.backlog_mib)
    print(
        f"memory: {memory['sent'][0]:,} messages sent at {args.rate:g}/s, {memory['decoded'][0]:,} decoded, "
        f"{memory['dropped'][0]:,} dropped, {memory['unread']:,} unread at stop, "
        f"{memory['lost'][0]:,} counted lost in sequence gaps; peak backlog {memory['peak_backlog_mib'][0]:.1f} MiB; "
        f"RSS growth {memory['rss_growth_mib']:.0f} MiB (bound {args.backlog_mib:g} MiB, 0 = none)"
    )


if __name__ == "__main__":
    main()
