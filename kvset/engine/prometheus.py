"""The engine's operating point from its Prometheus `/metrics` text.

Parsed with prometheus_client's own text parser. Names read (vLLM labels: model_name, engine):

vLLM   vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total   (counters, tokens)
       vllm:kv_cache_usage_perc (0..1), vllm:num_requests_running, vllm:num_requests_waiting
       vllm:cache_config_info (gauge 1; labels block_size, num_gpu_blocks, ...)
       deprecated (0.9 .. 0.11): vllm:gpu_prefix_cache_queries_total, vllm:gpu_prefix_cache_hits_total,
       vllm:gpu_cache_usage_perc; V0 engine: vllm:gpu_prefix_cache_hit_rate (a block hit rate gauge)
SGLang sglang:cached_tokens_total, sglang:prompt_tokens_total (counters, tokens; cached tokens may
       carry cache_source=device|host|storage_*: only device hits count for the GPU pool, and each
       source's sum is kept for the Tiers figure, HiCache's tiers),
       sglang:cache_hit_rate (gauge), sglang:token_usage, sglang:max_total_num_tokens,
       sglang:page_size, sglang:num_running_reqs

How several label sets are combined (data-parallel engines, several models behind one endpoint):
counters are summed over every series present in both polls, so the hit rate is token-weighted
over all engines; each engine's pool is kept on its own, in its own blocks (vLLM: one
cache_config_info per `engine`, the data-parallel rank; SGLang: series that differ only in
tp_rank/pp_rank describe the same pool and count once); usage is the capacity-weighted mean.
`describe` in the result says what was summed.

A response that is empty, does not end in a newline (cut mid-body), is not a metrics page at all
(HTML or JSON from a wrong URL), fails to parse, takes longer to parse than its caller allows
(`give_up`), or has a counter that is not a finite non-negative number raises MetricsError. Unusable label values
(cache_config_info block_size="0", num_gpu_blocks="abc") and absurd gauges (a negative or
non-finite pool size, a page size below 1) are ignored and named in `describe`; they never raise.
The hit rate over time is kvset.engine.metrics_tracker's.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.parser import text_fd_to_metric_families

from kvset.engine import DEFAULT_MAX_BODY_BYTES as DEFAULT_MAX_BODY_BYTES
from kvset.units import NULL_BLOCKS_VLLM, EnginePool

LabelKey = tuple[tuple[str, str], ...]

VLLM_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
VLLM_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
VLLM_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
VLLM_V0_HIT_RATE = "vllm:gpu_prefix_cache_hit_rate"
VLLM_CACHE_CONFIG = "vllm:cache_config_info"
VLLM_RUNNING = "vllm:num_requests_running"
VLLM_WAITING = "vllm:num_requests_waiting"
VLLM_REQUESTS_DONE = "vllm:request_success_total"  # finished requests, by finished_reason
SGLANG_CACHED = "sglang:cached_tokens_total"
SGLANG_PROMPT = "sglang:prompt_tokens_total"
SGLANG_HIT_GAUGE = "sglang:cache_hit_rate"
SGLANG_USAGE = "sglang:token_usage"
SGLANG_MAX_TOKENS = "sglang:max_total_num_tokens"
SGLANG_PAGE_SIZE = "sglang:page_size"
SGLANG_RUNNING = "sglang:num_running_reqs"
# Labels that split one SGLang pool into per-GPU series carrying the same value.
SGLANG_SHARD_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "ep_rank"})
# Counts (blocks, tokens, requests) above this are damage; summing a few of them stays finite.
MAX_COUNT = float(2**53)


class MetricsError(ValueError):
    """A /metrics response that cannot be used; `reason` is short, human and the same for every
    response of its kind (it is counted by), `detail` names the spot and may quote the body."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason} ({detail})" if detail else reason)
        self.reason = reason
        self.detail = detail


Series = dict[LabelKey, float]
# Sample name -> [(labels, value)], as parse_exposition reads them.
Samples = dict[str, list[tuple[dict[str, str], float]]]


def _key(labels: dict[str, str], drop: frozenset[str] = frozenset()) -> LabelKey:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


# How often (in lines) the parse asks its caller whether to go on: a 16 MiB body takes seconds.
CHECK_EVERY_LINES = 2048
NOT_METRICS_HINT = "check the URL: vLLM and SGLang serve http://HOST:PORT/metrics"
TOO_SLOW_TO_PARSE = "response too slow to parse: given up at the poll's deadline"


class _GiveUp(Exception):
    """The caller's time for this parse is up."""


def _lines(text: str, give_up: Callable[[], bool] | None) -> Iterator[str]:
    for n, line in enumerate(io.StringIO(text)):  # split at "\n" only, as the parser itself does
        if give_up is not None and n % CHECK_EVERY_LINES == 0 and give_up():
            raise _GiveUp
        yield line


def _not_metrics(text: str) -> str | None:
    """Why a body is not a Prometheus exposition at all, from its first character, or None."""
    first = text.lstrip()[:1]
    if first == "<":
        return f"not a Prometheus metrics page (the server sent HTML): {NOT_METRICS_HINT}"
    if first in ("{", "["):
        return f"not a Prometheus metrics page (the server sent JSON): {NOT_METRICS_HINT}"
    return None


def parse_exposition(text: str, give_up: Callable[[], bool] | None = None) -> Samples:
    """Sample name -> [(labels, value)]. Raises MetricsError for an unusable body, and when
    `give_up()` (asked every CHECK_EVERY_LINES lines) answers True."""
    if not text.strip():
        raise MetricsError("empty response")
    why = _not_metrics(text)
    if why is not None:
        raise MetricsError(why)
    if not text.endswith("\n"):
        raise MetricsError("truncated response (the body does not end with a newline)")
    samples: Samples = {}
    try:
        lines = _lines(text, give_up)
        for family in text_fd_to_metric_families(lines):  # type: ignore[arg-type]  # it only iterates the lines
            for s in family.samples:
                samples.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    except _GiveUp:
        raise MetricsError(TOO_SLOW_TO_PARSE) from None
    except Exception as e:  # the parser raises ValueError, IndexError, ... on broken text
        raise MetricsError("unparsable metrics text", f"{type(e).__name__}: {str(e)[:80]}") from None
    return samples


@dataclass(frozen=True)
class CacheCounters:
    """One poll, reduced to what the operating point needs."""

    engine: str  # "vllm" | "sglang"
    queries: Series  # prompt tokens looked up in the prefix cache, per series
    hits: Series  # of which were cache hits
    pools: tuple[EnginePool, ...] | None  # each engine's, in its own blocks (None: not known)
    block_size: int | None
    kv_usage: float | None
    running: int | None
    engine_hit_gauge: float | None  # the engine's own hit-rate gauge, when it exports one
    describe: tuple[str, ...] = ()  # what was summed or assumed
    waiting: int | None = None  # requests waiting for admission (vLLM)
    requests_finished: float | None = None  # requests the engine finished, summed over its series (vLLM)
    # cached tokens by where they came from (SGLang's cache_source: device, host, storage_*), summed
    # over the series; empty when the engine does not say
    hits_by_source: tuple[tuple[str, float], ...] = ()


def _first_present(
    samples: Samples, names: tuple[str, ...]
) -> tuple[str | None, list[tuple[dict[str, str], float]]]:
    for n in names:
        if n in samples:
            return n, samples[n]
    return None, []


def _finite(v: float) -> bool:
    return not (math.isnan(v) or math.isinf(v))


def _count(v: float, minimum: float = 0.0) -> bool:
    """A gauge that can be a count: finite, at least `minimum`, not absurdly large."""
    return _finite(v) and minimum <= v <= MAX_COUNT


def _label_int(text: str) -> int | None:
    """A label value that is a plain decimal ("16"); None for "None", "abc", "1_6", "-5", "1e3"."""
    if text.isascii() and text.isdigit() and len(text) <= 15:
        return int(text)
    return None


def _counter_series(
    name: str | None, series: list[tuple[dict[str, str], float]], drop: frozenset[str] = frozenset()
) -> Series:
    """A counter's series by labels; MetricsError if any value is not a finite non-negative number
    (dropping it would read as zero hits)."""
    out: Series = {}
    for lb, v in series:
        if not (_finite(v) and v >= 0):
            raise MetricsError("unusable counter value", f"{name} = {v}")
        out[_key(lb, drop)] = v
    return out


def _weighted_usage(usage: Series, weights: dict[LabelKey, float]) -> float | None:
    vals = [(k, v) for k, v in usage.items() if _finite(v)]
    if not vals:
        return None
    if weights and all(k in weights for k, _ in vals):
        total = sum(weights[k] for k, _ in vals)
        if total > 0:
            return sum(v * weights[k] for k, v in vals) / total
    return sum(v for _, v in vals) / len(vals)


def _vllm(samples: Samples) -> CacheCounters:
    notes: list[str] = []
    qname, q = _first_present(samples, VLLM_QUERIES)
    hname, h = _first_present(samples, VLLM_HITS)
    if qname and qname != VLLM_QUERIES[0]:
        notes.append("deprecated vllm:gpu_prefix_cache_* counters (vLLM <= 0.11)")
    queries = _counter_series(qname, q)
    hits = _counter_series(hname, h)
    # engine label -> (block_size, num_gpu_blocks); None where the label is unusable or not known yet
    engines: dict[str, tuple[int | None, int | None]] = {}
    for lb, _ in samples.get(VLLM_CACHE_CONFIG, []):
        raw_bs, raw_nb = lb.get("block_size", ""), lb.get("num_gpu_blocks", "")
        bs = _label_int(raw_bs)
        if bs is None or bs < 1:
            notes.append(
                f"cache_config_info block_size={raw_bs[:20]!r} unusable: that engine's capacity ignored"
            )
            engines[lb.get("engine", "")] = (None, None)
            continue
        nb = _label_int(raw_nb)
        if nb is None and raw_nb != "None":  # "None": the engine has not profiled its memory yet
            notes.append(f"cache_config_info num_gpu_blocks={raw_nb[:20]!r} unusable: capacity unknown")
        engines[lb.get("engine", "")] = (bs, nb)
    block_sizes = {bs for bs, _ in engines.values() if bs is not None}
    block_size = block_sizes.pop() if len(block_sizes) == 1 else None
    known = {e: (bs, nb) for e, (bs, nb) in engines.items() if bs is not None and nb is not None}
    complete = bool(known) and len(known) == len(engines)
    pools = (
        tuple(EnginePool(nb, bs, NULL_BLOCKS_VLLM, e) for e, (bs, nb) in sorted(known.items()))
        if complete
        else None
    )
    _, u = _first_present(samples, VLLM_USAGE)
    usage = {_key(lb): v for lb, v in u}
    weights = {}
    for k in usage:
        eng = dict(k).get("engine", "")
        if eng in engines and engines[eng][1] is not None:
            weights[k] = float(engines[eng][1] or 0)
    running_vals = [v for _, v in samples.get(VLLM_RUNNING, []) if _count(v)]
    waiting_vals = [v for _, v in samples.get(VLLM_WAITING, []) if _count(v)]
    v0 = [v for _, v in samples.get(VLLM_V0_HIT_RATE, []) if _finite(v)]
    done = _counter_series(VLLM_REQUESTS_DONE, samples.get(VLLM_REQUESTS_DONE, []))
    if len(engines) > 1:
        notes.append(f"{len(engines)} engines, each with its own pool")
    if len(queries) > 1:
        models = sorted({dict(k).get("model_name", "?") for k in queries})
        notes.append(f"hit counters summed over {len(queries)} series (models: {', '.join(models)})")
    return CacheCounters(
        engine="vllm",
        queries=queries,
        hits=hits,
        pools=pools,
        block_size=block_size,
        kv_usage=_weighted_usage(usage, weights),
        running=int(sum(running_vals)) if running_vals else None,
        engine_hit_gauge=(sum(v0) / len(v0)) if v0 else None,
        describe=tuple(notes),
        waiting=int(sum(waiting_vals)) if waiting_vals else None,
        requests_finished=sum(done.values()) if done else None,
    )


def _per_pool(
    series: list[tuple[dict[str, str], float]], keep: Callable[[float], bool] = _finite
) -> dict[LabelKey, float]:
    """SGLang: collapse per-GPU shards of one pool (same labels but tp/pp rank) to one value."""
    out: dict[LabelKey, float] = {}
    for lb, v in series:
        if not keep(v):
            continue
        k = _key(lb, SGLANG_SHARD_LABELS)
        out[k] = max(out.get(k, v), v)
    return out


def _pool_label(key: LabelKey) -> str:
    """An SGLang pool's data-parallel rank, where its labels give one ("" otherwise)."""
    labels = dict(key)
    return labels.get("dp_rank", labels.get("engine", ""))


def _sglang(samples: Samples) -> CacheCounters:
    notes: list[str] = []
    device: list[tuple[dict[str, str], float]] = []
    by_source: dict[str, list[tuple[dict[str, str], float]]] = {}
    other_sources: set[str] = set()
    for lb, v in samples.get(SGLANG_CACHED, []):
        src = lb.get("cache_source")
        if src is not None:
            by_source.setdefault(src, []).append((lb, v))
        if src is not None and src != "device":
            other_sources.add(src)
            continue
        device.append((lb, v))
    hits = _counter_series(SGLANG_CACHED, device, frozenset({"cache_source"}))
    hits_by_source = tuple(
        (src, sum(_counter_series(SGLANG_CACHED, series).values()))
        for src, series in sorted(by_source.items())
    )
    if other_sources:
        notes.append(f"cached tokens from {', '.join(sorted(other_sources))} not counted as GPU hits")
    queries = _counter_series(SGLANG_PROMPT, samples.get(SGLANG_PROMPT, []))
    pool_tokens = _per_pool(samples.get(SGLANG_MAX_TOKENS, []), _count)
    pages = [v for _, v in samples.get(SGLANG_PAGE_SIZE, []) if _count(v, minimum=1.0)]
    page_size = int(max(pages)) if pages else None
    if page_size is None and pool_tokens:
        page_size = 1
        notes.append("sglang:page_size not exported; assumed 1 (SGLang's default)")
    usage = _per_pool(samples.get(SGLANG_USAGE, []))
    running = _per_pool(samples.get(SGLANG_RUNNING, []), _count)
    gauge = list(_per_pool(samples.get(SGLANG_HIT_GAUGE, [])).values())
    if len(pool_tokens) > 1:
        notes.append(f"{len(pool_tokens)} pools (data-parallel ranks or models), each kept on its own")
    pools = None
    if pool_tokens and page_size:
        pools = tuple(
            EnginePool(int(tokens) // page_size, page_size, 0, _pool_label(key))
            for key, tokens in pool_tokens.items()
        )
    return CacheCounters(
        engine="sglang",
        queries=queries,
        hits=hits,
        pools=pools,
        block_size=page_size,
        kv_usage=_weighted_usage(usage, pool_tokens),
        running=int(sum(running.values())) if running else None,
        engine_hit_gauge=(sum(gauge) / len(gauge)) if gauge else None,
        describe=tuple(notes),
        hits_by_source=hits_by_source,
    )


def extract(samples: dict[str, list[tuple[dict[str, str], float]]]) -> CacheCounters:
    """The cache counters of a vLLM or SGLang exposition. Raises MetricsError if neither."""
    has_vllm = any(n.startswith("vllm:") for n in samples)
    has_sglang = any(n.startswith("sglang:") for n in samples)
    if has_vllm:
        return _vllm(samples)
    if has_sglang:
        return _sglang(samples)
    raise MetricsError("no vllm: or sglang: metrics in the response")


def counters_from_text(text: str, give_up: Callable[[], bool] | None = None) -> CacheCounters:
    return extract(parse_exposition(text, give_up))
