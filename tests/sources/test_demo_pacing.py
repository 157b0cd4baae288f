"""The demo source at its live rate: one batch a tick, not a wake-up every few milliseconds."""

import threading

from kvset.sources.base import IDLE_TICK
from kvset.sources.demo import PACED_TICK_MAX, DemoSource
from tests.support.fake_clock import FakeClock

SECONDS = 30.0


def _run(source: DemoSource, clock: FakeClock, seconds: float) -> list:
    stop = threading.Event()
    updates = []
    for update in source.updates(stop):
        updates.append(update)
        if clock.now >= seconds:
            stop.set()
    return updates


def test_the_live_demo_wakes_once_a_tick_and_keeps_its_rate():
    clock = FakeClock()
    source = DemoSource(speed=1.0, clock=clock)
    updates = _run(source, clock, SECONDS)
    batches = [u for u in updates if u.accesses is not None]
    # every wait is a whole tick, so a second of demo costs at most 1 / IDLE_TICK wake-ups
    assert clock.waits and set(clock.waits) == {IDLE_TICK}
    assert len(batches) <= SECONDS / IDLE_TICK + 1
    # and the trace time still follows the wall clock: the requests of 30 s at 40 requests/s
    requests = sum(len(b.accesses.request_starts) for b in batches)
    assert 0.8 * 40 * SECONDS < requests < 1.2 * 40 * SECONDS


def test_a_fast_demo_does_not_wait_between_full_batches():
    clock = FakeClock()
    source = DemoSource(speed=1000.0, clock=clock, max_batch=4096)
    updates = _run(source, clock, 2.0)
    full = [u for u in updates if u.accesses is not None and len(u.accesses) >= 4096]
    # many full batches between two ticks: the analyzer's pace sets the rate, not the tick
    assert len(full) > 2 * len(clock.waits)


def test_a_paced_demo_makes_fewer_larger_batches_and_keeps_its_rate():
    # the display is paused: snapshots every 15 s, so a batch a second is as fresh as anyone sees
    clock = FakeClock()
    source = DemoSource(speed=1.0, clock=clock)
    source.pace(15.0)
    batches = [u for u in _run(source, clock, SECONDS) if u.accesses is not None]
    assert set(clock.waits) == {PACED_TICK_MAX}
    assert len(batches) <= SECONDS / PACED_TICK_MAX + 1
    requests = sum(len(b.accesses.request_starts) for b in batches)
    assert 0.8 * 40 * SECONDS < requests < 1.2 * 40 * SECONDS
    source.pace(1.0)  # resumed: back to a batch a tick
    assert source.tick == IDLE_TICK
