"""The quiet wait: how long a publisher stays silent before its last requests are finished and
counted. At most QUIET_SECONDS, 1 s; for vLLM's request steps, the engine's block_size longest recent
steps added up, since no request runs that long without storing a block (issue 25: a flood's figures stood still
for the whole second at its end)."""

from __future__ import annotations

import pytest

from kvset.engine.kv_event_health import kv_event_health
from kvset.engine.kv_event_publisher import QUIET_MIN_SECONDS
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.engine.stream_shape import RADIX_INSERTS, REQUEST_STEPS
from kvset.engine_model.engine_steps import MIN_LONGEST_SAMPLES, EngineSteps
from kvset.rejects import RejectCounter
from tests.support.kv_values import message, stored

STEP = 0.02


def flood(
    batches: int, step: float = STEP, pause_at: int | None = None, sglang: bool = False
) -> KvEventTracker:
    """A stream of one new 10-block request a batch, `step` apart (a pause of 1 s before batch
    `pause_at`), fed as the source feeds it (applied by the caller's take, a part at a time)."""
    tracker = KvEventTracker(["tcp://127.0.0.1:1"], [None], RejectCounter())
    tracker.apply_at_once = False
    t = 0.0
    for seq in range(batches):
        t += 1.0 if seq == pause_at else step
        if sglang:  # SGLang's radix inserts: a page a block, signed hashes
            event = stored([-(1 + 10 * seq + k) for k in range(10)], block_size=1)
        else:
            event = stored(list(range(1 + 10 * seq, 11 + 10 * seq)))
        tracker.published(0, message(seq, [event], ts=1000.0 + t), now=t, at=1000.0 + t)
        while tracker.apply_next(1000.0 + t):
            pass
        tracker.take(1000.0 + t)
    return tracker


def test_the_longest_steps_are_the_longest_of_the_recent_gaps_added_up_once_enough_were_seen() -> None:
    steps = EngineSteps()
    gaps = [0.001 * ((i * 37) % 101) for i in range(600)]
    for i, gap in enumerate(gaps):
        steps.observe(gap)
        recent = sorted(gaps[max(0, i + 1 - 512) : i + 1], reverse=True)
        expected = sum(recent[:16]) if i + 1 >= MIN_LONGEST_SAMPLES else None
        assert steps.longest_steps(16) == (None if expected is None else pytest.approx(expected, abs=1e-12))
    steps.observe(0.5)
    assert steps.longest_steps(1) == 0.5


def test_a_fast_engines_last_requests_count_after_block_size_of_its_longest_steps() -> None:
    tracker = flood(100)
    publisher = tracker.publishers[0]
    assert publisher.shape.decided == REQUEST_STEPS and tracker.block_size == 16
    wait = tracker.quiet_wait(publisher)
    assert wait == pytest.approx(max(QUIET_MIN_SECONDS, 16 * STEP))  # 0.32 s, not 1 s
    last = 1000.0 + 100 * STEP
    before = tracker.accesses
    tracker.take(last + wait - 0.01)
    assert tracker.accesses == before  # still within the wait: requests may run
    update = tracker.take(last + wait)
    # the first update after the wait hands out the first requests the delay line's first part finishes
    assert tracker.flushing and update.accesses is not None and len(update.accesses) > 0
    while tracker.flushing:
        tracker.take(last + wait)
    assert tracker.accesses == 100 * 10  # every request counted
    said = dict(kv_event_health(tracker, last).details)["quiet wait"]
    assert said.startswith("a publisher's last requests count once it is silent 0.32 s (its 16 longest")
    assert "at most 1 s" in said


def test_the_wait_stays_the_second_when_the_engine_was_seen_silent_longer_or_is_not_vllms() -> None:
    slow = flood(100, pause_at=80)  # a 1 s pause among the last 512 gaps: the 16 longest pass 1 s
    assert slow.quiet_wait(slow.publishers[0]) == 1.0
    few = flood(MIN_LONGEST_SAMPLES - 10)  # too few gaps to trust the longest
    assert few.quiet_wait(few.publishers[0]) == 1.0
    sglang = flood(100, sglang=True)  # a running SGLang request publishes nothing until its end
    assert sglang.publishers[0].shape.decided == RADIX_INSERTS
    assert sglang.quiet_wait(sglang.publishers[0]) == 1.0
    assert dict(kv_event_health(slow, 0.0).details)["quiet wait"] == (
        "a publisher's last requests count once it is silent 1 s"
    )


def test_a_slow_engine_keeps_the_bound_and_the_floor_keeps_kvsets_own_pauses_out() -> None:
    slow = flood(100, step=0.1)
    assert slow.quiet_wait(slow.publishers[0]) == 1.0  # 16 steps of 0.1 s: 1.6 s, bounded
    fast = flood(100, step=0.001)
    assert fast.quiet_wait(fast.publishers[0]) == QUIET_MIN_SECONDS  # 16 ms: floored
