"""Peak resident memory a stretch of code adds to the process.

Linux lets a process reset its peak-RSS mark (`echo 5 > /proc/self/clear_refs`), so the peak
can be measured from a baseline taken after the trace is loaded and the JIT is warm. Where
that is not allowed, the fallback is ru_maxrss after minus ru_maxrss before (which can only
under-count when an earlier peak, e.g. during compilation, was higher than the baseline).
"""

from __future__ import annotations

import resource
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _maxrss_kib() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux


class PeakMemory:
    """start(); ...work...; delta_bytes() -> peak RSS during the work minus RSS at start."""

    def __init__(self) -> None:
        self.method = ""
        self._baseline_kib = 0

    def start(self) -> None:
        try:
            _CLEAR_REFS.write_text("5")
            rss = _status_kib("VmRSS")
            if rss is None:
                raise OSError("no VmRSS")
            self.method = "VmHWM after a peak reset, minus VmRSS at the start"
            self._baseline_kib = rss
        except OSError:
            self.method = "ru_maxrss after minus ru_maxrss before"
            self._baseline_kib = _maxrss_kib()

    def delta_bytes(self) -> int:
        peak = _status_kib("VmHWM") if self.method.startswith("VmHWM") else None
        if peak is None:
            peak = _maxrss_kib()
        return max(0, peak - self._baseline_kib) * 1024
