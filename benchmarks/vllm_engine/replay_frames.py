"""Play a recorded engine run back to kvset-top without vLLM: its KV events and its /metrics.

    python replay_frames.py out/events-p2000-full.zmqframes.gz --metrics out/metrics-p2000-full.jsonl.gz \\
        --events-port 5557 --replay-port 5558 --metrics-port 8000 --subscribers 1 --hold 30
    kvset-top --events tcp://127.0.0.1:5557 --replay-endpoint tcp://127.0.0.1:5558 \\
        --metrics http://127.0.0.1:8000/metrics --once --json --duration 60

Publishes the recorded frames byte for byte on a PUB socket on 127.0.0.1 (vLLM's framing: topic,
8-byte sequence number, msgpack payload), at the recorded pace (--speed 1), N times faster, or as
fast as it can (--speed max); answers replay requests on a ROUTER as vLLM's ZmqEventPublisher does
(`["", start_seq]` -> one `["", topic, seq, payload]` per buffered batch from start_seq on, then
`["", "", 0xff x 8, ""]`; the last 10,000 batches, vLLM's default buffer). With --metrics it
serves, on 127.0.0.1, the engine's /metrics as scraped during the run, each scrape from the moment
it was taken on the replayed clock. Needs pyzmq (kvset's venv has it) and the standard library.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import frames as framesfile  # noqa: E402

END_SEQ = b"\xff" * 8
BUFFER_STEPS = 10_000
HWM = 100_000


class MetricsFeed:
    """The scrape to serve at recorded time t: the last one taken at or before t."""

    def __init__(self, path: Path):
        self.times: list[float] = []
        self.texts: list[str] = []
        with gzip.open(path, "rt") as f:
            for line in f:
                rec = json.loads(line)
                self.times.append(rec["t"])
                self.texts.append(rec["text"])
        self.now = self.times[0] if self.times else 0.0

    def current(self) -> str:
        i = bisect.bisect_right(self.times, self.now) - 1
        return self.texts[max(i, 0)] if self.texts else ""


def serve_metrics(feed: MetricsFeed, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = feed.current().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True, name="metrics").start()
    return httpd


def wait_for_subscribers(zmq, pub, mon, n: int, timeout: float) -> int:
    """Count the handshakes `mon` saw; it is attached before "ready" (see engine_driver.py)."""
    from zmq.utils.monitor import recv_monitor_message

    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while seen < n and time.monotonic() < deadline:
            if mon.poll(100) and recv_monitor_message(mon)["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                seen += 1
    finally:
        pub.disable_monitor()
        mon.close(linger=0)
    time.sleep(0.5)
    return seen


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", type=Path, help="a .zmqframes.gz recording")
    p.add_argument("--events-port", type=int, required=True)
    p.add_argument("--replay-port", type=int, default=0)
    p.add_argument("--metrics", type=Path, help="the run's metrics-*.jsonl.gz")
    p.add_argument("--metrics-port", type=int, default=0)
    p.add_argument("--speed", default="1", help="1 = as recorded, N = N times faster, max (default 1)")
    p.add_argument("--subscribers", type=int, default=0, help="wait for this many subscribers first")
    p.add_argument("--subscriber-timeout", type=float, default=60.0)
    p.add_argument("--hold", type=float, default=0.0, help="keep /metrics up this long after the end")
    p.add_argument("--hold-stdin", action="store_true", help="keep /metrics up until stdin has a line")
    args = p.parse_args(argv)

    import zmq

    speed = None if args.speed == "max" else float(args.speed)
    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    pub.set_hwm(HWM)
    pub.bind(f"tcp://127.0.0.1:{args.events_port}")
    router = None
    if args.replay_port:
        router = ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.SNDHWM, 2 * (BUFFER_STEPS + 1))
        router.bind(f"tcp://127.0.0.1:{args.replay_port}")
    feed = httpd = None
    if args.metrics:
        feed = MetricsFeed(args.metrics)
        if args.metrics_port:
            httpd = serve_metrics(feed, args.metrics_port)
    mon = pub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED) if args.subscribers else None
    print(json.dumps({"ready": True}), flush=True)
    if mon is not None:
        got = wait_for_subscribers(zmq, pub, mon, args.subscribers, args.subscriber_timeout)
        print(json.dumps({"subscribed": got}), flush=True)

    buffer: deque[tuple[int, bytes, bytes]] = deque(maxlen=BUFFER_STEPS)

    def service_replay():
        while router is not None and router.poll(0):
            msg = router.recv_multipart()
            if len(msg) != 3:
                continue
            client, _, start = msg
            start_seq = int.from_bytes(start, "big")
            for seq, topic, payload in buffer:
                if seq >= start_seq:
                    router.send_multipart((client, b"", topic, seq.to_bytes(8, "big"), payload))
            router.send_multipart((client, b"", b"", END_SEQ, b""))

    sent = 0
    t_rec0 = t_wall0 = None
    for t_rec, fr in framesfile.read(args.file):
        if t_rec0 is None:
            t_rec0, t_wall0 = t_rec, time.monotonic()
        if speed:
            due = t_wall0 + (t_rec - t_rec0) / speed
            while True:
                service_replay()
                delay = due - time.monotonic()
                if delay <= 0:
                    break
                time.sleep(min(delay, 0.01))
        else:
            service_replay()
        if feed is not None:
            feed.now = t_rec
        pub.send_multipart(fr)
        if len(fr) == 3:
            buffer.append((int.from_bytes(fr[1], "big"), fr[0], fr[2]))
        sent += 1
    if feed is not None and feed.times:
        feed.now = feed.times[-1]
    print(json.dumps({"done": {"messages": sent}}), flush=True)
    deadline = time.monotonic() + args.hold
    stdin_line = threading.Event()
    if args.hold_stdin:
        threading.Thread(target=lambda: (sys.stdin.readline(), stdin_line.set()), daemon=True).start()
    while (args.hold_stdin and not stdin_line.is_set()) or time.monotonic() < deadline:
        service_replay()
        time.sleep(0.02)
    if httpd is not None:
        httpd.shutdown()
    pub.close(linger=1000)
    if router is not None:
        router.close(linger=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
