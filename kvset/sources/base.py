"""The source interface: what every input (demo, replay, ZMQ events, log, /metrics) hands the pipeline.

A source is iterated in its own worker thread. It yields `SourceUpdate`s: batches of block
accesses, its own health, the engine's operating point, and timeline events. It must yield
at least every `idle_tick` seconds even with no data (an update with only `health`; a paced demo,
which waits on `stop` itself, every second: `pace`), never block forever, and return when `stop` is
set or it is finished.

The source owns its stream's units (kvset.units.StreamUnits: tokens per block and where that came
from, the hash). A source that knows them before reading sets `units`; one that learns them from
its data (a trace's first lines, the first KV event) leaves it None and says them in the update
that carries its first accesses, or before it. The monitor builds the analyzer from them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from kvset.types import SourceUpdate
from kvset.units import DEFAULT_UNITS, StreamUnits

IDLE_TICK = 0.25


class Source:
    """Base class. Subclasses implement `updates`."""

    name: str = "source"
    kind: str = "source"
    address: str = ""  # where it reads, without the flags' wording (SourceHealth.address)
    # The units of the accesses this source delivers, when known before it reads (None: said in an
    # update once learned). A source that says nothing delivers blocks of vLLM's default size.
    units: StreamUnits | None = DEFAULT_UNITS

    def updates(self, stop: threading.Event) -> Iterator[SourceUpdate]:  # pragma: no cover - interface
        raise NotImplementedError

    def pace(self, seconds: float) -> None:
        """The pipeline builds a snapshot only every `seconds` now (the display is paused, or back at
        its pace). A source that makes its own data (the demo) may batch it that coarsely; one that
        reads an input keeps reading at its own pace, so nothing is lost. Called from any thread."""

    def close(self) -> None:
        """Release sockets and files; called from the pipeline thread after iteration ends."""
