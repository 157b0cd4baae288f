"""`--metrics URL`: poll an engine's Prometheus endpoint for its operating point.

Yields EngineReadings only (capacity, measured token hit rate per window, KV usage), never block
accesses. Each poll runs in a short-lived helper thread so the source still reports its health
every IDLE_TICK while a slow engine holds the request. A poll has `timeout` seconds in all, not per
read: an endpoint that trickles its body byte by byte is a timeout too. A poll past its deadline
is abandoned and its thread told to stop; no new poll starts until that thread has ended, so
there is never more than one request out. The helper thread also parses the body, under the same
deadline, and reads at most `max_body_bytes` (16 MiB by default; a /metrics page is a few hundred
KiB): a larger answer is refused when its Content-Length says so or when the stream passes the
limit, so a runaway endpoint costs neither memory nor a parse of minutes. Failures (timeout,
connection refused, HTTP errors, a cut, oversized or unparsable body, a page that is not metrics)
back off exponentially up to `max_backoff`; meanwhile the last good reading is repeated with
stale=True and the health says why and when the next try is.

A URL without a scheme (`127.0.0.1:8000`) is taken as http://, and one without a path gets the
engines' /metrics; the health says so.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx

from kvset.engine.metrics_tracker import MetricsTracker
from kvset.engine.prometheus import (
    DEFAULT_MAX_BODY_BYTES,
    NOT_METRICS_HINT,
    TOO_SLOW_TO_PARSE,
    CacheCounters,
    MetricsError,
    counters_from_text,
)
from kvset.quantities import format_bytes
from kvset.rejects import RejectCounter
from kvset.sources.base import IDLE_TICK, Source
from kvset.sources.clock import REAL_CLOCK, Clock
from kvset.types import EngineReading, SourceHealth, SourceUpdate, TimelineEvent

USER_AGENT = "kvset-top (metrics poller)"
DEFAULT_PATH = "/metrics"


def metrics_url(text: str) -> tuple[str, str | None]:
    """The URL to poll for `text`, and what was assumed to get it (None: nothing).

    "127.0.0.1:8000" -> "http://127.0.0.1:8000/metrics"; raises ValueError for a scheme other than
    http(s) or a URL without a host, with a one-line reason.
    """
    given = text.strip()
    url = given if "://" in given else f"http://{given}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ValueError(f"--metrics {given!r} is not a usable URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"--metrics {given!r}: only http:// and https:// endpoints can be polled")
    if not parts.hostname:
        raise ValueError(f"--metrics {given!r} names no host, e.g. http://127.0.0.1:8000/metrics")
    if parts.path in ("", "/"):
        url = parts._replace(path=DEFAULT_PATH).geturl()
    if url == given:
        return url, None
    return url, f"--metrics {given} read as {url}"


def describe_http_error(exc: BaseException) -> str:
    """A short reason a person understands: 'connection refused', 'timeout', 'HTTP 500'."""
    if isinstance(exc, httpx.HTTPStatusError):
        code = exc.response.status_code
        return f"HTTP {code}" + (f" (not found: {NOT_METRICS_HINT})" if code == 404 else "")
    if isinstance(exc, PollDeadlineExceeded):
        return f"timeout ({exc})"
    if isinstance(exc, BodyTooLarge | MetricsError):
        return str(exc)
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        if "refused" in text:
            return "connection refused"
        if "name" in text and ("resolve" in text or "known" in text):
            return "host not found"
        return "cannot connect"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "connection closed mid-response"
    if isinstance(exc, httpx.HTTPError):
        return type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


class PollDeadlineExceeded(Exception):
    """The whole answer did not arrive within the poll's overall deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no complete response in {seconds:g} s")


class BodyTooLarge(Exception):
    """The response is larger than the source reads."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        said = f" (it announced {format_bytes(size)})" if size is not None else ""
        super().__init__(
            f"response larger than {format_bytes(limit, 0)}{said}: not read (see --metrics-max-bytes)"
        )


class _Poll:
    """One GET in a helper thread, and the parse of its body; the counters or the exception land here.

    The body is streamed so the thread can check the overall deadline (and a cancel from the
    source) between pieces and stop at `max_bytes`; httpx's own timeout bounds each single read
    only. The parse asks the same deadline every few thousand lines.
    """

    def __init__(
        self, client: httpx.Client, url: str, timeout: float, max_bytes: int, clock: Clock = REAL_CLOCK
    ) -> None:
        self.clock = clock
        self.done = threading.Event()
        self.cancel = threading.Event()
        self.counters: CacheCounters | None = None
        self.error: BaseException | None = None
        self.parsing = False  # the whole body arrived and is being parsed
        self.started = self.clock.wall()
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.deadline = self.clock.monotonic() + timeout
        self._thread = threading.Thread(
            target=self._run, args=(client, url), daemon=True, name="kvset-metrics"
        )
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _give_up(self) -> bool:
        return self.cancel.is_set() or self.clock.monotonic() > self.deadline

    def _run(self, client: httpx.Client, url: str) -> None:
        try:
            with client.stream("GET", url) as resp:
                resp.raise_for_status()
                if "html" in resp.headers.get("content-type", "").lower():
                    raise MetricsError(
                        f"not a Prometheus metrics page (the server sent HTML): {NOT_METRICS_HINT}"
                    )
                announced = resp.headers.get("content-length", "")
                if announced.isdigit() and int(announced) > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes, int(announced))
                parts: list[bytes] = []
                size = 0
                for piece in resp.iter_bytes():
                    size += len(piece)
                    if size > self.max_bytes:
                        raise BodyTooLarge(self.max_bytes)
                    parts.append(piece)
                    if self._give_up():
                        raise PollDeadlineExceeded(self.timeout)
            text = b"".join(parts).decode("utf-8", errors="replace")  # the exposition format is UTF-8
            self.parsing = True
            self.counters = counters_from_text(text, self._give_up)
        except BaseException as e:  # reported to the source, never raised in this thread
            self.error = e
        finally:
            self.done.set()


class MetricsSource(Source):
    """Delivers no block accesses: only the engine's readings (its pools in its own blocks)."""

    units = None
    kind = "metrics"

    def __init__(
        self,
        url: str,
        interval: float = 1.0,
        timeout: float = 2.0,
        max_backoff: float = 30.0,
        window_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        """Raises ValueError for a URL that cannot be polled (see metrics_url)."""
        self.clock = clock
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.url, self.url_note = metrics_url(url)
        self.interval = interval
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self.max_backoff = max(max_backoff, interval)
        self.name = f"metrics {self.url}"
        self.address = self.url
        self.tracker = MetricsTracker(window_s=window_s, label="/metrics")
        self.rejects = RejectCounter()
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout), headers={"User-Agent": USER_AGENT}, transport=transport
        )
        self.polls = 0
        self.good_polls = 0
        self.failures = 0  # consecutive
        self.last_good: EngineReading | None = None
        self.last_data_at: float | None = None
        self.last_error: str | None = None
        self._next_at = 0.0
        self._abandoned: _Poll | None = None  # a poll past its deadline whose thread has not ended yet

    # -- the Source interface -------------------------------------------------------------

    def updates(self, stop: threading.Event) -> Iterator[SourceUpdate]:
        poll: _Poll | None = None
        while not stop.is_set():
            now = self.clock.wall()
            if poll is None and now >= self._next_at and not self._abandoned_running():
                poll = _Poll(self._client, self.url, self.timeout, self.max_body_bytes, self.clock)
            if poll is not None:
                self.clock.wait(poll.done, max(0.0, min(IDLE_TICK, poll.deadline - self.clock.monotonic())))
                if poll.done.is_set():
                    update = self._finish(poll)
                    poll = None
                    yield update
                    continue
                if self.clock.monotonic() >= poll.deadline:
                    # The helper stops at its next piece of body or read timeout; until then no
                    # new poll starts (see _abandoned_running).
                    poll.cancel.set()
                    self._abandoned = poll
                    poll = None
                    self.polls += 1
                    if self._abandoned.parsing:  # the body came, its parse is what took too long
                        yield self._failed(TOO_SLOW_TO_PARSE, self.clock.wall(), counted=True)
                    else:
                        yield self._failed(
                            describe_http_error(PollDeadlineExceeded(self.timeout)),
                            self.clock.wall(),
                            counted=False,
                        )
                    continue
                yield SourceUpdate(health=self.health(waiting_for_response=True))
            else:
                wait = max(0.0, self._next_at - now) if not self._abandoned_running() else IDLE_TICK
                self.clock.wait(stop, min(IDLE_TICK, wait))
                yield SourceUpdate(health=self.health())

    def _abandoned_running(self) -> bool:
        if self._abandoned is not None and not self._abandoned.running:
            self._abandoned = None
        return self._abandoned is not None

    def close(self) -> None:
        self._client.close()

    # -- one poll -------------------------------------------------------------------------

    def _finish(self, poll: _Poll) -> SourceUpdate:
        at = self.clock.wall()
        self.polls += 1
        events: tuple[TimelineEvent, ...] = ()
        error = poll.error
        if error is not None:
            if isinstance(error, httpx.HTTPError | PollDeadlineExceeded):
                # A body cut mid-transfer is a rejected message; the rest is the endpoint's health.
                cut = isinstance(error, httpx.RemoteProtocolError)
                return self._failed(describe_http_error(error), at, counted=cut)
            if isinstance(error, MetricsError):
                return self._failed(
                    str(error), at, counted=True, counted_as=error.reason, detail=error.detail
                )
            if isinstance(error, BodyTooLarge):
                return self._failed(str(error), at, counted=True)
            # a bug on odd input must cost one poll, never the source
            return self._failed(f"unusable metrics ({type(error).__name__})", at, counted=True)
        assert poll.counters is not None
        try:
            result = self.tracker.update_counters(poll.counters, at)
        except Exception as e:  # a bug on odd input must cost one poll, never the source
            return self._failed(f"unusable metrics ({type(e).__name__})", at, counted=True)
        if result.error is not None:
            return self._failed(result.error, at, counted=True)
        recovered = self.failures > 0
        self.failures = 0
        self.last_error = None
        self.good_polls += 1
        self.last_data_at = at
        self.last_good = result.reading
        self._next_at = poll.started + self.interval
        events = tuple(result.events)
        if recovered:
            events += (TimelineEvent(at, "source-recovered", f"{self.url} answers again"),)
        return SourceUpdate(health=self.health(), engine=result.reading, events=events)

    def _failed(
        self, reason: str, at: float, counted: bool, counted_as: str | None = None, detail: str = ""
    ) -> SourceUpdate:
        """Back off, keep the last good reading marked stale, and say why. A counted failure is
        counted by `counted_as` (the reason without what it quotes of the body, which is `detail`)."""
        if counted:
            when = f"poll {self.polls} at {time.strftime('%H:%M:%S', time.localtime(at))}"
            self.rejects.reject(counted_as or reason, f"{when}: {detail}" if detail else when)
        self.failures += 1
        self.last_error = reason
        self._next_at = at + self.backoff()
        stale = dataclasses.replace(self.last_good, stale=True) if self.last_good is not None else None
        events: tuple[TimelineEvent, ...] = ()
        if self.failures == 1:
            events = (TimelineEvent(at, "source-down", f"{self.url}: {reason}"),)
        return SourceUpdate(health=self.health(), engine=stale, events=events)

    def backoff(self) -> float:
        """Delay before the next try after `failures` consecutive failures: interval x 2^(n-1), capped."""
        if self.failures <= 0:
            return self.interval
        return min(self.interval * (2 ** min(self.failures - 1, 30)), self.max_backoff)

    def health(self, waiting_for_response: bool = False) -> SourceHealth:
        now = self.clock.wall()
        retry_in = None
        if self.last_error is not None:
            retry_in = max(0.0, self._next_at - now)
            state = f"down: {self.last_error}"
            connected = False
        elif self.good_polls == 0:
            state = "connecting" if waiting_for_response else "waiting for first poll"
            connected = False
        else:
            state = "connected"
            connected = True
        parts = self.tracker.health_parts()
        notes = [self.url_note] if self.url_note else []
        notes += parts.notes
        if self.last_good is not None and self.last_error is not None:
            notes.append("showing the last good values (stale)")
        details = (
            ("polls", str(self.polls)),
            ("good polls", str(self.good_polls)),
            ("consecutive failures", str(self.failures)),
            *parts.details,
            ("interval", f"{self.interval:g} s"),
        )
        return SourceHealth(
            source=self.name,
            kind=self.kind,
            connected=connected,
            state=state,
            last_data_at=self.last_data_at,
            received=self.good_polls,
            accesses=0,
            rejected=self.rejects.summary(),
            notes=tuple(notes),
            details=details,
            retry_in=retry_in,
        )
