"""The source interface: what every input (demo, replay, ZMQ events, log, /metrics) hands the pipeline.

A source is iterated in its own worker thread. It yields `SourceUpdate`s: batches of block
accesses, its own health, the engine's operating point, and timeline events. It must yield
at least every `idle_tick` seconds even with no data (an update with only `health`), never
block forever, and return when `stop` is set or it is finished.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from kvset.types import SourceUpdate

IDLE_TICK = 0.25


class Source:
    """Base class. Subclasses implement `updates`."""

    name: str = "source"
    kind: str = "source"

    def updates(self, stop: threading.Event) -> Iterator[SourceUpdate]:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        """Release sockets and files; called from the pipeline thread after iteration ends."""
