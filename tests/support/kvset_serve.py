"""The real `kvset serve` in a child process, its /metrics scraped over loopback, and the sockets a
process listens on (from /proc/net)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.paths import ROOT

Samples = dict[tuple[str, frozenset], float]  # (sample name, its labels) -> value


def parse_exposition(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def series(samples: Samples, name: str) -> list[tuple[dict, float]]:
    return [(dict(labels), v) for (n, labels), v in samples.items() if n == name]


class KvsetServe:
    """`kvset serve ARGS` as a child process; `url` is read from its stderr ("metrics on URL")."""

    def __init__(self, *argv: str | bytes, wait_for_url: bool = True) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kvset", "serve", *argv],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.stderr_lines: list[str] = []
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        self.url: str | None = None
        if wait_for_url:
            self.url = self.wait_for_stderr(r"metrics on (http://\S+)").group(1)

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line.decode(errors="replace"))

    def wait_for_stderr(self, pattern: str, timeout: float = 60.0) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.stderr_lines:
                if m := re.search(pattern, line):
                    return m
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"kvset serve never printed {pattern!r}: {''.join(self.stderr_lines)}")

    def scrape(self, **headers: str) -> Samples:
        assert self.url is not None
        return parse_exposition(httpx.get(self.url, timeout=5.0, headers=headers).text)

    def scrape_until(self, done, timeout: float = 60.0, every: float = 0.1) -> list[Samples]:
        """Scrape until done(samples) holds; every scrape, oldest first."""
        scrapes: list[Samples] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            scrapes.append(self.scrape())
            if done(scrapes[-1]):
                return scrapes
            time.sleep(every)
        raise AssertionError(f"not done after {timeout} s; last scrape: {scrapes[-1] if scrapes else None}")

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def __enter__(self) -> KvsetServe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def analyze_json(*argv: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "kvset", "analyze", "--json", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


# -- sockets ---------------------------------------------------------------------------------------
def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _address(hex_address: str) -> tuple[str, int]:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = ".".join(str(b) for b in raw[::-1])
    else:  # /proc/net/tcp6: four little-endian 32-bit words
        words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
        ip = ":".join(b"".join(words)[i : i + 2].hex() for i in range(0, 16, 2))
    return ip, int(port, 16)


def listening_sockets(pid: int) -> list[tuple[str, str, int]]:
    """(protocol, address, port) of every TCP socket in LISTEN state and every bound UDP socket the
    process holds."""
    mine = _socket_inodes(pid)
    found = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        table = Path(f"/proc/net/{proto}")
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if inode not in mine:
                continue
            if proto.startswith("tcp") and state != "0A":  # 0A: LISTEN; the rest are connections
                continue
            found.append((proto, *_address(local)))
    return sorted(found)
