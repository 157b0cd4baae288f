"""The Prometheus exporter: snapshots as metrics, served over HTTP (`kvset serve --listen`,
`kvset-top --serve-metrics`) or written for node_exporter's textfile collector (`--textfile`).

`collector` turns a snapshot into metric families and serves the newest one; `serve` is the HTTP
endpoint; `textfile` the atomic file. `Exporter` puts them together: give its `publish` to the monitor.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prometheus_client.registry import CollectorRegistry

from kvset.exporter.collector import SnapshotCollector, snapshot_families
from kvset.exporter.serve import MetricsServer
from kvset.exporter.textfile import TextfileWriter, check_textfile_target, write_textfile
from kvset.snapshot import Snapshot

__all__ = [
    "Exporter",
    "MetricsServer",
    "SnapshotCollector",
    "check_textfile_target",
    "snapshot_families",
    "write_textfile",
]


class Exporter:
    """A collector on its own registry (not prometheus_client's global one: no process or Python
    metrics of this process), with an HTTP endpoint and/or a textfile writer."""

    def __init__(
        self,
        capacities: Sequence[int] = (),
        listen: tuple[str, int] | None = None,
        textfile: Path | None = None,
    ) -> None:
        """Raises OSError when the address cannot be bound, ValueError when the textfile cannot be written."""
        self.collector = SnapshotCollector(capacities)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        if textfile is not None:
            check_textfile_target(textfile)
        self.server = MetricsServer(self.registry, *listen) if listen is not None else None
        self.textfile = (
            TextfileWriter(textfile, self.registry, self.collector) if textfile is not None else None
        )

    def publish(self, snapshot: Snapshot) -> None:
        self.collector.publish(snapshot)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        if self.textfile is not None:
            self.textfile.close()
