"""/metrics answers that must not cost memory or minutes: bodies past the size limit, bodies slow to
parse, pages that are not metrics at all; and URLs given without a scheme or a path."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from kvset.quantities import MIB
from kvset.sources.metrics import MetricsSource, metrics_url
from tests.support.engine_metrics_server import FakeEngine, vllm_exposition

GOOD = vllm_exposition(1000, 100).encode()


def first_rejection(src: MetricsSource, timeout: float = 20.0) -> str:
    """Poll until the first counted rejection; its reason."""
    stop = threading.Event()
    started = time.monotonic()
    for update in src.updates(stop):
        if update.health is not None and update.health.rejected:
            return update.health.rejected[0].reason
        if time.monotonic() - started > timeout:
            raise AssertionError(f"no rejection; last health: {update.health}")
    raise AssertionError("the source ended")


def mock(handler) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


def test_a_body_announced_larger_than_the_limit_is_refused_unread():
    served = []

    def handler(request):
        served.append(request)
        return httpx.Response(200, headers={"Content-Length": str(64 * MIB)}, content=b"x" * 10)

    src = MetricsSource("http://engine/metrics", transport=mock(handler), max_body_bytes=1 * MIB, timeout=2.0)
    reason = first_rejection(src)
    assert reason == "response larger than 1 MiB (it announced 64.0 MiB): not read (see --metrics-max-bytes)"
    src.close()


def test_an_endless_body_without_a_length_is_cut_at_the_limit():
    pieces = {"sent": 0}

    def endless():
        while True:
            pieces["sent"] += 1
            yield b"# filler line of an endpoint gone wrong " * 256 + b"\n"  # about 10 KiB

    def handler(request):
        return httpx.Response(200, content=endless())  # streamed: no Content-Length

    src = MetricsSource(
        "http://engine/metrics", transport=mock(handler), max_body_bytes=1 * MIB, timeout=30.0
    )
    reason = first_rejection(src)
    assert reason.startswith("response larger than 1 MiB")
    assert pieces["sent"] * 10 * 1024 < 2 * MIB  # it stopped reading right after the limit
    src.close()


def test_a_body_too_slow_to_parse_is_given_up_at_the_poll_deadline():
    series = b"".join(
        b'vllm:num_requests_running{engine="%d",model_name="m"} 1\n' % i for i in range(250_000)
    )
    body = GOOD + series  # about 14 MiB: under the limit, seconds to parse

    def handler(request):
        return httpx.Response(200, content=body)

    src = MetricsSource("http://engine/metrics", transport=mock(handler), timeout=0.5)
    reason = first_rejection(src)
    assert reason == "response too slow to parse: given up at the poll's deadline"
    src.close()


@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "text/plain"])
def test_an_html_page_is_said_to_be_not_metrics(content_type):
    engine = FakeEngine()
    engine.body, engine.content_type = b"<!doctype html>\n<html><body>404</body></html>\n", content_type
    try:
        src = MetricsSource(engine.url, timeout=2.0)
        reason = first_rejection(src)
    finally:
        engine.stop()
    assert reason.startswith("not a Prometheus metrics page (the server sent HTML)")
    assert "/metrics" in reason and "invalid metric name" not in reason
    src.close()


def test_a_url_without_scheme_or_path_is_completed_and_said_so():
    assert metrics_url("127.0.0.1:8000") == (
        "http://127.0.0.1:8000/metrics",
        "--metrics 127.0.0.1:8000 read as http://127.0.0.1:8000/metrics",
    )
    assert metrics_url("https://gpu-1:8443/") == (
        "https://gpu-1:8443/metrics",
        "--metrics https://gpu-1:8443/ read as https://gpu-1:8443/metrics",
    )
    assert metrics_url("http://h:8000/v1/metrics") == ("http://h:8000/v1/metrics", None)
    for bad in ("ftp://h/metrics", "http://:8000/metrics", "http://h:port/metrics"):
        with pytest.raises(ValueError) as exc:
            metrics_url(bad)
        assert "\n" not in str(exc.value) and bad in str(exc.value)


def test_a_url_without_scheme_is_polled_over_http():
    engine = FakeEngine()
    try:
        src = MetricsSource(f"127.0.0.1:{engine.port}", interval=0.05, timeout=2.0)
        stop = threading.Event()
        deadline = time.monotonic() + 10
        for update in src.updates(stop):
            if update.engine is not None or time.monotonic() > deadline:
                break
        health = src.health()
    finally:
        engine.stop()
    assert health.connected and health.source == f"metrics http://127.0.0.1:{engine.port}/metrics"
    assert (
        health.notes[0] == f"--metrics 127.0.0.1:{engine.port} read as http://127.0.0.1:{engine.port}/metrics"
    )
    src.close()
