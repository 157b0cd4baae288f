"""`kvset-top --replay FILE --speed max` plays a trace as it is read, not after reading it whole."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import kvset.formats.byte_lines as byte_lines
from kvset.formats import read_trace
from kvset.sources.replay import PACED_BATCH, ReplaySource
from tests.support.fake_clock import FakeClock


def test_the_first_batches_arrive_before_the_file_is_read_and_all_arrive_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(byte_lines, "CHUNK_BYTES", 4096)
    rng = np.random.default_rng(0)
    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {"timestamp": 10 * i, "input_length": 512 * 4, "hash_ids": rng.integers(0, 5000, 4).tolist()}
            )
            + "\n"
            for i in range(3000)
        )
    )
    source = ReplaySource(str(path), speed=None)
    seen_lines_at_first_data = None
    keys = []
    last = None
    for update in source.updates(threading.Event()):
        if update.accesses is not None:
            if seen_lines_at_first_data is None:
                seen_lines_at_first_data = update.health.received
            keys.append(update.accesses.keys)
        last = update
    assert seen_lines_at_first_data is not None and seen_lines_at_first_data < 3000 // 2
    assert last.health.finished and last.health.received == 3000
    assert np.array_equal(np.concatenate(keys), read_trace(path).keys)


def test_a_trace_out_of_order_beyond_the_window_still_plays_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(byte_lines, "CHUNK_BYTES", 2048)
    lines = [{"timestamp": 1000 + i, "input_length": 512, "hash_ids": [i]} for i in range(300)]
    lines.append({"timestamp": 0, "input_length": 512, "hash_ids": [9999]})
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    updates = list(ReplaySource(str(path), speed=None).updates(threading.Event()))
    assert sum(len(u.accesses) for u in updates if u.accesses is not None) == 301
    assert any("out of timestamp order" in n for n in updates[-1].health.notes)


def test_a_missing_file_fails_visibly(tmp_path):
    (update, failed) = list(ReplaySource(str(tmp_path / "nope.jsonl"), speed=None).updates(threading.Event()))
    assert failed.health.finished and "cannot read" in failed.health.state


def test_at_a_speed_each_request_is_played_at_its_own_time_over_the_speed(tmp_path):
    # requests of a whole piece each (PACED_BATCH accesses), 10 s apart in the trace (milliseconds)
    n = PACED_BATCH
    lines = [
        {"timestamp": 10_000 * i, "input_length": 512 * n, "hash_ids": list(range(i, i + n))}
        for i in range(4)
    ]
    path = tmp_path / "paced.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    clock = FakeClock()
    played_at, trace_times = [], []
    for update in ReplaySource(str(path), speed=10.0, clock=clock.clock()).updates(threading.Event()):
        if update.accesses is not None:
            played_at.append(clock.now)
            trace_times.append(float(np.asarray(update.accesses.timestamps).flat[0]))
    assert len(played_at) == 4
    # 10 s of trace in 1 s of the clock, counted from the first request
    assert played_at == pytest.approx([(t - trace_times[0]) / 10.0 for t in trace_times])
    assert played_at == pytest.approx([0.0, 1.0, 2.0, 3.0])
    assert max(clock.waits) <= 0.25  # waiting in ticks, so the health keeps coming
