"""One publisher endpoint of KV events (one data-parallel rank) as the tracker keeps it, and what a
BlockStored event says about its blocks' tokens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kvset.engine.kv_event_sequence import KvEventSequence
from kvset.engine.kv_events import MAX_BLOCK_SIZE
from kvset.engine.resident_set import ResidentBlocks
from kvset.engine.stream_shape import (
    ONE_EVENT_PER_PAGE,
    RADIX_INSERTS,
    REQUEST_STEPS,
    PageChainGrouping,
    StreamShape,
)
from kvset.engine_model.radix_cache import RadixReplay
from kvset.engine_model.replay import RequestReplay

NO_GROUP = -1  # events without group_idx (older vLLM, SGLang): always counted
# What SGLang's radix replay is given while the shape is undecided is held up to this many calls and
# blocks (a shape is decided after 32 stores; a stream of removals alone would hold for ever); past
# either, the calls are made and the replay is fed as events come until the shape is decided.
RADIX_HELD_CALLS = 4096
RADIX_HELD_BLOCKS = 1 << 19
# The shortest quiet wait, whatever the engine's steps: a margin for kvset's own pauses (a thread
# descheduled on a loaded machine while the engine's messages wait in the socket)
QUIET_MIN_SECONDS = 0.25


def event_block_size(n_blocks: int, block_size: int, token_count: int) -> int | None:
    """The tokens per block a BlockStored event says: its block_size, else its token_ids over its
    blocks when they divide evenly (None: it does not say)."""
    if block_size > 0:
        return block_size
    if token_count > 0 and token_count % n_blocks == 0 and token_count // n_blocks <= MAX_BLOCK_SIZE:
        return token_count // n_blocks
    return None


def block_tokens(n_blocks: int, block_size: int, token_count: int) -> np.ndarray:
    """Tokens each stored block covers: block_size each, a shorter last block if token_ids say so."""
    tokens = np.full(n_blocks, block_size, dtype=np.int64)
    if token_count > 0:
        last = token_count - (n_blocks - 1) * block_size
        if 0 < last < block_size:
            tokens[-1] = last
    return tokens


class HeldRadixCalls:
    """SGLang's radix replay's inputs while a stream's shape is undecided, held: made on it once the
    shape is radix inserts, dropped once it is another. Made as they came, a vLLM flood's first 32
    stores of 10,000 blocks cost 20 ms each there (0.6 s of CPU before its first figure), for a
    grouping that a vLLM stream never uses."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., None], tuple[object, ...]]] = []
        self.blocks = 0

    @property
    def full(self) -> bool:
        return len(self.calls) >= RADIX_HELD_CALLS or self.blocks >= RADIX_HELD_BLOCKS

    def begin_batch(self, ts: float) -> None:
        self.calls.append((RadixReplay.begin_batch, (ts,)))

    def stored(self, keys: np.ndarray, tokens: np.ndarray, parent: int | None, page_tokens: int) -> None:
        self.calls.append((RadixReplay.stored, (keys, tokens, parent, page_tokens)))
        self.blocks += len(keys)

    def removed(self, keys: np.ndarray) -> None:
        self.calls.append((RadixReplay.removed, (keys,)))
        self.blocks += len(keys)

    def flush(self) -> None:
        self.calls.append((RadixReplay.flush, ()))

    def reset_cache(self) -> None:
        self.calls.append((RadixReplay.reset_cache, ()))

    def made_on(self, radix: RadixReplay) -> None:
        """Make the held calls, in their order."""
        for method, args in self.calls:
            method(radix, *args)
        self.calls, self.blocks = [], 0


@dataclass
class Publisher:
    """One publisher endpoint (one data-parallel rank): its sequence and its engine's resident sets."""

    address: str
    sequence: KvEventSequence
    groups: dict[int, ResidentBlocks] = field(default_factory=dict)  # by KV cache group (NO_GROUP)
    rank: int | None = None
    batches: int = 0
    accesses: int = 0
    replay: RequestReplay = field(default_factory=RequestReplay)
    # the stream's shape, and the grouping that keeps every page whatever the shape (stream_shape)
    shape: StreamShape = field(default_factory=StreamShape)
    pages: PageChainGrouping = field(default_factory=PageChainGrouping)
    radix: RadixReplay = field(default_factory=RadixReplay)  # SGLang's radix cache, for its streams
    # its inputs while the shape is undecided (None: fed as events come)
    radix_held: HeldRadixCalls | None = field(default_factory=HeldRadixCalls)
    last_batch_at: float | None = None  # wall time of its last accepted batch
    last_batch_now: float | None = None  # ... and monotonic time of its last message
    tail_asked: bool = False  # since that message
    flushed: bool = True
    others_let_go: bool = False  # the groupings of the shapes not chosen, once it is decided

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else self.address

    def grouping(self) -> RequestReplay | PageChainGrouping | RadixReplay:
        """The grouping into requests whose accesses count, by the stream's shape (vLLM's until decided)."""
        shape = self.shape.decided
        if shape == ONE_EVENT_PER_PAGE:
            return self.pages
        return self.radix if shape == RADIX_INSERTS else self.replay

    def fed(self) -> tuple[RequestReplay | PageChainGrouping | RadixReplay | HeldRadixCalls, ...]:
        """The groupings the events go to: all three while the shape is undecided (SGLang's radix
        replay's held, `radix_feed`), then its own."""
        if self.shape.decided is None:
            radix = self.radix_feed()
            return (self.replay, self.pages) if radix is None else (self.replay, self.pages, radix)
        self.settle()
        return (self.grouping(),)

    def radix_feed(self) -> RadixReplay | HeldRadixCalls | None:
        """Where SGLang's radix replay's inputs go: the held calls while the shape is undecided (the
        replay itself once they are too many), the replay once the shape is radix inserts, nowhere
        once it is another."""
        if self.shape.decided is not None:
            self.settle()
            return self.radix if self.shape.decided == RADIX_INSERTS else None
        held = self.radix_held
        if held is not None and held.full:
            held.made_on(self.radix)
            self.radix_held = held = None
        return self.radix if held is None else held

    def settle(self) -> None:
        """Once the shape is decided, the groupings of the other shapes are fed no more, so their state
        of the first stores (tables of up to 64 MiB under a flood of 10,000-block stores) is let go,
        unflushed: their requests would only be finished to be dropped (half a second of a flood).
        SGLang's radix replay, chosen, is given what was held for it."""
        if self.shape.decided is None or self.others_let_go:
            return
        chosen = self.grouping()
        if chosen is not self.replay:  # (its KV cache groups stay: the group choice reads them)
            self.replay.reset_cache()
        if chosen is not self.pages:
            self.pages = PageChainGrouping()
        if chosen is self.radix:
            if self.radix_held is not None:
                self.radix_held.made_on(self.radix)
        elif self.radix_held is None:  # it was fed (too much was held): its tables are let go
            self.radix = RadixReplay(self.radix.queue.horizon, self.radix.policy)
        self.radix_held = None
        self.others_let_go = True

    def quiet_wait(self, longest: float, block_size: int | None) -> float:
        """How long this publisher stays silent before its requests are taken to have finished (at most
        `longest`). vLLM's request steps: a running request stores a block at least every block_size
        steps (one output token a step; a prefill chunk stores every step) and ends fewer than
        block_size steps after its last block, so a silence as long as the block_size longest steps
        lately seen (of the last 512 gaps between consecutive batches) leaves none running: a fast
        engine is finished sooner. Not for the other shapes (SGLang inserts a request's pages at its
        end: a request decoding for long publishes nothing), nor before 64 gaps were seen."""
        if self.shape.decided != REQUEST_STEPS or not block_size:
            return longest
        steps = self.replay.steps.longest_steps(block_size)
        return longest if steps is None else min(longest, max(QUIET_MIN_SECONDS, steps))

    def reset_groupings(self) -> None:
        """The engine dropped its cache: every grouping starts again."""
        self.replay.reset_cache()
        self.pages.reset()
        radix = self.radix_feed()
        if radix is not None:
            radix.reset_cache()
