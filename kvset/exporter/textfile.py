"""The metrics as a file for node_exporter's textfile collector, so that nothing listens at all.

Each refresh writes a temporary file in the target's own folder and renames it over the target:
rename(2) within one file system is atomic, so the collector reads the previous file or the new one,
never a part. The temporary name does not end in .prom, so the collector skips it.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from kvset.exporter.collector import SnapshotCollector

WAIT_SECONDS = 0.5  # how often the writer looks at its stop flag while no snapshot comes


def write_textfile(path: Path, registry: CollectorRegistry) -> None:
    """Write the registry's metrics to `path` atomically (temporary file + rename, same folder)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(generate_latest(registry))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # node_exporter often runs as another user
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_textfile_target(path: Path) -> None:
    """Raises ValueError when the textfile cannot be written where asked."""
    folder = Path(path).parent
    if Path(path).is_dir():
        raise ValueError(
            f"--textfile {path}: is a folder; give a file name such as {Path(path) / 'kvset.prom'}"
        )
    if not folder.is_dir():
        raise ValueError(f"--textfile {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--textfile {path}: cannot write in {folder}")


class TextfileWriter:
    """A thread that rewrites the file after every published snapshot (never in the pipeline's thread,
    so a slow disk cannot hold ingestion up)."""

    def __init__(self, path: Path, registry: CollectorRegistry, collector: SnapshotCollector) -> None:
        self.path = Path(path)
        self.registry = registry
        self.collector = collector
        self.writes = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kvset-textfile", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            snap = self.collector.wait_for_newer(seq, WAIT_SECONDS)
            if snap is None:
                continue
            seq = snap.seq
            self._write()

    def _write(self) -> None:
        try:
            write_textfile(self.path, self.registry)
            self.writes += 1
            self.last_error = None
        except OSError as exc:
            text = f"kvset: cannot write the textfile {self.path}: {exc.strerror or exc}"
            if text != self.last_error:  # once per distinct failure, not once a second
                print(text, file=sys.stderr)
            self.last_error = text

    def close(self) -> None:
        """Stop, after writing the newest snapshot once more (what the last refresh published)."""
        self._stop.set()
        self._thread.join(timeout=5.0)
        if self.collector.latest is not None:
            self._write()
