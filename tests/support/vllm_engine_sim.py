"""A fake vLLM engine for tests: a tiny copy of its v1 scheduler over NaiveBlockPool, and its KV events.

Per step, as vLLM 0.33 does it (vllm/v1/core/sched/scheduler.py):
1. every running request decodes one token; a request that needs a new block and finds none
   preempts the most recently admitted running request (its blocks are freed, last first; it goes
   back to the head of the waiting queue and is looked up again later: a readmission);
2. waiting requests, first come first served: a lookup (with kv_cache_report_mode "full", a
   BlockStored of its cached prefix, no parent); admitted when the free queue holds its new blocks
   (else the scheduler stops there: the request is looked up again next step, re-reported);
   admission touches the hits and allocates the rest: a BlockStored of the new full blocks, parent
   the last hit. The hit is capped at the prompt minus its last token (vLLM recomputes it);
3. a request that produced all its tokens finishes: its blocks are freed, last first (no event);
4. the step's events are one batch, an allocation's evictions (BlockRemoved) before its store.

It counts what vLLM's prefix-cache counters count: at each first admission the prompt's tokens and
its hit tokens (readmissions apart), which is the engine's measured hit rate the tests hold kvset's
prediction to.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

from tests.support.block_pool import NaiveBlockPool

BLOCK = 16


@dataclass
class SimRequest:
    prompt: list  # full-block hashes of the prompt
    tail_tokens: int  # prompt tokens past its last full block
    output_tokens: int
    arrival: int = 0  # step at which it joins the waiting queue
    next_turn: SimRequest | None = None  # arrives `think` steps after this one finishes
    think: int = 1
    # state
    generated: int = 0
    blocks: list = field(default_factory=list)  # pool block ids, in order
    hashes: list = field(default_factory=list)  # full-block hashes so far (prompt, then output)
    admitted: int | None = None
    hit_blocks: int = 0  # cached blocks its first admission found
    admissions: int = 0
    finished: int | None = None

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt) * BLOCK + self.tail_tokens

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.generated


@dataclass
class SimEngine:
    usable: int
    report_hits: bool = True  # kv_cache_report_mode "full"
    max_running: int = 8
    pool: NaiveBlockPool = field(init=False)
    steps: list = field(default_factory=list)  # per step: its events, or [] (no batch)
    query_tokens: int = 0
    hit_tokens: int = 0
    lookups: int = 0
    not_admitted_reports: int = 0  # lookups that reported hits and were not admitted (the request waits)
    reports: list = field(default_factory=list)  # (step, last hash[, "waits"]) of each hit report
    readmissions: int = 0
    preemptions: int = 0

    def __post_init__(self) -> None:
        self.pool = NaiveBlockPool(self.usable)
        self._out = itertools.count(1 << 40)  # hashes of output blocks

    @property
    def measured_token_hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens

    def run(self, requests: list[SimRequest], max_steps: int = 1_000_000) -> list[tuple[int, list]]:
        """Run every request to its end; returns the event batches: (step, events) for each step with events."""
        waiting: deque[SimRequest] = deque()
        later = {id(r.next_turn) for r in requests if r.next_turn is not None}
        pending = deque(sorted((r for r in requests if id(r) not in later), key=lambda r: r.arrival))
        running: list[SimRequest] = []
        batches = []
        for step in range(max_steps):
            if not (pending or waiting or running):
                break
            while pending and pending[0].arrival <= step:
                waiting.append(pending.popleft())
            events: list = []
            self._decode(running, waiting, events)
            self._admit(running, waiting, events, step)
            for r in [r for r in running if r.generated >= r.output_tokens]:
                running.remove(r)
                r.finished = step
                self.pool.free_blocks(r.blocks)
                if r.next_turn is not None:
                    r.next_turn.arrival = step + r.think
                    pending.append(r.next_turn)
                    pending = deque(sorted(pending, key=lambda q: q.arrival))
            events += self._removed()
            self.steps.append(events)
            if events:
                batches.append((step, events))
        else:
            raise RuntimeError("the simulation did not finish")
        return batches

    def _removed(self) -> list:
        return [("removed", [h]) for h in self.pool.take_removed()]

    def _decode(self, running: list, waiting: deque, events: list) -> None:
        for r in list(running):
            if r not in running:
                continue  # preempted meanwhile
            if r.tokens % BLOCK == 0:  # its blocks are full: the next token needs a new one
                while not self.pool.free and running:
                    victim = running.pop()  # the newest admission
                    self._preempt(victim, waiting)
                    if victim is r:
                        break
                if r not in running:
                    continue
                r.blocks.append(self.pool.allocate())
            r.generated += 1
            if r.tokens % BLOCK == 0:  # that token filled its block: cached, and published
                h = next(self._out)
                self.pool.cache(r.blocks[-1], h)
                events += self._removed()  # (vLLM publishes an allocation's evictions before its store)
                events.append(("stored", [h], r.hashes[-1] if r.hashes else None))
                r.hashes.append(h)

    def _preempt(self, r: SimRequest, waiting: deque) -> None:
        self.preemptions += 1
        self.pool.free_blocks(r.blocks)
        r.blocks = []
        waiting.appendleft(r)

    def _admit(self, running: list, waiting: deque, events: list, step: int) -> None:
        while waiting and len(running) < self.max_running:
            r = waiting[0]
            chain = r.prompt + r.hashes[len(r.prompt) :] if r.admissions else list(r.prompt)
            n_tokens = r.tokens
            hit = self.pool.lookup(chain)
            if hit * BLOCK >= n_tokens:  # the last token is always computed
                hit -= 1
            self.lookups += 1
            if self.report_hits and hit:
                events.append(("stored", chain[:hit], None))
            n_blocks = -(-n_tokens // BLOCK)
            if self.report_hits and hit:
                self.reports.append((step, chain[hit - 1]))
            if not self.pool.can_admit(chain[:hit], n_blocks - hit):
                self.not_admitted_reports += bool(self.report_hits and hit)
                if self.report_hits and hit:
                    self.reports[-1] = (step, chain[hit - 1], "waits")
                return  # looked up again next step
            waiting.popleft()
            r.blocks = [self.pool.touch(h) for h in chain[:hit]]
            new_full = chain[hit:]
            for h in new_full:
                b = self.pool.allocate()
                self.pool.cache(b, h)
                r.blocks.append(b)
            if len(r.blocks) < n_blocks:
                r.blocks.append(self.pool.allocate())  # the partial last block
            events += self._removed()
            if new_full:
                events.append(("stored", new_full, chain[hit - 1] if hit else None))
            r.hashes = list(chain)
            if r.admissions:
                self.readmissions += 1
            else:
                self.query_tokens += n_tokens
                self.hit_tokens += hit * BLOCK
                r.admitted = step
                r.hit_blocks = hit
            r.admissions += 1
            running.append(r)


def agentic_requests(
    agents: int, turns: int, sessions: int = 1, seed: int = 0, system_blocks: int = 8
) -> list[SimRequest]:
    """Agent sessions: each turn re-sends the conversation so far plus a tool output, and is sent a few
    steps after the previous turn's answer (closed loop); each agent runs `sessions` sessions of
    `turns` turns in a row, all with the same system prompt; the agents start at random steps."""
    import random

    rng = random.Random(seed)
    ids = itertools.count(1000)
    system = [next(ids) for _ in range(system_blocks)]
    out = []
    for _ in range(agents):
        previous = None
        for _ in range(sessions):
            context = list(system)
            for _ in range(turns):
                context = context + [next(ids) for _ in range(rng.randint(2, 12))]
                r = SimRequest(
                    list(context),
                    rng.randrange(0, BLOCK),
                    rng.randint(8, 60),
                    arrival=rng.randrange(0, 40),
                    think=rng.randint(1, 20),
                )
                if previous is not None:
                    previous.next_turn = r
                out.append(r)
                previous = r
    return out
