"""vLLM log lines: request prompts (token ids), the periodic stats line, the KV cache size.

Line prefix (vllm/logger.py, `_FORMAT`), optionally behind the multiprocess prefix that names the
process (`(EngineCore_DP0 pid=123) `, `(APIServer pid=7) `, Ray's `(RayWorkerWrapper pid=9, ip=..) `)
and a `VLLM_LOGGING_PREFIX`:

    LEVEL MM-DD HH:MM:SS [file.py:123] message          (current)
    LEVEL MM-DD HH:MM:SS file.py:123] message           (early versions, no opening bracket)

Messages read here (format strings from vLLM's sources):

- vllm/entrypoints/logger.py, >= 0.12 at DEBUG (with --enable-log-requests):
  `Request %s details: prompt: %r, prompt_token_ids: %s, prompt_embeds shape: %s.`
- the same file up to 0.11 at INFO:
  `Received request %s: prompt: %r, params: %s, prompt_token_ids: %s, [prompt_embeds shape: %s, ]
  lora_request: %s[, prompt_adapter_request: %s].`
- newer INFO form `Received request %s: params: %s, lora_request: %s.` carries no token ids,
  except with --enable-log-request-prompts and no prompt text, where it ends in
  `, prompt_token_ids: [...]` (a preview, at most 512 ids unless --max-log-len is set).
- vllm/v1/metrics/loggers.py: `Engine %03d: Avg prompt throughput: %.1f tokens/s, ...,
  Running: %d reqs, Waiting: %d reqs, [Preemptions: %d, ]GPU KV cache usage: %.1f%%, Prefix cache
  hit rate: %.1f%%[, ...]` (hit rate = prefix-cache token hits over the last 1000 requests).
  The V0 engine logged `Avg prompt throughput: ... GPU KV cache usage: %.1f%%, CPU KV cache usage:
  %.1f%%.` and on its own line `Prefix cache hit rate: GPU: %.2f%%, CPU: %.2f%%` (block hits).
- vllm/v1/core/kv_cache_utils.py: `GPU KV cache size: %s tokens` (thousands separators; newer
  versions append `, Maximum concurrency for ...` on the same line). Block counts:
  `Engine %03d: vllm cache_config_info with initialization after num_gpu_blocks is: %d` (V1) and
  `# GPU blocks: %d, # CPU blocks: %d` (V0; `# cuda blocks:` in some versions).

--max-log-len N cuts the prompt to N characters and the token list to N ids *without a marker*.
A cut list is recognised when --max-log-len is known (`max_log_len=`), when the prompt text and
the id list were both cut to the same length (inferred, then remembered), by an explicit `...`,
or by a missing closing bracket (a line cut by a log shipper). Such a request is reported as
truncated, never as a short prompt.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import msgspec
import numpy as np

from kvset.formats.vllm_hash import block_keys
from kvset.units import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO

# Numeric patterns are re.ASCII: a Unicode \d also matches digits vLLM never writes (and int() takes).
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PROC_RE = re.compile(r"\s*\((?P<proc>[^()\s]+)\s+pid=(?P<pid>\d+)[^()]*\)\s*", re.ASCII)
HEAD_RE = re.compile(
    r"(?<![A-Za-z])(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+"
    r"(?P<mon>\d\d)-(?P<day>\d\d)\s+(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<frac>\d{1,6}))?\s+"
    r"\[?(?P<src>[^\]\s]*:\d+)\]\s?",
    re.ASCII,
)
HEAD_SEARCH_CHARS = 400  # the prefix sits near the start of a line; do not scan a huge prompt for it

DETAILS_RE = re.compile(r"Request (?P<id>.+?) details: prompt: ")
RECEIVED_PROMPT_RE = re.compile(r"Received request (?P<id>.+?): prompt: ")
RECEIVED_PARAMS_RE = re.compile(r"Received request (?P<id>.+?): params: ")
IDS_FIELD = "prompt_token_ids: "

STATS_MARK = "Avg prompt throughput:"
# Percentages are captured loosely (up to the '%') and then checked, so "1.2.3%" is a rejection
# that says so rather than a stats line without the field.
PERCENT_RE = re.compile(r"\d+(?:\.\d+)?", re.ASCII)
USAGE_RE = re.compile(r"GPU KV cache usage: (?P<v>[^%,\s]*)%")
HIT_RE = re.compile(r"Prefix cache hit rate: (?P<v>[^%,\s]*)%")
RUNNING_RE = re.compile(r"Running: (?P<v>\d+) reqs", re.ASCII)
WAITING_RE = re.compile(r"(?:Waiting|Pending): (?P<v>\d+) reqs", re.ASCII)
ENGINE_RE = re.compile(r"^\s*(?P<label>Engine \d+|\d+ Engines Aggregated)\s*:", re.ASCII)
V0_HIT_RE = re.compile(r"Prefix cache hit rate: GPU: (?P<gpu>[^%,\s]*)%, CPU: (?P<cpu>[^%,\s]*)%")
CACHE_SIZE_RE = re.compile(r"\b(?P<dev>[A-Z]PU) KV cache size: (?P<n>[0-9][0-9,]*) tokens", re.ASCII)
CACHE_SIZE_MARK = "KV cache size: "
NUM_BLOCKS_RE = re.compile(r"num_gpu_blocks is: (?P<n>\d+)", re.ASCII)
V0_BLOCKS_RE = re.compile(r"# (?:GPU|cuda|CUDA|gpu) blocks: (?P<n>\d+), # CPU blocks: (?P<cpu>\d+)", re.ASCII)
ESCAPE_RE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|.)")

# vLLM's INFO preview of prompt ids (--enable-log-request-prompts) is capped at this many ids.
INFO_PREVIEW_MAX_IDS = 512
# Inference of --max-log-len from "prompt chars == ids" needs a length no natural prompt hits.
MIN_INFERRED_CAP = 16
# Token ids are held as int64 (vLLM's own are < 2**31); a larger one is a damaged line.
MAX_TOKEN_ID = 2**63 - 1
# Counts (requests, blocks, tokens) longer than this are damage, and int() refuses 4300+ digits.
MAX_COUNT_DIGITS = 18

_ids_decoder = msgspec.json.Decoder(list[int])


class LogLineError(ValueError):
    """A line that is one of ours but cannot be parsed: a counted rejection, with a reason."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason + (f": {detail}" if detail else ""))
        self.reason = reason
        self.detail = detail


def _clip(text: str, n: int = 24) -> str:
    return text if len(text) <= n else text[:n] + "..."


def parse_count(digits: str) -> int:
    """An ASCII decimal count from a log line; LogLineError when it is absurdly long."""
    if len(digits) > MAX_COUNT_DIGITS:
        raise LogLineError("number out of range", _clip(digits))
    return int(digits)


@dataclass(frozen=True)
class LinePrefix:
    level: str | None
    month_day_time: tuple[int, int, int, int, int, float] | None  # MM, DD, hh, mm, ss, fraction
    proc: str | None  # e.g. "EngineCore_DP0", "APIServer"
    pid: int | None
    source: str | None  # "file.py:123"


@dataclass(frozen=True)
class RequestPrompt:
    """One logged prompt. token_ids is None when the line carried no ids."""

    request_id: str
    token_ids: np.ndarray | None
    form: str  # "details" (>= 0.12, DEBUG) | "received" (<= 0.11) | "preview" (INFO preview)
    truncated: str = ""  # why the id list is known or presumed cut ("" = complete)
    prompt_chars: int | None = None


@dataclass(frozen=True)
class RequestWithoutIds:
    """`Received request X: params: ...` (vLLM >= 0.12 at INFO): a request, but no token ids."""

    request_id: str


@dataclass(frozen=True)
class EngineStats:
    engine: str  # "Engine 000", "2 Engines Aggregated", or "" (V0)
    kv_usage: float | None  # 0..1
    prefix_hit_rate: float | None  # 0..1
    running: int | None
    waiting: int | None
    hit_rate_unit: str  # "tokens" (V1: last 1000 requests) | "blocks" (V0)


@dataclass(frozen=True)
class CacheCapacity:
    engine: str  # the process or engine label the line came from
    tokens: int | None = None
    blocks: int | None = None


Record = RequestPrompt | RequestWithoutIds | EngineStats | CacheCapacity


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def split_prefix(line: str) -> tuple[LinePrefix, str]:
    """The parsed prefix (fields None when absent) and the message after it."""
    proc = pid = None
    rest = line
    m = PROC_RE.match(line)
    if m:
        digits = m.group("pid")
        proc, pid = m.group("proc"), int(digits) if len(digits) <= MAX_COUNT_DIGITS else None
        rest = line[m.end() :]
    h = HEAD_RE.search(rest, 0, min(len(rest), HEAD_SEARCH_CHARS))
    if not h:
        return LinePrefix(None, None, proc, pid, None), rest
    frac = h.group("frac")
    mdt = (
        int(h.group("mon")),
        int(h.group("day")),
        int(h.group("h")),
        int(h.group("m")),
        int(h.group("s")),
        float("0." + frac) if frac else 0.0,
    )
    return LinePrefix(h.group("level"), mdt, proc, pid, h.group("src")), rest[h.end() :]


class LogClock:
    """Turns vLLM's year-less `MM-DD HH:MM:SS` (local time) into epoch seconds.

    The first stamp takes the year of `reference` (the file's mtime for a whole file, now for a
    live tail) and steps back a year if that would put it more than a day after the reference.
    Later stamps that jump back by more than half a year crossed New Year: the year advances.
    """

    def __init__(self, reference: float | None = None) -> None:
        self.reference = time.time() if reference is None else reference
        self._year: int | None = None
        self._last: float | None = None

    def _epoch(self, year: int, mdt: tuple[int, int, int, int, int, float]) -> float | None:
        mon, day, h, m, s, frac = mdt
        try:
            return time.mktime((year, mon, day, h, m, s, 0, 0, -1)) + frac
        except (OverflowError, ValueError):
            return None

    def to_epoch(self, mdt: tuple[int, int, int, int, int, float]) -> float | None:
        mon, day, h, m, s, _ = mdt
        if not (1 <= mon <= 12 and 1 <= day <= 31 and h < 24 and m < 60 and s < 62):
            return None
        if self._year is None:
            year = time.localtime(self.reference).tm_year
            t = self._epoch(year, mdt)
            if t is not None and t > self.reference + 86400:
                year -= 1
                t = self._epoch(year, mdt)
            self._year = year
        else:
            t = self._epoch(self._year, mdt)
            if t is not None and self._last is not None and t < self._last - 183 * 86400:
                self._year += 1
                t = self._epoch(self._year, mdt)
        if t is not None:
            self._last = t
        return t


def _repr_end(text: str, start: int) -> tuple[int, int] | None:
    """End index (exclusive) and character count of the Python str repr starting at `start`."""
    quote = text[start : start + 1]
    if quote not in ("'", '"'):
        return None
    i = start + 1
    while True:
        j = text.find(quote, i)
        if j < 0:
            return None
        k = j - 1
        while k > start and text[k] == "\\":
            k -= 1
        if (j - 1 - k) % 2 == 0:  # an even number of backslashes: the quote is not escaped
            body = text[start + 1 : j]
            chars = len(body)
            if "\\" in body:
                chars -= sum(len(e.group()) - 1 for e in ESCAPE_RE.finditer(body))
            return j + 1, chars
        i = j + 1


def _skip_prompt(msg: str, pos: int) -> tuple[int, int | None]:
    """Skip `%r` of the prompt at pos: (end index, decoded character count or None for None)."""
    if msg.startswith("None", pos):
        return pos + 4, None
    end = _repr_end(msg, pos)
    if end is None:
        raise LogLineError("prompt text is not a complete quoted string (line cut?)")
    return end


def parse_token_list(text: str, pos: int) -> tuple[np.ndarray | None, str]:
    """Parse the `%s` of a list of ints at pos: (ids or None, truncation reason or "")."""
    if text.startswith("None", pos):
        return None, ""
    if not text.startswith("[", pos):
        raise LogLineError("token id list does not start with '['", text[pos : pos + 20])
    close = text.find("]", pos)
    if close < 0:
        body = text[pos + 1 :].rstrip()
        if not body.endswith(","):
            body = body.rsplit(",", 1)[0] if "," in body else ""  # the last number may be cut too
        return _leading_ints(body), "no closing bracket (the line was cut)"
    body = text[pos : close + 1]
    try:
        values = _ids_decoder.decode(body)
    except msgspec.ValidationError as e:
        if "out of range" in str(e):  # an integer past what msgspec holds (> 2**64)
            raise LogLineError("token id out of range", str(e)) from None
        raise LogLineError("malformed token id list", body[:60]) from None
    except msgspec.DecodeError:
        if "..." in body or "\u2026" in body:
            return _leading_ints(body[1:]), "the list is elided with '...'"
        raise LogLineError("malformed token id list", body[:60]) from None
    try:
        ids = np.asarray(values, dtype=np.int64)
    except OverflowError:
        bad = next(v for v in values if not -MAX_TOKEN_ID - 1 <= v <= MAX_TOKEN_ID)
        raise LogLineError("token id out of range", _clip(str(bad))) from None
    if ids.size and int(ids.min()) < 0:
        raise LogLineError("negative token id", str(int(ids.min())))
    return ids, ""


def _leading_ints(body: str) -> np.ndarray:
    """The ids before the first thing that is not one (a cut number, '...', damage)."""
    out: list[int] = []
    for part in body.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit()):  # "²" is a digit to isdigit() but not to int()
            break
        if len(part) > len(str(MAX_TOKEN_ID)) or int(part) > MAX_TOKEN_ID:
            raise LogLineError("token id out of range", _clip(part))
        out.append(int(part))
    return np.asarray(out, dtype=np.int64)


def _parse_details(msg: str, m: re.Match[str]) -> RequestPrompt:
    end, chars = _skip_prompt(msg, m.end())
    sep = ", " + IDS_FIELD
    if not msg.startswith(sep, end):
        raise LogLineError("no prompt_token_ids after the prompt", msg[end : end + 40])
    ids, cut = parse_token_list(msg, end + len(sep))
    return RequestPrompt(m.group("id"), ids, "details", cut, chars)


def _parse_received_prompt(msg: str, m: re.Match[str]) -> RequestPrompt:
    end, chars = _skip_prompt(msg, m.end())
    # The params repr sits between the prompt and the ids; the fields after the ids are plain,
    # so the last occurrence of the field name is the real one.
    at = msg.rfind(", " + IDS_FIELD, end)
    if at < 0:
        raise LogLineError("no prompt_token_ids in a 'Received request ... prompt:' line")
    ids, cut = parse_token_list(msg, at + 2 + len(IDS_FIELD))
    return RequestPrompt(m.group("id"), ids, "received", cut, chars)


def _parse_received_params(msg: str, m: re.Match[str]) -> RequestPrompt | RequestWithoutIds:
    at = msg.rfind(", " + IDS_FIELD)
    if at < 0:
        return RequestWithoutIds(m.group("id"))
    ids, cut = parse_token_list(msg, at + 2 + len(IDS_FIELD))
    return RequestPrompt(m.group("id"), ids, "preview", cut, None)


def _percent(text: str, context: str) -> float:
    """0..1 from vLLM's `%.1f`/`%.2f` percentage text."""
    if not PERCENT_RE.fullmatch(text):
        raise LogLineError("bad percentage", _clip(context, 60))
    v = float(text)
    if not 0.0 <= v <= 100.0:
        raise LogLineError("percentage out of range", _clip(context, 60))
    return v / 100.0


def _pct(m: re.Match[str] | None) -> float | None:
    return None if m is None else _percent(m.group("v"), m.group())


def _int(m: re.Match[str] | None) -> int | None:
    return parse_count(m.group("v")) if m else None


def _parse_stats(msg: str) -> EngineStats:
    usage = USAGE_RE.search(msg)
    if usage is None:
        raise LogLineError("stats line without 'GPU KV cache usage: x%'")
    em = ENGINE_RE.match(msg)
    hit = HIT_RE.search(msg)
    return EngineStats(
        engine=em.group("label") if em else "",
        kv_usage=_pct(usage),
        prefix_hit_rate=_pct(hit),
        running=_int(RUNNING_RE.search(msg)),
        waiting=_int(WAITING_RE.search(msg)),
        hit_rate_unit="tokens" if em else "blocks",
    )


def parse_message(msg: str, prefix: LinePrefix | None = None) -> Record | None:
    """Classify and parse one message. None: not a line we read. LogLineError: ours but broken."""
    head = msg[:200]
    if " details: prompt: " in head:
        m = DETAILS_RE.match(msg)
        if m:
            return _parse_details(msg, m)
    if head.startswith("Received request "):
        m = RECEIVED_PROMPT_RE.match(msg)
        if m:
            return _parse_received_prompt(msg, m)
        m = RECEIVED_PARAMS_RE.match(msg)
        if m:
            return _parse_received_params(msg, m)
        raise LogLineError("unrecognised 'Received request' layout", head[:60])
    if STATS_MARK in head:
        return _parse_stats(msg)
    if head.startswith("Prefix cache hit rate: GPU:"):
        m = V0_HIT_RE.match(msg)
        if not m:
            raise LogLineError("malformed V0 prefix cache hit rate line", head[:60])
        return EngineStats("", None, _percent(m.group("gpu"), m.group()), None, None, "blocks")
    proc = (prefix.proc if prefix else None) or ""
    if CACHE_SIZE_MARK in head:
        m = CACHE_SIZE_RE.search(msg)
        if m:
            return CacheCapacity(proc, tokens=parse_count(m.group("n").replace(",", "")))
        if "tokens" in head:
            raise LogLineError("malformed KV cache size line", head[:80])
        return None
    if "num_gpu_blocks is: " in head:
        m = NUM_BLOCKS_RE.search(msg)
        if not m:
            raise LogLineError("malformed num_gpu_blocks line", head[:80])
        em = ENGINE_RE.match(msg)
        return CacheCapacity(em.group("label") if em else proc, blocks=parse_count(m.group("n")))
    if " blocks: " in head and "# CPU blocks: " in head:
        m = V0_BLOCKS_RE.search(msg)
        if m:
            return CacheCapacity(proc, blocks=parse_count(m.group("n")))
    return None


def parse_line(line: str) -> tuple[LinePrefix, Record | None]:
    prefix, msg = split_prefix(strip_ansi(line))
    return prefix, parse_message(msg, prefix)


class PromptTruncationJudge:
    """Decides whether a parsed id list is complete, learning vLLM's --max-log-len when unset."""

    def __init__(self, max_log_len: int | None = None) -> None:
        self.max_log_len = max_log_len
        self.inferred_cap: int | None = None
        self._cap_sightings: dict[int, int] = {}

    def judge(self, req: RequestPrompt) -> str:
        """The truncation reason ("" if the list is taken as complete)."""
        if req.truncated:
            return req.truncated
        n = 0 if req.token_ids is None else len(req.token_ids)
        if self.max_log_len is not None:
            if n >= self.max_log_len:
                return f"cut at --max-log-len {self.max_log_len}"
            return ""
        if req.form == "preview" and n >= INFO_PREVIEW_MAX_IDS:
            return f"INFO preview capped at {INFO_PREVIEW_MAX_IDS} ids"
        if req.prompt_chars is not None and req.prompt_chars == n and n >= MIN_INFERRED_CAP:
            # Prompt text and ids cut to the same length: vLLM ran with --max-log-len n. One
            # sighting judges this request; a second one makes n the cap for id-only requests too.
            self._cap_sightings[n] = self._cap_sightings.get(n, 0) + 1
            if self._cap_sightings[n] >= 2:
                self.inferred_cap = n
            return f"cut at --max-log-len {n} (inferred: prompt text and ids both {n} long)"
        if self.inferred_cap is not None and n == self.inferred_cap:
            return f"cut at --max-log-len {n} (inferred earlier)"
        return ""


def prompt_block_keys(
    token_ids: np.ndarray,
    block_size: int = DEFAULT_BLOCK_SIZE,
    hash_algo: str = DEFAULT_HASH_ALGO,
    python_hash_seed: str | None = None,
) -> np.ndarray:
    """uint64 keys of the prompt's full blocks, exactly as vLLM's prefix cache hashes them."""
    return block_keys(token_ids.tolist(), block_size, hash_algo, python_hash_seed=python_hash_seed)
