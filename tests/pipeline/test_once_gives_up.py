"""`--once` on sources that will never deliver: it says so as soon as their health is definite,
instead of listening out its 10 s; a --duration, or a source still connecting, is waited for."""

from __future__ import annotations

import argparse
import socket
import threading

from kvset.cli.live_monitor import all_sources_dead, once_give_up
from kvset.core.stack_distance import new_analyzer
from kvset.monitor import Monitor
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.kv_events import KvEventsSource
from kvset.sources.metrics import MetricsSource
from kvset.types import SourceHealth


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _monitor(sources) -> Monitor:
    return Monitor(sources, new_analyzer, SnapshotBuilder(SnapshotConfig()), interval=0.05)


def test_collect_ends_when_every_source_is_dead_long_before_its_deadline():
    sources = [
        KvEventsSource([f"tcp://127.0.0.1:{_free_port()}"]),
        MetricsSource(f"http://127.0.0.1:{_free_port()}/metrics"),
    ]
    monitor = _monitor(sources)
    finished = threading.Event()
    result = {}

    def run() -> None:
        result["snapshot"] = monitor.collect(3600, give_up=all_sources_dead)
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    # a deadline of an hour: returning at all means the dead sources ended it
    assert finished.wait(60), "collect listened past the sources' definite failure"
    states = [h.state for h in result["snapshot"].sources]
    assert states[0].startswith("no publisher answered on tcp://127.0.0.1:")
    assert states[1].startswith("down: connection refused")


def _health(kind: str, state: str, received: int = 0, retry_in: float | None = None) -> SourceHealth:
    return SourceHealth(
        source=kind,
        kind=kind,
        connected=False,
        state=state,
        last_data_at=None,
        received=received,
        accesses=0,
        retry_in=retry_in,
    )


def test_a_source_still_connecting_or_delivering_keeps_once_listening():
    dead = _health("metrics", "down: connection refused", retry_in=2.0)
    assert all_sources_dead([dead, _health("events", "no publisher answered on tcp://x:1: ...")])
    assert not all_sources_dead([dead, _health("events", "connecting")])
    assert not all_sources_dead([dead, _health("events", "down: disconnected, reconnecting", received=3)])
    assert not all_sources_dead([])


def test_a_duration_is_listened_out_whatever_the_health():
    assert once_give_up(argparse.Namespace(duration=4.0)) is None
    assert once_give_up(argparse.Namespace(duration=None)) is all_sources_dead
