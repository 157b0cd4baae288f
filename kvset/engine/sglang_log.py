"""SGLang log lines: prefill batches (the engine's own prefix-cache hit rate) and the pool size.

Line prefix (sglang/srt/utils `configure_logger`): `[YYYY-MM-DD HH:MM:SS<ranks>] message`, where
<ranks> is empty for a single GPU and otherwise e.g. ` TP0`, ` DP1 TP4`, ` PP0 TP0 EP0`.

Scheduler messages read here (scheduler.py, later scheduler_metrics_mixin.py `log_prefill_stats`):

    Prefill batch. #new-seq: N, #new-token: N, #cached-token: N, cache hit rate: x%, token usage: f, ...
    Prefill batch(mixed #running-req: N). #new-seq: ...                       (older, chunked mixing)
    Prefill batch, #new-seq: N, #new-token: N, #cached-token: N, token usage: f, #running-req: N, ...
    Prefill batch [iter], #new-seq: ...                                       (SGLANG_LOG_FORWARD_ITERS)
    ... full token usage: f, swa token usage: f, ...                          (hybrid SWA models)
    ... full token usage: f, mamba usage: f, ...                              (hybrid linear/SSM models)

#new-token counts the tokens prefilled (misses) and #cached-token the prefix hits, so one batch's
hit rate is cached / (new + cached). A request prefilled in chunks appears in several batches;
its cached prefix is counted in the first chunk only, which is what the engine's own metric does.
Capacity: `max_total_num_tokens=N, ...` at start (tokens); `page_size=N` from the ServerArgs dump.
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass

from kvset.engine.vllm_log import LogLineError, parse_count, strip_ansi

# Numeric patterns are re.ASCII: a Unicode \d also matches digits SGLang never writes.
PREFIX_RE = re.compile(
    r"\[(?P<date>\d{4}-\d\d-\d\d) (?P<time>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,6}))?"
    r"(?P<ranks>(?: [A-Za-z_]+\d*)*)\]\s?",
    re.ASCII,
)
PREFILL_MARK = "Prefill batch"
NEW_SEQ_RE = re.compile(r"#new-seq: (?P<v>\d+)", re.ASCII)
NEW_TOKEN_RE = re.compile(r"#new-token: (?P<v>\d+)", re.ASCII)
CACHED_TOKEN_RE = re.compile(r"#cached-token: (?P<v>\d+)", re.ASCII)
# Captured up to the next separator and then checked, so "0.1.2" is a rejection that says so.
USAGE_RE = re.compile(r"(?:full )?(?:token|page) usage: (?P<v>[^,\s]*)")
USAGE_VALUE_RE = re.compile(r"\d+(?:\.\d+)?", re.ASCII)
RUNNING_RE = re.compile(r"#running-req: (?P<v>\d+)", re.ASCII)
QUEUE_RE = re.compile(r"#queue-req: (?P<v>\d+)", re.ASCII)
MAX_TOKENS_RE = re.compile(r"max_total_num_tokens=(?P<v>\d+)", re.ASCII)
PAGE_SIZE_RE = re.compile(r"\bpage_size=(?P<v>\d+)", re.ASCII)


@dataclass(frozen=True)
class SglangPrefix:
    timestamp: float | None  # epoch seconds (the log's local time)
    ranks: str  # "TP0", "DP1 TP4", "" for a single GPU


@dataclass(frozen=True)
class PrefillBatch:
    ranks: str
    new_seqs: int
    new_tokens: int  # prefilled (missed) tokens
    cached_tokens: int  # prefix-cache hits
    token_usage: float | None  # 0..1 (full-attention pool for hybrid models)
    running: int | None
    queued: int | None

    @property
    def hit_rate(self) -> float | None:
        total = self.new_tokens + self.cached_tokens
        return self.cached_tokens / total if total else None


@dataclass(frozen=True)
class PoolSize:
    ranks: str
    max_total_tokens: int | None = None
    page_size: int | None = None


SglangRecord = PrefillBatch | PoolSize


def split_prefix(line: str) -> tuple[SglangPrefix | None, str]:
    m = PREFIX_RE.match(line)
    if not m:
        return None, line
    try:
        t = time.strptime(f"{m.group('date')} {m.group('time')}", "%Y-%m-%d %H:%M:%S")
        seconds = time.mktime(t)
        if m.group("frac"):
            seconds += float("0." + m.group("frac"))
        ts: float | None = seconds
    except (ValueError, OverflowError):
        ts = None
    return SglangPrefix(ts, m.group("ranks").strip()), line[m.end() :]


def _need(rx: re.Pattern[str], msg: str, what: str) -> int:
    m = rx.search(msg)
    if m is None:
        raise LogLineError(f"prefill line without {what}")
    return parse_count(m.group("v"))


def _opt_int(rx: re.Pattern[str], msg: str) -> int | None:
    m = rx.search(msg)
    return parse_count(m.group("v")) if m else None


def _usage(msg: str) -> float | None:
    m = USAGE_RE.search(msg)
    if m is None:
        return None
    if not USAGE_VALUE_RE.fullmatch(m.group("v")):
        raise LogLineError("bad token usage", m.group()[:60])
    usage = float(m.group("v"))
    if not 0.0 <= usage <= 1.5:
        raise LogLineError("token usage out of range", m.group()[:60])
    return usage


def parse_message(msg: str, ranks: str = "") -> SglangRecord | None:
    """Classify and parse one message. None: not ours. LogLineError: ours but malformed."""
    if msg.startswith(PREFILL_MARK):
        usage = _usage(msg)
        return PrefillBatch(
            ranks=ranks,
            new_seqs=_need(NEW_SEQ_RE, msg, "#new-seq"),
            new_tokens=_need(NEW_TOKEN_RE, msg, "#new-token"),
            cached_tokens=_need(CACHED_TOKEN_RE, msg, "#cached-token"),
            token_usage=usage,
            running=_opt_int(RUNNING_RE, msg),
            queued=_opt_int(QUEUE_RE, msg),
        )
    if "max_total_num_tokens=" in msg:
        m = MAX_TOKENS_RE.search(msg)
        if m is None:
            raise LogLineError("malformed max_total_num_tokens line", msg[:80])
        return PoolSize(ranks, max_total_tokens=parse_count(m.group("v")))
    if "ServerArgs(" in msg:
        m = PAGE_SIZE_RE.search(msg)
        if m:
            return PoolSize(ranks, page_size=parse_count(m.group("v")))
    return None


def parse_line(line: str) -> tuple[SglangPrefix | None, SglangRecord | None]:
    prefix, msg = split_prefix(strip_ansi(line))
    return prefix, parse_message(msg, prefix.ranks if prefix else "")


def pool_key(ranks: str) -> str:
    """The KV pool a rank label belongs to: data-parallel ranks have their own pools; the
    tensor/pipeline/expert-parallel shards of one pool ("TP0", "TP1", ...) share it."""
    return " ".join(p for p in ranks.split() if p.startswith("DP"))


class CachedTokenCounter:
    """The engine's own token hit rate from prefill batches: per batch, cumulative, and windowed.

    Counts are kept per pool (each data-parallel rank has its own cache) and summed; when several
    shards of one pool log the same batch, only the first shard seen is counted.
    """

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self.new_tokens = 0
        self.cached_tokens = 0
        self.batches = 0
        self.per_pool: dict[str, tuple[int, int]] = {}
        self._recent: deque[tuple[float, int, int]] = deque()
        self.last_batch_rate: float | None = None
        self.duplicates = 0
        self._shard: dict[str, str] = {}  # pool -> the shard label whose lines are counted

    def add(self, batch: PrefillBatch, at: float) -> bool:
        """Count a batch; False if it is another shard's copy of a batch already counted."""
        pool = pool_key(batch.ranks)
        first = self._shard.setdefault(pool, batch.ranks)
        if batch.ranks != first:
            self.duplicates += 1
            return False
        self.batches += 1
        self.new_tokens += batch.new_tokens
        self.cached_tokens += batch.cached_tokens
        n, c = self.per_pool.get(pool, (0, 0))
        self.per_pool[pool] = (n + batch.new_tokens, c + batch.cached_tokens)
        self._recent.append((at, batch.new_tokens, batch.cached_tokens))
        self.last_batch_rate = batch.hit_rate
        self._trim(at)
        return True

    def _trim(self, now: float) -> None:
        while self._recent and self._recent[0][0] < now - self.window_s:
            self._recent.popleft()

    @property
    def cumulative_rate(self) -> float | None:
        total = self.new_tokens + self.cached_tokens
        return self.cached_tokens / total if total else None

    def window_rate(self, now: float | None = None) -> tuple[float | None, float]:
        """(hit rate over the last window_s seconds of batches, the span it covers in seconds)."""
        if now is not None:
            self._trim(now)
        if not self._recent:
            return None, 0.0
        new = sum(r[1] for r in self._recent)
        cached = sum(r[2] for r in self._recent)
        span = (now if now is not None else self._recent[-1][0]) - self._recent[0][0]
        total = new + cached
        return (cached / total if total else None), max(span, 0.0)
