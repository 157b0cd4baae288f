"""What a vLLM or SGLang log says: block accesses from logged prompts, the engine's operating point.

vLLM request lines carry the prompt's token ids; they become block keys exactly as vLLM's prefix
cache hashes them (one request per logged prompt, its full blocks in order). The stats and startup
lines give the engine's operating point: its hit rate, KV usage and capacity. SGLang logs no
token ids, so an SGLang log gives the operating point only.

Lines that match nothing are counted as unrelated; lines that match but do not parse are rejected
with a reason and their line number; prompts whose id list was cut (--max-log-len) are counted
separately and, by default, not analysed (a cut prompt would look like a short one).

`LogTracker` is pure: it is given each line as bytes with its number and the time it was read,
and never touches the file (the source tails it).
"""

from __future__ import annotations

import numpy as np

from kvset.engine import ENGINES, TRUNCATED_POLICIES, sglang_log, vllm_log
from kvset.engine.tracker_output import HealthParts, PendingAccesses
from kvset.formats.names import HASH_ALGOS
from kvset.rejects import RejectCounter
from kvset.types import EngineReading, SourceUpdate, TimelineEvent
from kvset.units import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO, NULL_BLOCKS_VLLM, EnginePool, StreamUnits


class LogTracker:
    """The engine as its log describes it (see the module docstring)."""

    def __init__(
        self,
        engine: str = "auto",
        block_size: int | None = None,
        hash_algo: str = DEFAULT_HASH_ALGO,
        python_hash_seed: str | None = None,
        max_log_len: int | None = None,
        truncated: str = "skip",
        window_s: float = 60.0,
        clock_reference: float | None = None,
        rejects: RejectCounter | None = None,
    ) -> None:
        """block_size: the engine's tokens per block (--block-size; None: vLLM's default), which the
        prompts are hashed with; `clock_reference`: wall seconds near the log's last line (the file's
        mtime for a finished log, else now), to give vLLM's year-less timestamps their year."""
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        if hash_algo not in HASH_ALGOS:
            raise ValueError(f"hash algorithm must be one of {', '.join(HASH_ALGOS)}, not {hash_algo!r}")
        if block_size is not None and block_size <= 0:
            raise ValueError("block size must be positive")
        if truncated not in TRUNCATED_POLICIES:
            raise ValueError(f"truncated must be one of {', '.join(TRUNCATED_POLICIES)}")
        self.engine = engine
        self.units = StreamUnits(
            block_size or DEFAULT_BLOCK_SIZE, "flag" if block_size else "default", hash_algo, python_hash_seed
        )
        self.block_size = self.units.block_size
        self.hash_algo = hash_algo
        self.python_hash_seed = python_hash_seed
        self.truncated_policy = truncated
        self._clock = vllm_log.LogClock(clock_reference)
        self._judge = vllm_log.PromptTruncationJudge(max_log_len)
        self.rejects = RejectCounter() if rejects is None else rejects
        self.truncated = RejectCounter()  # cut prompts: counted apart from rejections
        self.lines = 0
        self.unrelated_lines = 0
        self.prompts = 0
        self.accesses = 0
        self.short_prompts = 0  # fewer tokens than one block: nothing vLLM would cache
        self.tokens_outside_blocks = 0  # the partial last block of each prompt (never cached)
        self.prompt_tokens = 0
        self.requests_without_ids = 0
        self.engines_seen: set[str] = set()
        self._last_log_time: float | None = None
        self._pending = PendingAccesses()
        # vLLM engine state
        self._vllm_stats: dict[str, vllm_log.EngineStats] = {}
        self._vllm_tokens: dict[str, int] = {}
        self._vllm_blocks: dict[str, int] = {}
        # SGLang engine state
        self._sgl_counter = sglang_log.CachedTokenCounter(window_s)
        self._sgl_usage: dict[str, float] = {}
        self._sgl_running: dict[str, int] = {}
        self._sgl_tokens: dict[str, int] = {}
        self._sgl_page_size: int | None = None
        self._sgl_pool_shard: dict[str, str] = {}
        self._engine_dirty: str | None = None  # "vllm" | "sglang": which engine's state changed
        self._events: list[TimelineEvent] = []

    # -- lines ----------------------------------------------------------------------------

    def read_line(self, number: int, raw: bytes, at: float) -> None:
        """One line of the log (without its newline), read at wall time `at`."""
        self.lines += 1
        text = raw.decode("utf-8", errors="replace")
        try:
            if self.engine != "sglang" and self._vllm_line(number, text, at):
                return
            if self.engine != "vllm" and self._sglang_line(text, at):
                return
        except vllm_log.LogLineError as e:
            self.rejects.reject(e.reason, f"line {number}: {e.detail or text[:80]}")
            return
        except Exception as e:  # a parser bug on odd input must cost one line, never the source
            self.rejects.reject(f"unparsable line: {type(e).__name__}", f"line {number}: {text[:80]}")
            return
        self.unrelated_lines += 1

    def _vllm_line(self, number: int, text: str, now: float) -> bool:
        prefix, msg = vllm_log.split_prefix(vllm_log.strip_ansi(text))
        rec = vllm_log.parse_message(msg, prefix)
        if rec is None:
            return False
        self.engines_seen.add("vllm")
        at = now
        if prefix.month_day_time is not None:
            t = self._clock.to_epoch(prefix.month_day_time)
            if t is not None:
                at = t
                self._last_log_time = t
        if isinstance(rec, vllm_log.RequestPrompt):
            self._prompt(number, rec, at)
        elif isinstance(rec, vllm_log.RequestWithoutIds):
            self.requests_without_ids += 1
        elif isinstance(rec, vllm_log.EngineStats):
            self._vllm_stats[rec.engine] = rec
            self._engine_dirty = "vllm"
        elif isinstance(rec, vllm_log.CacheCapacity):
            store = self._vllm_tokens if rec.tokens is not None else self._vllm_blocks
            value = rec.tokens if rec.tokens is not None else rec.blocks
            assert value is not None
            label = rec.engine or "engine"
            # One restart logs both lines; report it once, from the size line when there is one.
            if label in store and (rec.tokens is not None or not self._vllm_tokens):
                self._events.append(
                    TimelineEvent(at, "engine-reset", f"vLLM {label} started again (line {number})")
                )
            store[label] = value
            self._engine_dirty = "vllm"
        return True

    def _prompt(self, number: int, rec: vllm_log.RequestPrompt, at: float) -> None:
        if rec.token_ids is None:
            raise vllm_log.LogLineError("request logged without token ids", f"request {rec.request_id}")
        cut = self._judge.judge(rec)
        if cut:
            self.truncated.reject(cut, f"line {number}: request {rec.request_id}, {len(rec.token_ids)} ids")
            if self.truncated_policy == "skip":
                return
        self.prompts += 1
        n = len(rec.token_ids)
        self.prompt_tokens += n
        self.tokens_outside_blocks += n % self.block_size
        if n < self.block_size:
            self.short_prompts += 1
            return
        keys = vllm_log.prompt_block_keys(
            rec.token_ids, self.block_size, self.hash_algo, self.python_hash_seed
        )
        self._pending.add_request(keys, np.full(len(keys), self.block_size, dtype=np.uint32), at)

    def _sglang_line(self, text: str, now: float) -> bool:
        prefix, rec = sglang_log.parse_line(text)
        if rec is None:
            return False
        self.engines_seen.add("sglang")
        at = prefix.timestamp if prefix and prefix.timestamp is not None else now
        if prefix and prefix.timestamp is not None:
            self._last_log_time = prefix.timestamp
        pool = sglang_log.pool_key(rec.ranks)
        if isinstance(rec, sglang_log.PrefillBatch):
            if self._sgl_counter.add(rec, at):
                if rec.token_usage is not None:
                    self._sgl_usage[pool] = rec.token_usage
                if rec.running is not None:
                    self._sgl_running[pool] = rec.running
        elif isinstance(rec, sglang_log.PoolSize):
            if rec.max_total_tokens is not None:
                first = self._sgl_pool_shard.setdefault(pool, rec.ranks)
                if rec.ranks == first:
                    if pool in self._sgl_tokens:
                        self._events.append(
                            TimelineEvent(at, "engine-reset", f"SGLang {rec.ranks or 'engine'} started again")
                        )
                    self._sgl_tokens[pool] = rec.max_total_tokens
            if rec.page_size is not None:
                self._sgl_page_size = rec.page_size
        self._engine_dirty = "sglang"
        return True

    # -- what the log says ----------------------------------------------------------------

    def take(self, at: float) -> SourceUpdate:
        """The accesses since the last take, the engine reading if it changed, the timeline events
        (no health: that is the source's)."""
        batch = self._pending.take(self.block_size)
        if batch is not None:
            self.accesses += len(batch)
        events, self._events = tuple(self._events), []
        return SourceUpdate(accesses=batch, engine=self._reading(at), events=events)

    def _reading(self, now: float) -> EngineReading | None:
        which, self._engine_dirty = self._engine_dirty, None
        at = self._last_log_time if self._last_log_time is not None else now
        if which == "vllm":
            stats = list(self._vllm_stats.values())
            hits = [s.prefix_hit_rate for s in stats if s.prefix_hit_rate is not None]
            usage = [s.kv_usage for s in stats if s.kv_usage is not None]
            running = [s.running for s in stats if s.running is not None]
            # one pool per engine, from its size line (tokens) or else its num_gpu_blocks line
            sizes = self._vllm_tokens or self._vllm_blocks
            per = self.block_size if self._vllm_tokens else 1
            pools = tuple(
                EnginePool(n // per, self.block_size, NULL_BLOCKS_VLLM, label) for label, n in sizes.items()
            )
            unit = stats[-1].hit_rate_unit if stats else "tokens"
            return EngineReading(
                at=at,
                pools=pools or None,
                block_size=self.block_size,
                token_hit_rate=sum(hits) / len(hits) if hits else None,
                hit_rate_window_s=None,  # vLLM measures over its last 1000 requests, not seconds
                kv_usage=sum(usage) / len(usage) if usage else None,
                running_requests=sum(running) if running else None,
                label="vllm log (hit rate over the engine's last 1000 requests)"
                if unit == "tokens"
                else "vllm log (V0 engine: block hit rate since start)",
            )
        if which == "sglang":
            rate, span = self._sgl_counter.window_rate(at)
            page_size = self._sgl_page_size or 1  # SGLang's default page size when the log does not say
            usage = list(self._sgl_usage.values())
            return EngineReading(
                at=at,
                pools=tuple(
                    EnginePool(n // page_size, page_size, 0, key) for key, n in self._sgl_tokens.items()
                )
                or None,
                block_size=page_size,
                token_hit_rate=rate,
                hit_rate_window_s=span if rate is not None else None,
                kv_usage=sum(usage) / len(usage) if usage else None,
                running_requests=sum(self._sgl_running.values()) if self._sgl_running else None,
                label="sglang log (prefill batches)",
            )
        return None

    def health_parts(self) -> HealthParts:
        notes: list[str] = []
        if "vllm" in self.engines_seen or self.engine == "vllm":
            if self.prompts == 0 and self.requests_without_ids:
                notes.append(
                    "vLLM logs requests without token ids: run it with --enable-log-requests and "
                    "VLLM_LOGGING_LEVEL=DEBUG (>= 0.12) to get prompts"
                )
            elif self.prompts == 0 and not self.truncated:
                notes.append("no prompts in the log yet (vLLM logs them with --enable-log-requests)")
            if self.truncated:
                what = "skipped" if self.truncated_policy == "skip" else "analysed as their first blocks"
                notes.append(
                    f"{self.truncated.total} prompts had their token id lists cut (vLLM's --max-log-len or a "
                    f"line cut on the way): {what}; the curve lacks them"
                )
            if self.prompts:
                notes.append(
                    f"block keys: block size {self.block_size}, {self.hash_algo}; LoRA and multimodal "
                    "extra keys are not in the log"
                )
        if "sglang" in self.engines_seen:
            notes.append("SGLang logs carry no token ids: engine hit rate and usage only")
            if self._sgl_page_size is None and self._sgl_tokens:
                notes.append("page size not in the log (no ServerArgs line); assumed 1, SGLang's default")
        details = [
            ("lines", str(self.lines)),
            ("unrelated lines", str(self.unrelated_lines)),
            ("prompts", str(self.prompts)),
            ("truncated prompts", str(self.truncated.total)),
            ("prompts shorter than a block", str(self.short_prompts)),
            ("prompt tokens outside full blocks", str(self.tokens_outside_blocks)),
            (
                # vLLM's own hit rate divides by all prompt tokens; the curve by full-block tokens.
                "share of prompt tokens in full blocks",
                f"{1 - self.tokens_outside_blocks / self.prompt_tokens:.4f}" if self.prompt_tokens else "n/a",
            ),
            ("engines", ",".join(sorted(self.engines_seen)) or "none yet"),
        ]
        if self._judge.inferred_cap is not None:
            details.append(("inferred --max-log-len", str(self._judge.inferred_cap)))
        if self._sgl_counter.batches:
            cum = self._sgl_counter.cumulative_rate
            details.append(("sglang prefill batches", str(self._sgl_counter.batches)))
            details.append(("sglang hit rate since start", "n/a" if cum is None else f"{cum:.4f}"))
        for r in self.truncated.summary():
            details.append((f"truncated: {r.reason}", f"{r.count} ({'; '.join(r.examples[:2])})"))
        return HealthParts(notes=tuple(notes), details=tuple(details))
