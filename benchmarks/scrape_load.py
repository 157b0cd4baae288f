"""Parallel scrapers against `kvset serve`: is every scrape answered, and how fast?

`kvset serve --demo --listen 127.0.0.1:0` runs in a child process. Once its /metrics carries the
demo's figures, --scrapers clients (threads spread over --processes client processes, so the
clients' own interpreter lock does not time the server) each scrape /metrics back to back, a new
connection each time as Prometheus does after an error, for --seconds. --idle connections that
never send a byte are held open meanwhile (reopened as the server closes them), as a client that
connects and waits would. Printed: the scrapes, how many were not a 200 (a 503 or a failed
connection is a failed scrape), the latency's median, 99th percentile and maximum, and how many
took over a second.

    .venv/bin/python -m benchmarks.scrape_load [--scrapers 50] [--seconds 60] [--idle 0]
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import socket
import threading
import time
from urllib.parse import urlsplit

from benchmarks.serve_child import start_serve


def _scrape(host: str, port: int) -> tuple[float, int, int]:
    """(seconds, status, body bytes) of one scrape; status 0: the connection failed."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=30.0)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        body = response.read()
        return time.perf_counter() - started, response.status, len(body)
    except OSError:
        return time.perf_counter() - started, 0, 0
    finally:
        conn.close()


def _client(host: str, port: int, threads: int, until: float, out: multiprocessing.Queue) -> None:
    """One client process: `threads` scrapers back to back until `until` (wall time)."""
    results: list[tuple[float, int, int]] = []
    lock = threading.Lock()

    def loop() -> None:
        mine = []
        while time.time() < until:
            mine.append(_scrape(host, port))
        with lock:
            results.extend(mine)

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put(results)


def _hold_idle(host: str, port: int, n: int, stop: threading.Event) -> None:
    """Keep `n` connections open that send nothing, reopening each the server closes."""
    held: list[socket.socket] = []
    while not stop.is_set():
        while len(held) < n:
            try:
                held.append(socket.create_connection((host, port), timeout=5.0))
            except OSError:
                break
        for s in list(held):
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    held.remove(s)
                    s.close()
            except BlockingIOError:
                pass
            except OSError:
                held.remove(s)
                s.close()
        stop.wait(0.05)
    for s in held:
        s.close()


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scrapers", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--processes", type=int, default=5, help="client processes the scrapers are spread over")
    ap.add_argument("--idle", type=int, default=0, help="idle connections held open meanwhile")
    args = ap.parse_args(argv)
    serve, url, _ = start_serve("--demo")
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    try:
        while _scrape(host, port)[2] == 0:  # until the first snapshot is published
            time.sleep(0.5)
        stop_idle = threading.Event()
        idle = threading.Thread(target=_hold_idle, args=(host, port, args.idle, stop_idle), daemon=True)
        if args.idle:
            idle.start()
            time.sleep(1.0)
        until = time.time() + args.seconds
        out: multiprocessing.Queue = multiprocessing.Queue()
        per = [
            args.scrapers // args.processes + (i < args.scrapers % args.processes)
            for i in range(args.processes)
        ]
        clients = [
            multiprocessing.Process(target=_client, args=(host, port, n, until, out)) for n in per if n
        ]
        for c in clients:
            c.start()
        results: list[tuple[float, int, int]] = []
        for _ in clients:
            results.extend(out.get())
        for c in clients:
            c.join()
        stop_idle.set()
    finally:
        serve.terminate()
        serve.wait(10.0)
    latencies = sorted(r[0] for r in results)
    failed = sum(1 for r in results if r[1] != 200)
    slow = sum(1 for t in latencies if t > 1.0)
    bodies = [r[2] for r in results if r[1] == 200]
    print(
        f"{args.scrapers} scrapers for {args.seconds:g} s ({args.idle} idle connections held): "
        f"{len(results):,} scrapes, {failed} not answered 200, body {max(bodies, default=0):,} bytes"
    )
    print(
        f"latency: median {_percentile(latencies, 0.5) * 1000:.0f} ms, 99th percentile "
        f"{_percentile(latencies, 0.99) * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms; "
        f"{slow} over 1 s"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    return 1 if failed or slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
