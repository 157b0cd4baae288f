"""The /metrics server over 127.0.0.1: idle connections are closed after the read timeout or when a
new connection needs their place, one connection more than the cap of busy ones is answered 503 at
once, 50 parallel scrapers are all answered, and an address reachable from other machines
is said so, however "every interface" is written."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from kvset.cli.argtypes import listen_address
from kvset.cli.serve import warn_exposure
from kvset.exporter import Exporter
from kvset.exporter.serve import MetricsServer


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5.0)
    s.settimeout(5.0)
    return s


def test_idle_connections_are_closed_and_give_way_to_a_scraper():
    server = MetricsServer(CollectorRegistry(), "127.0.0.1", 0, read_timeout=1.0, max_connections=2)
    try:
        idle = [_connect(server.port) for _ in range(2)]  # they send nothing
        time.sleep(0.1)  # both accepted and holding their places
        assert httpx.get(server.url, timeout=5.0).status_code == 200  # not 503: the oldest idle one gave way
        assert server.taken_over == 1 and server.refused == 0
        assert idle[0].recv(100) == b""  # closed at once to make room
        started = time.monotonic()
        assert idle[1].recv(100) == b""  # closed by the read timeout, well before the client's 5 s
        assert time.monotonic() - started < 4.0
        for s in idle:
            s.close()
    finally:
        server.close()


class _HeldCollector(Collector):
    """A collector whose scrapes wait until released: connections busy answering."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def collect(self) -> Iterator[Metric]:
        self.entered.release()
        self.release.wait(10.0)
        yield GaugeMetricFamily("held", "a scrape held until released", value=1.0)


def test_one_over_the_cap_of_busy_connections_is_refused_at_once():
    registry = CollectorRegistry(auto_describe=False)
    held = _HeldCollector()
    registry.register(held)
    server = MetricsServer(registry, "127.0.0.1", 0, max_connections=2)
    with ThreadPoolExecutor(2) as pool:
        try:
            busy = [pool.submit(httpx.get, server.url, timeout=10.0) for _ in range(2)]
            for _ in busy:
                assert held.entered.acquire(timeout=5.0)  # both requests read and being answered
            third = _connect(server.port)
            assert third.recv(100).startswith(b"HTTP/1.0 503")  # at once, not after the busy ones
            third.close()
            assert server.refused == 1 and server.taken_over == 0
            held.release.set()
            assert [f.result().status_code for f in busy] == [200, 200]
        finally:
            held.release.set()
            server.close()


class _TogetherCollector(Collector):
    """Each scrape waits until `n` scrapes are being answered at once (or 10 s)."""

    def __init__(self, n: int) -> None:
        self.together = threading.Barrier(n)

    def collect(self) -> Iterator[Metric]:
        with contextlib.suppress(threading.BrokenBarrierError):
            self.together.wait(10.0)
        yield GaugeMetricFamily("together", "answered once all scrapes were in", value=1.0)


def test_fifty_parallel_scrapers_are_all_answered_at_once():
    """Issue 20 item 27: at the default cap and listen backlog, 50 scrapers at once are all being
    answered together, none refused 503 (at the cap of 16, 34 were)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_TogetherCollector(50))
    server = MetricsServer(registry, "127.0.0.1", 0)
    try:
        with ThreadPoolExecutor(50) as pool:
            codes = list(pool.map(lambda _: httpx.get(server.url, timeout=30.0).status_code, range(50)))
        assert codes == [200] * 50 and server.refused == 0
    finally:
        server.close()


@pytest.mark.parametrize("host", ["0", "0.0.0.0", "0.0", "[::]"])
def test_every_form_of_every_interface_is_warned_of(capsys, host):
    try:
        exporter = Exporter(listen=listen_address(f"{host}:0"))
    except OSError as exc:  # e.g. no IPv6 on this machine
        pytest.skip(f"cannot bind {host}: {exc}")
    try:
        assert exporter.server is not None
        assert exporter.server.url.split("/")[2].rsplit(":", 1)[0] in ("0.0.0.0", "[::]")  # as bound, not "0"
        warn_exposure("kvset serve", exporter)
        err = capsys.readouterr().err
        assert (
            err == "kvset serve: warning: it listens on every interface: reachable from beyond this machine\n"
        )
    finally:
        exporter.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
def test_loopback_is_not_warned_of(capsys, host):
    try:
        exporter = Exporter(listen=listen_address(f"{host}:0"))
    except OSError as exc:
        pytest.skip(f"cannot bind {host}: {exc}")
    try:
        warn_exposure("kvset serve", exporter)
        assert capsys.readouterr().err == ""
    finally:
        exporter.close()
