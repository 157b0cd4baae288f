"""MetricsSource against a real HTTP server on 127.0.0.1: backoff, stale values, recovery, restarts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from kvset.sources import metrics
from kvset.sources.metrics import MetricsSource
from kvset.types import SourceUpdate
from tests.support.engine_metrics_server import FakeEngine
from tests.support.fake_clock import FakeClock


@pytest.fixture
def engine():
    e = FakeEngine()
    yield e
    e.stop()


def drive(
    src: MetricsSource, until: Callable[[SourceUpdate], bool], timeout: float = 5.0
) -> list[SourceUpdate]:
    """Iterate the source here until `until(update)` holds; fail on timeout."""
    stop = threading.Event()
    seen: list[SourceUpdate] = []
    deadline = time.monotonic() + timeout
    for u in src.updates(stop):
        seen.append(u)
        if until(u):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached; last health: {seen[-1].health}")
    return seen


def source(url: str, **kw) -> MetricsSource:
    args = {"interval": 0.05, "timeout": 0.5, "max_backoff": 0.4, "window_s": 60.0}
    args.update(kw)
    return MetricsSource(url, **args)


def test_operating_point_and_measured_hit_rate(engine: FakeEngine) -> None:
    src = source(engine.url)
    first = drive(src, lambda u: u.engine is not None)
    r = first[-1].engine
    assert (r.capacity_blocks, r.capacity_tokens, r.block_size) == (61275, 61275 * 16, 16)
    assert r.kv_usage == pytest.approx(0.25) and not r.stale
    assert first[-1].health.connected and first[-1].health.state == "connected"
    assert all(u.accesses is None for u in first)
    engine.queries, engine.hits = 3000.0, 1500.0  # +2000 queried tokens, +1500 hits
    ups = drive(src, lambda u: u.engine is not None and u.engine.token_hit_rate is not None)
    assert ups[-1].engine.token_hit_rate == pytest.approx(0.75)
    # the engine restarts: its counters start again from small values
    engine.queries, engine.hits = 10.0, 0.0
    ups = drive(src, lambda u: any(e.kind == "engine-reset" for e in u.events))
    assert ups[-1].engine.token_hit_rate is None
    src.close()


def test_http_errors_back_off_keep_stale_values_and_recover(engine: FakeEngine) -> None:
    src = source(engine.url)
    good = drive(src, lambda u: u.engine is not None)[-1].engine
    engine.mode = "error"
    t_fail = len(engine.requests)
    ups = drive(src, lambda u: src.failures >= 4)
    down = [u for u in ups if u.engine is not None]
    assert down and all(u.engine.stale for u in down)
    assert down[-1].engine.capacity_blocks == good.capacity_blocks
    h = ups[-1].health
    assert not h.connected and h.status().startswith(
        ("down: HTTP 500, retry in", "down: HTTP 500, retrying now")
    )
    assert "stale" in " ".join(h.notes)
    assert h.rejected == ()  # an HTTP error is the endpoint's state, not rejected input
    assert [e.kind for u in ups for e in u.events].count("source-down") == 1
    assert len(engine.requests) - t_fail >= 4  # each failure was a request that reached the engine
    engine.mode = "ok"
    ups = drive(src, lambda u: u.engine is not None and not u.engine.stale)
    assert ups[-1].health.connected
    assert any(e.kind == "source-recovered" for u in ups for e in u.events)
    src.close()


def test_the_wait_after_failures_doubles_from_the_interval_up_to_the_cap() -> None:
    src = source("http://127.0.0.1:9/metrics")  # never polled: backoff() is the schedule itself
    delays = []
    for failures in range(6):
        src.failures = failures
        delays.append(src.backoff())
    assert delays == pytest.approx([0.05, 0.05, 0.1, 0.2, 0.4, 0.4])
    src.close()


@pytest.mark.parametrize(
    ("left", "said"), [(3.2, "retry in 3 s"), (0.4, "retry in 0.4 s"), (0.01, "retrying now")]
)
def test_the_down_state_says_when_the_next_try_is(left: float, said: str) -> None:
    clock = FakeClock()
    src = source("http://127.0.0.1:9/metrics", clock=clock)  # never polled
    src.last_error, src._next_at = "connection refused", clock.wall() + left
    health = src.health()
    assert health.status() == f"down: connection refused, {said}"
    assert health.state == "down: connection refused"  # what an ending report (--once) says: no promise
    src.close()


def test_connection_refused_then_the_engine_comes_back(engine: FakeEngine) -> None:
    src = source(engine.url)
    drive(src, lambda u: u.engine is not None)
    engine.stop()
    ups = drive(src, lambda u: u.health is not None and "connection refused" in u.health.state)
    assert (
        ups[-1]
        .health.status()
        .startswith(("down: connection refused, retry in", "down: connection refused, retrying now"))
    )
    engine.start()  # same port
    ups = drive(src, lambda u: u.engine is not None and not u.engine.stale, timeout=8.0)
    assert ups[-1].health.state == "connected"
    src.close()


def test_never_reachable_endpoint_reports_why_without_readings() -> None:
    e = FakeEngine()
    url = e.url
    e.stop()
    src = source(url)
    ups = drive(src, lambda u: src.failures >= 2)
    assert all(u.engine is None for u in ups)
    assert "connection refused" in ups[-1].health.state
    src.close()


def test_slow_engine_times_out_and_the_source_keeps_ticking(engine: FakeEngine) -> None:
    src = source(engine.url, timeout=0.2)
    drive(src, lambda u: u.engine is not None)
    engine.mode, engine.delay = "slow", 1.0
    hung = drive(src, lambda u: u.health is not None and "timeout" in u.health.state)
    assert all(u.health is not None for u in hung)  # every update while it hangs says how the source is
    engine.mode = "ok"
    drive(src, lambda u: u.engine is not None and not u.engine.stale)
    src.close()


@pytest.mark.parametrize(
    ("mode", "reason"), [("cut", "connection closed"), ("cut_close", "truncated response")]
)
def test_a_half_written_response_is_rejected_and_the_last_values_kept(
    engine: FakeEngine, mode, reason
) -> None:
    src = source(engine.url)
    good = drive(src, lambda u: u.engine is not None)[-1].engine
    engine.mode = mode
    ups = drive(src, lambda u: u.health is not None and u.health.rejected_total >= 1)
    h = ups[-1].health
    assert reason in h.rejected[0].reason
    stale = [u.engine for u in ups if u.engine is not None]
    assert stale[-1].stale and stale[-1].capacity_blocks == good.capacity_blocks
    engine.mode = "ok"
    drive(src, lambda u: u.engine is not None and not u.engine.stale)
    src.close()


def test_bad_interval_is_an_error() -> None:
    with pytest.raises(ValueError):
        MetricsSource("http://127.0.0.1:1/metrics", interval=0)


def count_poll_threads(monkeypatch) -> dict[str, int]:
    """Live and peak number of poll helper threads, counted as each one runs."""
    seen = {"live": 0, "peak": 0}
    lock = threading.Lock()
    real_run = metrics._Poll._run

    def counted(self, client, url) -> None:
        with lock:
            seen["live"] += 1
            seen["peak"] = max(seen["peak"], seen["live"])
        try:
            real_run(self, client, url)
        finally:
            with lock:
                seen["live"] -= 1

    monkeypatch.setattr(metrics._Poll, "_run", counted)
    return seen


@pytest.mark.parametrize(("byte_every", "timeout"), [(0.05, 0.3), (0.5, 0.6)])
def test_a_trickling_body_hits_the_overall_deadline_without_piling_up_polls(
    engine: FakeEngine, byte_every, timeout, monkeypatch
) -> None:
    # No single read waits as long as httpx's per-read timeout. At one byte every 0.5 s the poll
    # is abandoned at its deadline while its thread still waits, longer than a tick, for a byte.
    threads = count_poll_threads(monkeypatch)
    src = source(engine.url, timeout=timeout, max_backoff=0.2)
    good = drive(src, lambda u: u.engine is not None)[-1].engine
    engine.mode, engine.delay = "trickle", byte_every
    first = drive(src, lambda u: u.health is not None and "timeout" in u.health.state)
    assert not first[-1].health.connected
    stale = [u.engine for u in first if u.engine is not None]
    assert stale[-1].stale and stale[-1].capacity_blocks == good.capacity_blocks
    # several more deadlines while it keeps trickling: never more than one request out at a time
    n = len(engine.requests)
    drive(src, lambda u: len(engine.requests) >= n + 2 and src.failures >= 3, timeout=8.0)
    assert threads["peak"] == 1
    assert src.last_error is not None and "timeout" in src.last_error and src.rejects.total == 0
    engine.mode = "ok"
    ups = drive(src, lambda u: u.engine is not None and not u.engine.stale)
    assert ups[-1].health.connected
    src.close()


def test_an_unexpected_error_reading_a_body_costs_one_poll_not_the_source(
    engine: FakeEngine, monkeypatch
) -> None:
    src = source(engine.url)
    drive(src, lambda u: u.engine is not None)
    real = src.tracker.update_counters
    broken = {"on": True}

    def fragile(counters, at: float):
        if broken["on"]:
            raise OverflowError("a bug on odd input")
        return real(counters, at)

    monkeypatch.setattr(src.tracker, "update_counters", fragile)
    ups = drive(src, lambda u: u.health is not None and u.health.rejected_total >= 1)
    h = ups[-1].health
    assert h.rejected[0].reason == "unusable metrics (OverflowError)" and not h.connected
    broken["on"] = False
    drive(src, lambda u: u.engine is not None and not u.engine.stale)
    src.close()
