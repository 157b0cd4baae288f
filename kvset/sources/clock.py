"""Where a source reads the time and how it waits, as one value a source takes as a parameter.

The real clock is the default. A test hands a source a fake one (tests/support/fake_clock.py) whose
time moves only when the source sleeps or waits, so the test neither sleeps nor depends on the
machine's load, and the pacing it checks (a tick every IDLE_TICK, a replay at --speed, a backoff)
is exact. What a source waits for in a socket's own poll (the ZMQ events) is not on this clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


def _event_wait(event: threading.Event, timeout: float) -> bool:
    return event.wait(timeout)


@dataclass(frozen=True)
class Clock:
    wall: Callable[[], float] = time.time  # seconds since the epoch: the timestamps a source reports
    monotonic: Callable[[], float] = time.monotonic  # intervals and deadlines
    sleep: Callable[[float], None] = time.sleep
    wait: Callable[[threading.Event, float], bool] = _event_wait  # event.wait(timeout): set or not


REAL_CLOCK = Clock()
