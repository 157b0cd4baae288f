"""End to end: `kvset-top --serve-metrics PORT` in a real terminal (a tmux pane) serves the replay's
metrics on 127.0.0.1 only while the app runs, and stops listening when it quits."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.kvset_serve import listening_sockets, parse_exposition, sample
from tests.support.paths import MOONCAKE_TRACE, ROOT

TMUX = shutil.which("tmux")

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


def _tmux(server: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [TMUX, "-L", server, *args], capture_output=True, text=True, timeout=10, check=True, env=env
    ).stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kvset_top_serves_metrics_beside_the_app_and_stops_with_it():
    server, port = f"kvset-serve-{os.getpid()}", _free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    command = (
        f"exec {sys.executable} -m kvset_tui --replay {MOONCAKE_TRACE} --speed max --no-mouse "
        f"--serve-metrics {port} --capacities 1000"
    )
    _tmux(server, "new-session", "-d", "-s", "top", "-x", "120", "-y", "40", "-c", str(ROOT), command)
    try:
        pid = int(_tmux(server, "display-message", "-p", "-t", "top", "#{pane_pid}").strip())
        deadline, accesses = time.monotonic() + 60, None
        while time.monotonic() < deadline and accesses != 121_877:
            try:
                s = parse_exposition(httpx.get(url, timeout=2).text)
                accesses = sample(s, "kvset_accesses_total")
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        assert accesses == 121_877, _tmux(server, "capture-pane", "-p", "-t", "top")
        assert sample(s, "kvset_hit_rate", capacity_blocks="1000", unit="blocks", window="all") is not None
        assert listening_sockets(pid) == [("tcp", "127.0.0.1", port)]
        _tmux(server, "send-keys", "-t", "top", "q")
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists(), "kvset-top did not exit on q"
        with pytest.raises(httpx.ConnectError):
            httpx.get(url, timeout=2)
    finally:
        subprocess.run([TMUX, "-L", server, "kill-server"], capture_output=True, timeout=10, check=False)
