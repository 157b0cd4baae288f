"""LogSource following a live vLLM log: partial writes, rotation, copytruncate, a late file."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from kvset.formats.vllm_hash import block_keys
from kvset.sources.base import IDLE_TICK
from kvset.sources.log import LogSource
from tests.support import paths
from tests.support.fake_clock import FakeClock

FIXTURES = paths.FIXTURES / "logs"
LINES = (FIXTURES / "vllm_0_13_debug.log").read_text().splitlines(keepends=True)
REQUESTS = json.loads((FIXTURES / "expected.json").read_text())["vllm_0_13_debug"]["requests"]


def request_lines() -> list[str]:
    return [
        ln for ln in LINES if " details: prompt: " in ln and "chatcmpl-" in ln and "interleaved" not in ln
    ]


def collect(src: LogSource, want_keys: int, clock: FakeClock, give_up_at: float = 60.0):
    """Iterate the source in this thread until want_keys accesses arrived (or its clock says time is up)."""
    stop = threading.Event()
    keys, events, healths = [], [], []
    for u in src.updates(stop):
        if u.accesses is not None:
            keys.append(u.accesses.keys)
        events += list(u.events)
        healths.append(u.health)
        if sum(len(k) for k in keys) >= want_keys or clock.now > give_up_at:
            stop.set()
    src.close()
    return (np.concatenate(keys) if keys else np.zeros(0, np.uint64)), events, healths


def test_follow_across_partial_writes_rotation_and_copytruncate(tmp_path: Path) -> None:
    path = tmp_path / "vllm.log"
    reqs = request_lines()
    assert len(reqs) == len(REQUESTS)
    want = np.concatenate([block_keys(r["token_ids"]) for r in REQUESTS])
    clock = FakeClock()
    log = {}

    def write_half(i: int, first: bool) -> None:
        half = len(reqs[i]) // 2
        log["f"].write(reqs[i][:half] if first else reqs[i][half:])  # a writer caught mid-line
        log["f"].flush()

    def rotate() -> None:  # logrotate: rename and create
        os.rename(path, tmp_path / "vllm.log.1")
        with open(path, "w") as f:
            f.writelines(reqs[3:5])

    def copytruncate() -> None:
        with open(path, "r+") as f:
            f.truncate(0)

    def append_rest() -> None:
        with open(path, "a") as f:
            f.writelines(reqs[5:])

    # the writer's steps, at the times a real one took them: the file appears after the source started
    clock.at(0.3, lambda: log.update(f=open(path, "w")))  # noqa: SIM115 - closed below
    for i in range(3):  # each line's second half two polls (0.05 s each) after its first
        clock.at(0.32 + 0.2 * i, lambda i=i: write_half(i, True))
        clock.at(0.42 + 0.2 * i, lambda i=i: write_half(i, False))
    clock.at(0.9, lambda: log["f"].close())
    clock.at(1.2, rotate)
    clock.at(1.6, copytruncate)
    clock.at(1.9, append_rest)
    keys, events, healths = collect(LogSource(path, follow=True, clock=clock.clock()), len(want), clock)
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
    clock = FakeClock()
    src = LogSource(path, follow=True, clock=clock.clock())
    stop = threading.Event()
    stamps = []
    for u in src.updates(stop):
        stamps.append(clock.now)
        assert u.health is not None and u.accesses is None
        if len(stamps) >= 4:
            stop.set()
    src.close()
    assert np.diff(stamps) == pytest.approx([IDLE_TICK] * 3)  # one update per tick, none skipped
