"""A fake engine /metrics endpoint on 127.0.0.1 for tests: healthy, slow, trickling, failing, cut or down."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.paths import FIXTURES

TEMPLATE = (FIXTURES / "metrics" / "vllm_0_13.prom").read_text()


def vllm_exposition(
    queries: float, hits: float, usage: float = 0.25, num_gpu_blocks: int | None = None
) -> str:
    """The vLLM 0.13 fixture with its prefix-cache counters and usage set (and its pool, if given)."""
    body = TEMPLATE
    if num_gpu_blocks is not None:
        body = body.replace('num_gpu_blocks="61275"', f'num_gpu_blocks="{num_gpu_blocks}"')
    for name, value in (
        ("vllm:prefix_cache_queries_total", queries),
        ("vllm:prefix_cache_hits_total", hits),
        ("vllm:kv_cache_usage_perc", usage),
    ):
        body = re.sub(rf"^({re.escape(name)}\{{[^}}]*\}}) \S+$", rf"\g<1> {float(value)!r}", body, flags=re.M)
    return body


class FakeEngine:
    """mode: ok | slow (`delay` s before answering) | trickle (the body one byte every `delay` s, so
    no single read ever times out) | error | cut (Content-Length promised, body short) | cut_close
    (no length, body cut mid-line, then the connection closes). `body` (bytes), when set, is served
    instead of the vLLM exposition, with `content_type`."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.delay = 0.0
        self.queries = 1000.0
        self.hits = 0.0
        self.usage = 0.25
        self.num_gpu_blocks: int | None = None  # None: the fixture's 61,275
        self.body: bytes | None = None
        self.body_factory: Callable[[], bytes] | None = None  # when set, each request's body
        self.content_type = "text/plain; version=0.0.4; charset=utf-8"
        self.requests: list[float] = []  # monotonic arrival times
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def start(self) -> None:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                engine.requests.append(time.monotonic())
                body = (
                    engine.body_factory()
                    if engine.body_factory is not None
                    else engine.body
                    if engine.body is not None
                    else (
                        vllm_exposition(
                            engine.queries, engine.hits, engine.usage, engine.num_gpu_blocks
                        ).encode()
                    )
                )
                mode = engine.mode
                if mode == "slow":
                    time.sleep(engine.delay)
                if mode == "error":
                    self.send_response(500)
                    self.send_header("Content-Length", "21")
                    self.end_headers()
                    self.wfile.write(b"Internal Server Error")
                    return
                self.send_response(200)
                self.send_header("Content-Type", engine.content_type)
                if mode == "cut":
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if mode == "trickle":
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    for i in range(len(body)):
                        if engine.mode != "trickle" or engine._server is None:
                            break  # the test moved on: end this answer (the client sees a cut body)
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                        time.sleep(engine.delay)
                    self.close_connection = True
                    return
                if mode == "cut_close":
                    self.end_headers()
                    self.wfile.write(body[: body.index(b"0.25") + 2])  # stops inside a number
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

            def handle_error(self, request, client_address) -> None:  # noqa: ANN001
                # A client that gave up (timeout) closes its end; that is the point of the test.
                import sys

                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
