"""The /metrics server over 127.0.0.1: idle connections are closed after the read timeout, one
connection more than the cap is answered 503 at once, and an address reachable from other machines
is said so, however "every interface" is written."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from prometheus_client.registry import CollectorRegistry

from kvset.cli.argtypes import listen_address
from kvset.cli.serve import warn_exposure
from kvset.exporter import Exporter
from kvset.exporter.serve import MetricsServer


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5.0)
    s.settimeout(5.0)
    return s


def test_idle_connections_are_closed_and_one_over_the_cap_is_refused():
    server = MetricsServer(CollectorRegistry(), "127.0.0.1", 0, read_timeout=0.5, max_connections=2)
    try:
        idle = [_connect(server.port) for _ in range(2)]  # they send nothing
        time.sleep(0.1)  # both accepted and holding their slots
        third = _connect(server.port)
        assert third.recv(100).startswith(b"HTTP/1.0 503")  # at once, not after the idle ones' timeout
        third.close()
        assert server.refused == 1
        started = time.monotonic()
        for s in idle:
            assert s.recv(100) == b""  # closed by the server
            s.close()
        assert time.monotonic() - started < 4.0  # by the read timeout, well before the client's 5 s
        time.sleep(0.1)  # the slots are given back as the handler threads end
        assert httpx.get(server.url, timeout=5.0).status_code == 200
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
