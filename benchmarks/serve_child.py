"""`kvset serve` in a child process for the benchmarks that scrape it."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start_serve(*args: str) -> tuple[subprocess.Popen, str, list[str]]:
    """`kvset serve ARGS --listen 127.0.0.1:0` started; (the process, its /metrics URL as it prints it,
    the rest of its stderr as it comes: drained so that it never blocks on a full pipe, and kept)."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "kvset", "serve", *args, "--listen", "127.0.0.1:0"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert serve.stderr is not None
    stderr = serve.stderr
    url = None
    while url is None:
        line = stderr.readline()
        if not line:
            raise SystemExit(f"kvset serve exited: {serve.wait()}")
        if m := re.search(r"metrics on (http://\S+)", line):
            url = m.group(1)
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(stderr), daemon=True).start()
    return serve, url, log
