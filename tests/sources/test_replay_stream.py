"""`kvset-top --replay FILE --speed max` plays a trace as it is read, not after reading it whole."""

from __future__ import annotations

import json
import threading

import numpy as np

import kvset.formats.byte_lines as byte_lines
from kvset.formats import read_trace
from kvset.sources.replay import ReplaySource


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
