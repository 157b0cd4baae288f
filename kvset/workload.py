"""A seeded synthetic agentic workload: the demo's traffic, the tests' and the benchmark's.

Agent sessions run concurrently. Each turn a session re-sends its whole context:
    [system prefix shared by its agent type] + [its history] + [maybe a popular document]
and then appends fresh pages (the tool result and the model's reply) to its history.
Documents come from a Zipf-popular pool, so a long tail of them is rarely reused.
Sessions end after a random number of turns and new ones start. Phases change the number
of active sessions or compact histories, so the working set visibly moves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from kvset.types import AccessBatch
from kvset.units import DEFAULT_BLOCK_SIZE


@dataclass(frozen=True)
class WorkloadConfig:
    seed: int = 0
    concurrency: int = 48  # active sessions
    agent_types: int = 4  # distinct shared system prefixes
    prefix_blocks: int = 64  # blocks per system prefix
    mean_turns: float = 18.0  # geometric session length
    tool_blocks: tuple[int, int] = (2, 24)  # fresh tool-result blocks per turn (uniform range)
    reply_blocks: tuple[int, int] = (1, 4)  # fresh model-reply blocks per turn
    documents: int = 20_000  # pool of retrievable documents
    document_blocks: tuple[int, int] = (4, 32)
    document_zipf: float = 1.2
    document_share: float = 0.3  # share of turns that also read a document
    block_size: int = DEFAULT_BLOCK_SIZE  # tokens per block
    requests_per_second: float = 40.0  # Poisson arrivals (trace time)
    compaction_blocks: int = 8  # history size after a compaction phase


@dataclass(frozen=True)
class Phase:
    """A change of workload at a given trace time."""

    at: float  # seconds since the start
    name: str
    concurrency: int | None = None
    compact_histories: bool = False


DEMO_PHASES = (
    Phase(0.0, "steady: 48 agent sessions", concurrency=48),
    Phase(120.0, "fewer users: 12 agent sessions", concurrency=12),
    Phase(240.0, "history compaction, back to 48 sessions", concurrency=48, compact_histories=True),
    Phase(360.0, "peak: 96 agent sessions", concurrency=96),
)


@dataclass
class _Session:
    agent_type: int
    turns_left: int
    history: list[np.ndarray]
    history_len: int = 0


class AgenticWorkload:
    """Deterministic for a given config; generates requests in trace-time order."""

    def __init__(self, config: WorkloadConfig | None = None, phases: tuple[Phase, ...] = ()) -> None:
        self.config = config or WorkloadConfig()
        self.rng = np.random.default_rng(self.config.seed)
        self._next_block = np.uint64(1 << 40)  # fresh pages; prefixes and documents below
        self.prefixes = [
            np.arange(t * 4096, t * 4096 + self.config.prefix_blocks, dtype=np.uint64)
            for t in range(self.config.agent_types)
        ]
        self._doc_sizes = self.rng.integers(
            self.config.document_blocks[0], self.config.document_blocks[1] + 1, self.config.documents
        )
        self._doc_base = np.uint64(1 << 32)
        self._doc_offsets = np.concatenate([[0], np.cumsum(self._doc_sizes)]).astype(np.uint64)
        self.phases = tuple(sorted(phases, key=lambda p: p.at))
        self._phase_index = -1
        self.phase_name = "steady"
        self.concurrency = self.config.concurrency
        self.sessions: list[_Session] = []
        self.now = 0.0
        self.requests_made = 0

    # -- building blocks -----------------------------------------------------
    def _fresh(self, n: int) -> np.ndarray:
        out = np.arange(int(self._next_block), int(self._next_block) + n, dtype=np.uint64)
        self._next_block += np.uint64(n)
        return out

    def _new_session(self) -> _Session:
        c = self.config
        turns = int(self.rng.geometric(1.0 / max(1.0, c.mean_turns)))
        return _Session(agent_type=int(self.rng.integers(c.agent_types)), turns_left=turns, history=[])

    def _document(self) -> np.ndarray:
        c = self.config
        doc = int(min(self.rng.zipf(c.document_zipf), c.documents) - 1)
        start = self._doc_base + self._doc_offsets[doc]
        return np.arange(int(start), int(start) + int(self._doc_sizes[doc]), dtype=np.uint64)

    def _apply_phases(self) -> str | None:
        changed = None
        while self._phase_index + 1 < len(self.phases) and self.phases[self._phase_index + 1].at <= self.now:
            self._phase_index += 1
            phase = self.phases[self._phase_index]
            self.phase_name = phase.name
            if phase.concurrency is not None:
                self.concurrency = phase.concurrency
                del self.sessions[self.concurrency :]
            if phase.compact_histories:
                for s in self.sessions:
                    s.history = [self._fresh(self.config.compaction_blocks)]
                    s.history_len = self.config.compaction_blocks
            changed = phase.name
        return changed

    # -- requests --------------------------------------------------------------
    def next_request(self) -> tuple[np.ndarray, float]:
        """The next request's block keys and its arrival time (seconds)."""
        c = self.config
        self.now += float(self.rng.exponential(1.0 / c.requests_per_second))
        self._apply_phases()
        while len(self.sessions) < self.concurrency:
            self.sessions.append(self._new_session())
        i = int(self.rng.integers(len(self.sessions)))
        s = self.sessions[i]
        parts = [self.prefixes[s.agent_type], *s.history]
        if self.rng.random() < c.document_share:
            parts.append(self._document())
        tool = self._fresh(int(self.rng.integers(c.tool_blocks[0], c.tool_blocks[1] + 1)))
        parts.append(tool)
        reply = self._fresh(int(self.rng.integers(c.reply_blocks[0], c.reply_blocks[1] + 1)))
        # the next turn re-reads this turn's tool result and the reply written for it
        s.history.extend([tool, reply])
        s.history_len += len(tool) + len(reply)
        s.turns_left -= 1
        if s.turns_left <= 0:
            self.sessions[i] = self._new_session()
        self.requests_made += 1
        return np.concatenate(parts), self.now

    def batch(self, max_accesses: int = 1 << 16, until: float | None = None) -> AccessBatch:
        """Whole requests up to about `max_accesses` accesses (or up to trace time `until`)."""
        keys, starts, stamps = [], [], []
        n = 0
        while n < max_accesses:
            if until is not None and self.now >= until:
                break
            k, t = self.next_request()
            starts.append(n)
            keys.append(k)
            stamps.append(np.full(len(k), t))
            n += len(k)
        if not keys:
            return AccessBatch(np.zeros(0, np.uint64), block_size=self.config.block_size)
        return AccessBatch(
            keys=np.concatenate(keys),
            tokens=None,
            request_starts=np.asarray(starts, dtype=np.int64),
            timestamps=np.concatenate(stamps),
            block_size=self.config.block_size,
        )

    def batches(self, total_accesses: int, max_accesses: int = 1 << 18) -> Iterator[AccessBatch]:
        made = 0
        while made < total_accesses:
            b = self.batch(min(max_accesses, total_accesses - made))
            made += len(b)
            yield b


def generate(total_accesses: int, config: WorkloadConfig | None = None, **overrides) -> AccessBatch:
    """One batch holding about `total_accesses` accesses (whole requests)."""
    cfg = replace(config or WorkloadConfig(), **overrides)
    parts = list(AgenticWorkload(cfg).batches(total_accesses))
    offsets = np.cumsum([0] + [len(b) for b in parts[:-1]])
    return AccessBatch(
        keys=np.concatenate([b.keys for b in parts]),
        request_starts=np.concatenate([b.request_starts + o for b, o in zip(parts, offsets, strict=True)]),
        timestamps=np.concatenate([b.timestamps for b in parts]),
        block_size=cfg.block_size,
    )
