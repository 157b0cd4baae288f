"""The /metrics endpoint: prometheus_client's WSGI app on a threading HTTP server in its own daemon
thread, bound to the one address it is given (kvset's flags default it to 127.0.0.1).

A server thread per connection, each bounded: a connection that sends nothing for READ_TIMEOUT_S
is closed (a scraper sends its request at once; Prometheus' own scrape timeout is 10 s), and at most
MAX_CONNECTIONS are open at a time. When all are taken, a new connection takes the place of the
oldest one that has not yet sent a whole request (idle or slow: it is closed), so idle clients can
never lock scrapers out; only when every connection is busy answering is one more answered 503. The
listen backlog (LISTEN_BACKLOG) holds a burst of parallel scrapers' connections instead of dropping
their SYNs (the standard library's default is 5).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from socketserver import ThreadingMixIn
from typing import cast
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

READ_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 128
LISTEN_BACKLOG = 128
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class _QuietHandler(WSGIRequestHandler):
    """Logs nothing; its socket times out after `timeout` seconds without a byte. Once its request
    and headers are read, the connection is busy and no longer taken over by a new one."""

    timeout = READ_TIMEOUT_S
    server: _BoundedServer

    def parse_request(self) -> bool:
        whole = super().parse_request()
        if whole:
            self.server.request_read(self.connection)
        return whole

    def log_message(self, format: str, *args: object) -> None:
        return


class _BoundedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    max_connections = MAX_CONNECTIONS
    request_queue_size = LISTEN_BACKLOG

    def server_activate(self) -> None:
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        # connections that have not sent a whole request yet, oldest first (dict: insertion order)
        self._waiting: dict[socket.socket, None] = {}
        self.refused = 0  # connections answered 503: every connection was busy answering
        self.taken_over = 0  # waiting connections closed to make room for a new one
        self.dropped = 0  # connections that failed: sent nothing in time, or went away
        super().server_activate()

    def process_request(self, request, client_address) -> None:
        with self._lock:
            if len(self._open) >= self.max_connections and not self._take_over_oldest_waiting():
                self.refused += 1
                refuse = True
            else:
                self._open.add(request)
                self._waiting[request] = None
                refuse = False
        if refuse:
            try:
                request.settimeout(0.5)
                request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def _take_over_oldest_waiting(self) -> bool:
        """Close the oldest connection still waiting for its request (under the lock): its thread
        ends as its read fails, and its place is free at once."""
        if not self._waiting:
            return False
        oldest = next(iter(self._waiting))
        del self._waiting[oldest]
        self._open.discard(oldest)
        self.taken_over += 1
        with contextlib.suppress(OSError):  # it may have gone away meanwhile
            oldest.shutdown(socket.SHUT_RDWR)
        return True

    def request_read(self, request: socket.socket) -> None:
        with self._lock:
            self._waiting.pop(request, None)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._open.discard(request)
                self._waiting.pop(request, None)

    def handle_error(self, request, client_address) -> None:
        # A client that went quiet or away is its own business: counted, never a traceback on stderr.
        self.dropped += 1


def exposure(host: str) -> str | None:
    """Who else can reach an endpoint bound to `host` (an address, as bound), in words; None: this
    machine only."""
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return None
    if ip.is_unspecified:
        return "it listens on every interface: reachable from beyond this machine"
    if ip.is_loopback:
        return None
    return f"it listens on {host}: reachable from beyond this machine"


class MetricsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        read_timeout: float = READ_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        """Binds at once; OSError (address in use, not an address of this host) goes to the caller."""
        family, _, _, _, sockaddr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]

        class Server(_BoundedServer):
            address_family = family

        class Handler(_QuietHandler):
            timeout = read_timeout

        Server.max_connections = max_connections
        self._httpd = cast(
            _BoundedServer, make_server(str(sockaddr[0]), port, make_wsgi_app(registry), Server, Handler)
        )
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="kvset-metrics", daemon=True)
        self._thread.start()
        self.host = str(self._httpd.server_address[0])  # as bound: "0" is 0.0.0.0
        self.port = int(self._httpd.server_address[1])  # the real one when port 0 asked for any free port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    @property
    def exposure(self) -> str | None:
        return exposure(self.host)

    @property
    def refused(self) -> int:
        return self._httpd.refused

    @property
    def taken_over(self) -> int:
        return self._httpd.taken_over

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=2.0)
