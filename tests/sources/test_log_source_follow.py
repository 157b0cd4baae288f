"""LogSource following a live vLLM log: partial writes, rotation, copytruncate, a late file."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np

from kvset.formats.vllm_hash import block_keys
from kvset.sources.log import LogSource
from tests.support import paths

FIXTURES = paths.FIXTURES / "logs"
LINES = (FIXTURES / "vllm_0_13_debug.log").read_text().splitlines(keepends=True)
REQUESTS = json.loads((FIXTURES / "expected.json").read_text())["vllm_0_13_debug"]["requests"]


def request_lines() -> list[str]:
    return [
        ln for ln in LINES if " details: prompt: " in ln and "chatcmpl-" in ln and "interleaved" not in ln
    ]


def collect(src: LogSource, want_keys: int, timeout: float = 8.0):
    """Iterate the source in this thread until want_keys accesses arrived (or time is up)."""
    stop = threading.Event()
    keys, events, healths = [], [], []
    deadline = time.monotonic() + timeout
    for u in src.updates(stop):
        if u.accesses is not None:
            keys.append(u.accesses.keys)
        events += list(u.events)
        healths.append(u.health)
        if sum(len(k) for k in keys) >= want_keys or time.monotonic() > deadline:
            stop.set()
    src.close()
    return (np.concatenate(keys) if keys else np.zeros(0, np.uint64)), events, healths


def test_follow_across_partial_writes_rotation_and_copytruncate(tmp_path: Path) -> None:
    path = tmp_path / "vllm.log"
    reqs = request_lines()
    assert len(reqs) == len(REQUESTS)
    want = np.concatenate([block_keys(r["token_ids"]) for r in REQUESTS])

    def writer() -> None:
        time.sleep(0.3)  # the file appears after the source started
        with open(path, "w") as f:
            for ln in reqs[:3]:
                half = len(ln) // 2
                f.write(ln[:half])  # a writer caught mid-line
                f.flush()
                time.sleep(0.05)
                f.write(ln[half:])
                f.flush()
        time.sleep(0.4)
        os.rename(path, tmp_path / "vllm.log.1")  # logrotate: rename and create
        with open(path, "w") as f:
            f.writelines(reqs[3:5])
        time.sleep(0.4)
        with open(path, "r+") as f:  # logrotate copytruncate
            f.truncate(0)
        time.sleep(0.3)
        with open(path, "a") as f:
            f.writelines(reqs[5:])

    t = threading.Thread(target=writer)
    t.start()
    keys, events, healths = collect(LogSource(path, follow=True), len(want))
    t.join()
    assert np.array_equal(keys, want)
    kinds = [e.kind for e in events]
    assert kinds == ["log-appeared", "log-rotated", "log-truncated"]
    assert healths[0].state == "waiting for file" and not healths[0].connected
    assert healths[-1].connected and healths[-1].state == "following"
    assert dict(healths[-1].details)["rotations"] == "1"
    assert healths[-1].rejected == ()


def test_idle_follow_reports_health_every_tick(tmp_path: Path) -> None:
    path = tmp_path / "vllm.log"
    path.write_text("")
    src = LogSource(path, follow=True)
    stop = threading.Event()
    stamps = []
    for u in src.updates(stop):
        stamps.append(time.monotonic())
        assert u.health is not None and u.accesses is None
        if len(stamps) >= 4:
            stop.set()
    src.close()
    gaps = np.diff(stamps)
    assert gaps.max() < 0.6  # IDLE_TICK is 0.25 s
