"""One publisher endpoint of KV events (one data-parallel rank) as the tracker keeps it, and what a
BlockStored event says about its blocks' tokens."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvset.engine.kv_event_sequence import KvEventSequence
from kvset.engine.kv_events import MAX_BLOCK_SIZE
from kvset.engine.resident_set import ResidentBlocks
from kvset.engine.stream_shape import ONE_EVENT_PER_PAGE, RADIX_INSERTS, PageChainGrouping, StreamShape
from kvset.engine_model.radix_cache import RadixReplay
from kvset.engine_model.replay import RequestReplay

NO_GROUP = -1  # events without group_idx (older vLLM, SGLang): always counted


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

    def fed(self) -> tuple[RequestReplay | PageChainGrouping | RadixReplay, ...]:
        """The groupings the events go to: all three while the shape is undecided, then its own."""
        if self.shape.decided is None:
            return (self.replay, self.pages, self.radix)
        if not self.others_let_go:
            self._let_go_of_others()
        return (self.grouping(),)

    def _let_go_of_others(self) -> None:
        """The shape is decided: the groupings of the other shapes are fed no more, so their state of
        the first stores (tables of up to 64 MiB under a flood of 10,000-block stores) is let go,
        unflushed: their requests would only be finished to be dropped (half a second of a flood)."""
        chosen = self.grouping()
        if chosen is not self.replay:  # (its KV cache groups stay: the group choice reads them)
            self.replay.reset_cache()
        if chosen is not self.pages:
            self.pages = PageChainGrouping()
        if chosen is not self.radix:
            self.radix = RadixReplay(self.radix.queue.horizon, self.radix.policy)
        self.others_let_go = True

    def reset_groupings(self) -> None:
        """The engine dropped its cache: every grouping starts again."""
        self.replay.reset_cache()
        self.pages.reset()
        self.radix.reset_cache()
