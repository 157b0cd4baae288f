"""Trace file formats: bytes -> requests -> block keys (numpy uint64 batches)."""

from kvset.formats.traces import (
    FORMATS,
    ParsedRequests,
    Trace,
    TraceError,
    TraceLineParser,
    detect_format,
    read_trace,
)

__all__ = [
    "FORMATS",
    "ParsedRequests",
    "Trace",
    "TraceError",
    "TraceLineParser",
    "detect_format",
    "read_trace",
]
