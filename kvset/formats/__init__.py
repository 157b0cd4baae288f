"""Trace file formats: bytes -> requests -> block keys (numpy uint64 batches).

The readers are compiled (numba, kvset.formats.scan): they are loaded on first use, so that a command
line naming the formats (`kvset --help`) does not compile or load them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvset.formats.names import FORMATS, HASH_ALGOS

if TYPE_CHECKING:
    from kvset.formats.traces import (
        ParsedRequests,
        Trace,
        TraceError,
        TraceLineParser,
        detect_format,
        read_trace,
    )

__all__ = [
    "FORMATS",
    "HASH_ALGOS",
    "ParsedRequests",
    "Trace",
    "TraceError",
    "TraceLineParser",
    "detect_format",
    "read_trace",
]


def __getattr__(name: str) -> object:
    if name in __all__ and name not in ("FORMATS", "HASH_ALGOS"):
        from kvset.formats import traces

        return getattr(traces, name)
    raise AttributeError(f"module 'kvset.formats' has no attribute {name!r}")
