"""The engine's operating point over time, from successive polls of its Prometheus `/metrics`.

The measured hit rate is Δhits / Δqueries over the polls of the last `window_s` seconds. A counter
that goes down means the engine restarted: deltas restart from the new values and an
`engine-reset` event is returned. A poll that kvset.engine.prometheus cannot use, or that lacks the
cache counters it had before, is rejected with its reason; the caller keeps its last good values.

`MetricsTracker` is pure: it is given each response body as text (or the counters already parsed
from it, so that a caller can parse under its own deadline) with the time of the poll, and never
opens a connection (the source polls).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kvset.engine.prometheus import CacheCounters, MetricsError, counters_from_text
from kvset.engine.tracker_output import HealthParts
from kvset.types import EngineReading, TimelineEvent

RESTART_TOLERANCE = 1e-6


@dataclass
class TrackResult:
    reading: EngineReading | None = None
    events: list[TimelineEvent] = field(default_factory=list)
    error: str | None = None  # the poll was rejected; keep the last good values


class MetricsTracker:
    """Turns successive polls into EngineReadings: windowed hit rate from counter deltas."""

    def __init__(self, window_s: float = 60.0, label: str = "metrics", accept_missing_after: int = 3) -> None:
        self.window_s = window_s
        self.label = label
        self.accept_missing_after = accept_missing_after
        self._prev: CacheCounters | None = None
        self._prev_at: float | None = None
        self._base: tuple[float, float, float] | None = None  # (at, queries, hits) since start/reset
        self._base_requests: float | None = None  # finished requests at the start/reset
        self._base_sources: dict[str, float] = {}  # cached tokens by cache_source at the start/reset
        self._deltas: deque[tuple[float, float, float, float]] = deque()  # (t0, t1, dq, dh)
        self._missing_streak = 0
        self._describe: tuple[str, ...] = ()  # what the last good poll summed or assumed
        self.polls = 0
        self.resets = 0

    def update(self, text: str, at: float) -> TrackResult:
        try:
            now = counters_from_text(text)
        except MetricsError as e:
            return TrackResult(error=str(e))
        return self.update_counters(now, at)

    def update_counters(self, now: CacheCounters, at: float) -> TrackResult:
        """One poll already parsed (kvset.engine.prometheus.counters_from_text)."""
        prev = self._prev
        if prev is not None and prev.queries and not now.queries:
            # The counters were there before: most likely a half-written body cut at a line end.
            self._missing_streak += 1
            if self._missing_streak < self.accept_missing_after:
                return TrackResult(error="incomplete response (the prefix-cache counters are missing)")
        self._missing_streak = 0
        self.polls += 1
        events: list[TimelineEvent] = []
        q_sum = sum(now.queries.values())
        h_sum = sum(now.hits.values())
        if prev is None or prev.engine != now.engine:
            self._reset_window(at, q_sum, h_sum, now.requests_finished, now.hits_by_source)
        elif self._went_down(prev, now):
            self.resets += 1
            events.append(
                TimelineEvent(at, "engine-reset", f"{self.label}: counters went down (engine restarted)")
            )
            self._reset_window(at, q_sum, h_sum, now.requests_finished, now.hits_by_source)
        else:
            dq = sum(v - prev.queries[k] for k, v in now.queries.items() if k in prev.queries)
            dh = sum(v - prev.hits[k] for k, v in now.hits.items() if k in prev.hits)
            assert self._prev_at is not None
            self._deltas.append((self._prev_at, at, dq, dh))
            while self._deltas and self._deltas[0][1] <= at - self.window_s:
                self._deltas.popleft()
        self._prev, self._prev_at = now, at
        self._describe = now.describe
        return TrackResult(reading=self._reading(now, at), events=events)

    def _went_down(self, prev: CacheCounters, now: CacheCounters) -> bool:
        for series_prev, series_now in ((prev.queries, now.queries), (prev.hits, now.hits)):
            for k, v in series_now.items():
                if k in series_prev and v < series_prev[k] - RESTART_TOLERANCE:
                    return True
        return False

    def _reset_window(
        self, at: float, q: float, h: float, requests: float | None, sources: tuple[tuple[str, float], ...]
    ) -> None:
        self._deltas.clear()
        self._base = (at, q, h)
        self._base_requests = requests
        self._base_sources = dict(sources)

    def window_rate(self) -> tuple[float | None, float | None]:
        dq = sum(d[2] for d in self._deltas)
        dh = sum(d[3] for d in self._deltas)
        if dq > 0:
            return min(max(dh / dq, 0.0), 1.0), self._deltas[-1][1] - self._deltas[0][0]
        return None, None

    def since_start_rate(self, now: CacheCounters, at: float) -> tuple[float | None, float | None]:
        if self._base is None:
            return None, None
        t0, q0, h0 = self._base
        dq = sum(now.queries.values()) - q0
        dh = sum(now.hits.values()) - h0
        if dq > 0:
            return min(max(dh / dq, 0.0), 1.0), at - t0
        return None, None

    def _reading(self, now: CacheCounters, at: float) -> EngineReading:
        rate, span = self.window_rate()
        if rate is None:
            # No prompt tokens in the window (idle): the rate since start, with its own span.
            rate, span = self.since_start_rate(now, at)
        since = self._since_start(now)
        return EngineReading(
            at=at,
            pools=now.pools,
            block_size=now.block_size,
            token_hit_rate=rate,
            hit_rate_window_s=span,
            kv_usage=now.kv_usage,
            running_requests=now.running,
            waiting_requests=now.waiting,
            queries_since_start=since[0],
            hits_since_start=since[1],
            requests_since_start=since[2],
            tier_hits_since_start=self._sources_since_start(now),
            label=f"{now.engine} {self.label}",
        )

    def _since_start(self, now: CacheCounters) -> tuple[float | None, float | None, float | None]:
        """Query tokens, hit tokens and finished requests since the first poll (or the restart)."""
        if self._base is None:
            return None, None, None
        _, q0, h0 = self._base
        requests = None
        if now.requests_finished is not None and self._base_requests is not None:
            requests = max(0.0, now.requests_finished - self._base_requests)
        return max(0.0, sum(now.queries.values()) - q0), max(0.0, sum(now.hits.values()) - h0), requests

    def _sources_since_start(self, now: CacheCounters) -> tuple[tuple[str, float], ...] | None:
        """Cached tokens by cache_source since the first poll (or the restart); a source that appears
        later counts from zero."""
        if not now.hits_by_source:
            return None
        return tuple((src, max(0.0, v - self._base_sources.get(src, 0.0))) for src, v in now.hits_by_source)

    def health_parts(self) -> HealthParts:
        return HealthParts(notes=self._describe, details=(("engine restarts seen", str(self.resets)),))
