"""The metrics as a file for node_exporter's textfile collector, so that nothing listens at all.

Each refresh writes a temporary file in the target's own folder and renames it over the target:
rename(2) within one file system is atomic, so the collector reads the previous file or the new one,
never a part. The temporary name does not end in .prom, so the collector skips it. It is created as
mkstemp creates files (a name nobody can guess, O_EXCL: never a file or link planted there), and the
target must be a regular file or absent: a link, a FIFO or a device there is refused, not replaced.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import threading
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from kvset.exporter.collector import SnapshotCollector

WAIT_SECONDS = 0.5  # how often the writer looks at its stop flag while no snapshot comes


def not_a_regular_file(path: Path) -> str | None:
    """What stands at `path` if it is something other than a regular file (None: a file, or nothing).
    lstat: a symbolic link is itself refused, whatever it points at."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    kinds = {stat.S_ISLNK: "a symbolic link", stat.S_ISFIFO: "a FIFO", stat.S_ISDIR: "a folder"}
    kind = next((name for test, name in kinds.items() if test(mode)), "a device or socket")
    return f"{path} is {kind}, not a regular file: refusing to replace it"


def write_textfile(path: Path, registry: CollectorRegistry) -> None:
    """Write the registry's metrics to `path` atomically (temporary file + rename, same folder)."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(generate_latest(registry))
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), 0o644)  # node_exporter often runs as another user
        refused = not_a_regular_file(path)
        if refused is not None:
            raise OSError(refused)
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
    refused = not_a_regular_file(Path(path))
    if refused is not None:
        raise ValueError(f"--textfile {refused}")
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
