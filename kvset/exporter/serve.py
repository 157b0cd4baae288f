"""The /metrics endpoint: prometheus_client's HTTP server in its own daemon thread, bound to the one
address it is given (kvset's flags default it to 127.0.0.1)."""

from __future__ import annotations

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        """Binds at once; OSError (address in use, not an address of this host) goes to the caller."""
        self._httpd, self._thread = start_http_server(port, addr=host, registry=registry)
        self.host = host
        self.port = int(self._httpd.server_address[1])  # the real one when port 0 asked for any free port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=2.0)
