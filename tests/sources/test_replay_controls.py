"""A paced replay's controls while it plays: the speed changes from the trace time reached, a pause
holds the source itself (nothing delivered, however long), and the data age stays true meanwhile."""

from __future__ import annotations

import json
import threading

import pytest

import kvset.sources.replay as replay
from kvset.sources.replay import MAX_SPEED, MIN_SPEED, ReplaySource
from tests.support.fake_clock import FakeClock


@pytest.fixture
def trace(tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "PACED_BATCH", 4)  # one request per batch: one delivery each
    path = tmp_path / "t.jsonl"
    lines = [
        {"timestamp": 1000 * i, "input_length": 512 * 4, "hash_ids": [4 * i + j for j in range(4)]}
        for i in range(12)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_speed_and_pause_change_the_pacing_while_it_plays_and_the_data_age_stays_true(trace):
    clock = FakeClock()
    source = ReplaySource(trace, speed=1.0, clock=clock)
    delivered_at: list[float] = []  # fake monotonic seconds of each delivery
    paused_states, paused_ages = [], []
    gen = source.updates(threading.Event())
    for update in gen:
        if update.accesses is None:
            if source.playhead is not None and source.playhead.paused:
                paused_states.append(update.health.state)
                paused_ages.append(clock.wall() - update.health.last_data_at)
                if clock.now - delivered_at[-1] >= 30:  # a long pause: resume
                    assert source.toggle_pause() is False
            continue
        delivered_at.append(clock.now)
        if len(delivered_at) == 3:
            assert source.change_speed(2.0) == 2.0  # `+`
        if len(delivered_at) == 6:
            assert source.toggle_pause() is True  # space
    gaps = [round(b - a, 6) for a, b in zip(delivered_at, delivered_at[1:], strict=False)]
    # requests 1 s apart: 1 s at 1x, then 0.5 s at 2x; the pause holds the 7th for 30 s, then 0.5 s again
    assert gaps[:2] == [1.0, 1.0]
    assert gaps[2:5] == [0.5, 0.5, 0.5]
    assert 30.0 <= gaps[5] <= 30.0 + 0.5 + replay.IDLE_TICK
    assert gaps[6:] == [0.5] * (len(gaps) - 6)
    assert len(delivered_at) == 12
    # while paused nothing came, the state says so, and the age of the data grew with the time
    assert paused_states and all(s.startswith("paused (space resumes) at 2x") for s in paused_states)
    assert paused_ages == sorted(paused_ages) and paused_ages[-1] >= 29.0


def test_the_speed_is_clamped_and_an_unpaced_replay_has_no_controls(trace):
    source = ReplaySource(trace, speed=1.0, clock=FakeClock())
    for _ in range(20):
        source.change_speed(2.0)
    assert source.change_speed(1.0) == MAX_SPEED
    for _ in range(40):
        source.change_speed(0.5)
    assert source.change_speed(1.0) == MIN_SPEED
    fast = ReplaySource(trace, speed=None)
    assert fast.change_speed(2.0) is None and fast.toggle_pause() is None
