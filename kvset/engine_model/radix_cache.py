"""SGLang's radix cache replayed on its KV events: the engine model of an SGLang stream.

What SGLang 0.5.23 publishes for one request (RadixCache, scheduler): after its prefill, the pages
of its prompt that were not cached are inserted into the tree, one BlockStored chain whose parent is
the last page of the prefix it matched (none when it matched nothing); each further prefill chunk is
inserted the same way, a step later; when it finishes, its output pages are inserted, chained onto
its prompt's last page. The matched prefix itself is never published: it is read here off the parent
chain (every page's parent is known from its own first store). A fully cached prompt stores nothing
at its prefill, so its lookup is seen only when it finishes.

SGLang evicts, when it needs room, the least recently used leaf of the tree that no running request
locks (`--radix-eviction-policy lru`, the default). A lookup and an insert touch the whole path, so a
page is never more recent than its parent: evicting the oldest leaf is evicting the oldest page, and a
request's pages, touched at once, go leaf first. Locked pages (the paths of running requests, and
their own pages not yet in the tree) are never evicted. That is the stack of
kvset.engine_model.free_queue, replayed as vLLM's block pool is: a lookup QUERYs and PINs its path,
pages a request computes are PINned, its finish RELEASEs everything from its last page to its first
(the root released last, so it is the newest). A page is a hit in a pool of C pages iff its
distance D <= C: the prediction at max_total_num_tokens / page_size and every other pool at once. The
distance also counts what the pool holds outside the tree (`private_pages`).

A request's finish is its output store (a store chained onto its last page that is not its next
prefill chunk: see CHUNK_MIN_TOKENS); one whose output filled no page finishes unseen, after 1.5
times the 95th percentile of the time the others took, or earlier when a later request's lookup
holds its last page (the agent's next turn).

`--radix-eviction-policy lfu` is replayed the same way on kvset.engine_model.radix_lfu's stack (pages
by SGLang's hit count, then last access): the hit counts are read off the lookups (each one adds one
to the pages of its path) and the stores (a stored page starts at 1). `priority`, `fifo`, `mru`,
`filo` and `slru` are not replayed: priorities are not in the events; fifo and filo order by a node's
creation, which a split renews, so a page's place changes while it waits; mru evicts the newest leaf,
whose place among the pages depends on which leaves the pool already lost; slru's segments depend on
the pool. Pure: values in, values out.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np

from kvset.engine_model.free_queue import ABSENT, PIN, PINNED, QUERY, RELEASE, FreeQueue
from kvset.engine_model.prefix_chain import PrefixChain
from kvset.engine_model.radix_lfu import LfuQueue
from kvset.engine_model.records import (
    CAUSE_BEYOND_HORIZON,
    CAUSE_FIRST_TIME,
    INFINITE,
    MODEL_HORIZON,
    FinishedOutputs,
    add_query,
)
from kvset.types import RADIX_EVICTION_POLICIES

REPLAYED_POLICIES = RADIX_EVICTION_POLICIES
MODEL_PREFIX = "SGLang radix-cache replay"
MODEL_NAME = f"{MODEL_PREFIX} (lru)"


def model_name(policy: str) -> str:
    return f"{MODEL_PREFIX} ({policy})"


MIN_LAG_BATCHES = 3  # the shortest run a request without an output store is given
# A store onto a running request's last page in the very next batch, after a store of this many tokens
# or more, is its next prefill chunk (SGLang's chunked_prefill_size is 2048 or more by default);
# any other is its output, stored when it finishes.
CHUNK_MIN_TOKENS = 1024
DURATION_SAMPLES = 256
DEFAULT_DURATION = 64  # batches a request runs, until measured
FORGOTTEN_MEMORY = 1 << 20
TIMED_OUT_MEMORY = 4096
LAG_QUANTILE = 0.95  # of the measured runs (first store to output store), in batches ...
LAG_MARGIN = 1.5  # ... times this: how long a request without an output store is taken to run


@dataclass
class RadixCounts:
    requests: int = 0  # finished requests handed out
    prefix_pages: int = 0  # cached-prefix pages read off the parent chain
    computed_pages: int = 0  # prompt pages the requests computed (stored at prefill)
    output_pages: int = 0  # stored at the finish: pinned, never queried
    finished_by_store: int = 0
    finished_by_evidence: int = 0  # a later request's lookup held its last page
    finished_by_time: int = 0  # its output filled no page: after the measured median run
    inserts: int = 0  # tree inserts (a prefill, a chunk, an output): the nodes SGLang evicts whole
    insert_pages_squared: int = 0  # the sum of their sizes squared (pages): how large a node evicted is
    late_outputs: int = 0  # output stores of requests already finished by time


@dataclass
class _Request:
    id: int
    start: int  # batch of its first store
    ts: float
    last_store: int
    tail: int  # its last page
    held: list[np.ndarray] = field(default_factory=list)
    keys: list[np.ndarray] = field(default_factory=list)  # accesses in chain order
    tokens: list[np.ndarray] = field(default_factory=list)  # query tokens (0 for output pages)
    dt: list[np.ndarray] = field(default_factory=list)
    dq: list[np.ndarray] = field(default_factory=list)
    cause: list[np.ndarray] = field(default_factory=list)
    qtokens: list[np.ndarray] = field(default_factory=list)
    prefix_dt: int = 0
    prefix_dq: int = 0
    prefix_cause: int = 0
    last_store_tokens: int = 0
    finishing: bool = False  # its output store came in this batch: it finishes at the batch's end
    insert_pages: int = 0  # of its current insert so far


class RadixReplay(FinishedOutputs):
    """One SGLang rank's requests from its BlockStored events, and its radix cache replayed on them.

    The same outputs as kvset.engine_model.replay.RequestReplay: accesses per finished request, and the
    model's distances per query page."""

    def __init__(self, horizon: int = MODEL_HORIZON, policy: str = "lru") -> None:
        if policy not in REPLAYED_POLICIES:
            raise ValueError(
                f"radix eviction policy {policy!r} is not replayed: {', '.join(REPLAYED_POLICIES)}"
            )
        self.policy = policy
        self.name = model_name(policy)
        self.queue: FreeQueue | LfuQueue = self._new_queue(horizon)
        self.counts = RadixCounts()
        self.chains = PrefixChain()
        self._running: dict[int, _Request] = {}  # by id
        self._by_tail: dict[int, _Request] = {}  # a running request's last page -> it
        self._durations: deque[int] = deque(maxlen=DURATION_SAMPLES)
        self._timed_out: OrderedDict[int, int] = OrderedDict()  # last page of a request finished by time
        self.finish_lag = DEFAULT_DURATION
        self._forgotten: set[int] = set()
        # the pages a radix node ends at: an insert's last page, and a lookup's (where it splits a node)
        self._node_ends: set[int] = set()
        self._batch = -1
        self._ts = 0.0
        self._next_id = 0
        self._init_outputs()

    def _new_queue(self, horizon: int) -> FreeQueue | LfuQueue:
        return LfuQueue(horizon) if self.policy == "lfu" else FreeQueue(horizon)

    def _counted(self, keys: np.ndarray) -> None:
        """A lookup passed through these pages (lfu's hit counts)."""
        if isinstance(self.queue, LfuQueue):
            self.queue.counted(keys)

    def removed(self, keys: np.ndarray) -> None:
        """The engine evicted these pages (lfu only: see LfuQueue.removed)."""
        if isinstance(self.queue, LfuQueue):
            self.queue.removed(keys)

    def _created(self, keys: np.ndarray) -> None:
        """These pages were stored: a new node's hit count (lfu's)."""
        if isinstance(self.queue, LfuQueue):
            self.queue.created(keys)

    # ----------------------------------------------------------------- events
    def begin_batch(self, ts: float) -> None:
        self._batch += 1
        self._ts = ts
        for request in list(self._running.values()):
            if request.finishing:
                self._finish(request)
            elif request.last_store + self.finish_lag < self._batch:
                self.counts.finished_by_time += 1
                self._finish(request)
                self._timed_out[request.tail] = request.id
                if len(self._timed_out) > TIMED_OUT_MEMORY:
                    self._timed_out.popitem(last=False)

    def stored(self, keys: np.ndarray, tokens: np.ndarray, parent: int | None, page_tokens: int) -> None:
        if not len(keys):
            return
        self.chains.stored(keys, parent)
        request = self._by_tail.pop(parent, None) if parent is not None else None
        if request is not None:
            self._continue(request, keys, tokens)
            return
        if parent is not None and self._timed_out.pop(parent, None) is not None:
            # the output of a request taken to have finished already: pages, no lookup
            late = _Request(self._next_id, self._batch, self._ts, self._batch, parent, finishing=True)
            self._next_id += 1
            self.counts.late_outputs += 1
            self._node_stored(None, keys)
            self._running[late.id] = late
            self._output(late, keys)
            return
        request = _Request(self._next_id, self._batch, self._ts, self._batch, int(keys[-1]))
        self._next_id += 1
        self.counts.inserts += 1
        if parent is not None:
            self._node_end(parent)
            prefix = self.chains.chain(parent)
            self._evidence(prefix)
            self._query(request, prefix, np.full(len(prefix), page_tokens, dtype=np.int64))
            self._counted(prefix)
            self.counts.prefix_pages += len(prefix)
        self._query(request, keys, tokens)
        # after the query: these pages' distances come from the nodes they were in when last cached
        self._node_stored(None, keys)
        self._created(keys)
        self._grow_insert(request, len(keys))
        request.last_store_tokens = int(tokens.sum())
        self.counts.computed_pages += len(keys)
        self._running[request.id] = request
        self._by_tail[request.tail] = request

    def _continue(self, request: _Request, keys: np.ndarray, tokens: np.ndarray) -> None:
        if request.finishing:  # more of its output (one event per page): the same node, longer
            self._node_stored(request.tail, keys)
            self._output(request, keys)
            return
        same_insert = self._batch == request.last_store  # (one event per page)
        if same_insert or (
            self._batch == request.last_store + 1 and request.last_store_tokens >= CHUNK_MIN_TOKENS
        ):
            # more of its prefill, or its next prefill chunk (chunks come step after step, each
            # chunked_prefill_size long)
            self.counts.inserts += not same_insert
            self._query(request, keys, tokens)
            self._node_stored(request.tail if same_insert else None, keys)
            self._created(keys)
            if not same_insert:
                request.insert_pages = 0
            self._grow_insert(request, len(keys))
            self.counts.computed_pages += len(keys)
            added = int(tokens.sum())
            request.last_store_tokens = request.last_store_tokens + added if same_insert else added
            request.last_store, request.tail = self._batch, int(keys[-1])
            self._by_tail[request.tail] = request
            return
        # its finish: the output pages join the tree, then (at the batch's end) the request lets go
        self._durations.append(self._batch - request.start)
        if len(self._durations) >= 16 and len(self._durations) % 16 == 0:
            # a generous bound: finishing a running request early releases its path too soon
            lag = LAG_MARGIN * float(np.quantile(self._durations, LAG_QUANTILE))
            self.finish_lag = max(MIN_LAG_BATCHES, int(lag))
        self.counts.finished_by_store += 1
        self._node_stored(None, keys)
        self.counts.inserts += 1
        request.finishing, request.ts, request.insert_pages = True, self._ts, 0
        self._output(request, keys)

    def _grow_insert(self, request: _Request, pages: int) -> None:
        before = request.insert_pages
        request.insert_pages += pages
        self.counts.insert_pages_squared += request.insert_pages**2 - before**2

    def _output(self, request: _Request, keys: np.ndarray) -> None:
        self._created(keys)
        self._grow_insert(request, len(keys))
        self._pin(request, keys)
        request.keys.append(keys)
        request.tokens.append(np.zeros(len(keys), dtype=np.int64))
        self.counts.output_pages += len(keys)
        request.tail = int(keys[-1])
        self._by_tail[request.tail] = request

    def _evidence(self, prefix: np.ndarray) -> None:
        """A lookup holding a running request's last page: that request has finished (an agent's next
        turn, whose history it is)."""
        for page in prefix[-1:].tolist():
            other = self._by_tail.get(page)
            if other is not None and other.last_store < self._batch:
                self.counts.finished_by_evidence += 1
                self._finish(other)

    # ----------------------------------------------------------------- the replay
    def _query(self, request: _Request, keys: np.ndarray, tokens: np.ndarray) -> None:
        n = len(keys)
        ops = np.empty(2 * n, dtype=np.int8)
        ops[0::2], ops[1::2] = QUERY, PIN
        pos, pinned, forgot = self.queue.run(ops, np.repeat(keys, 2))
        self._forget(forgot)
        pos, pinned = pos[0::2], pinned[0::2]
        dq = np.where(pos == PINNED, 1, np.where(pos == ABSENT, INFINITE, pos)).astype(np.int64)
        # a cached page also waits behind the pages running requests hold outside the tree: the
        # partial page past each one's last full page, and the output it has decoded so far
        held = int(round(self.private_pages() * len(self._running)))
        dt = np.where(pos > 0, pos + pinned + held, dq).astype(np.int64)
        # SGLang evicts a whole leaf node: a page goes with the deepest page of its node, the first
        # of the node that a pool evicts (the deepest is released first)
        dt, dq = self._node_fate(keys, dt), self._node_fate(keys, dq)
        cause = np.zeros(n, dtype=np.int8)
        for i in np.flatnonzero(pos == ABSENT).tolist():
            cause[i] = CAUSE_BEYOND_HORIZON if int(keys[i]) in self._forgotten else CAUSE_FIRST_TIME
        add_query(request, keys, dt, dq, cause, tokens)  # a match is a longest prefix, as in vLLM
        request.keys.append(keys)
        request.tokens.append(tokens)

    def _node_stored(self, old: int | None, keys: np.ndarray) -> None:
        """An insert stored these pages: one radix node (or more of it, when it went on from `old`).
        SGLang inserts the unmatched part of a key as one new node, so a boundary left inside it by
        an earlier life of these pages (stored in pieces, evicted, recomputed at once) is gone: the
        node is evicted whole again."""
        if old is not None:
            self._node_ends.discard(old)
        if len(keys) > 1:
            self._node_ends.difference_update(keys[:-1].tolist())
        self._node_end(int(keys[-1]))

    def _node_end(self, page: int) -> None:
        """A radix node ends at this page: an insert's last page, or a lookup's (it splits there)."""
        if len(self._node_ends) > FORGOTTEN_MEMORY:
            self._node_ends.clear()
        self._node_ends.add(page)

    def _node_fate(self, keys: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Each page's distance raised to the largest of its node's pages in this chain, the node's
        deepest first: the chain cut after each page a node ends at (the chain's last page ends one)."""
        ends = self._node_ends
        out = d.copy()
        deepest = out[-1] if len(out) else 0
        for i in range(len(keys) - 1, -1, -1):
            deepest = out[i] if int(keys[i]) in ends else max(deepest, out[i])
            out[i] = deepest
        return out

    def private_pages(self) -> float:
        """Pages a running request holds outside the tree, on average: its partial last page, and half
        its output (it is, on average, half way through), the output measured on the finished ones.
        The pool's free pages do not count: SGLang frees pages by evicting whole nodes when an
        allocation finds too few free, so a cached page goes when its node's deepest page does
        (`_node_fate`), whatever the earlier evictions left free."""
        finished = self.counts.finished_by_store
        output = self.counts.output_pages / finished if finished else 0.0
        return 1.0 + output / 2

    def _pin(self, request: _Request, keys: np.ndarray) -> None:
        _, _, forgot = self.queue.run(np.full(len(keys), PIN, dtype=np.int8), keys)
        self._forget(forgot)
        request.held.append(keys)

    def _forget(self, pages: np.ndarray) -> None:
        if len(self._forgotten) > FORGOTTEN_MEMORY:
            self._forgotten.clear()
        self._forgotten.update(pages.tolist())

    def _finish(self, request: _Request) -> None:
        self._running.pop(request.id, None)
        if self._by_tail.get(request.tail) is request:
            del self._by_tail[request.tail]
        if request.held:
            held = np.concatenate(request.held)
            # its last page first: the root of its path is released last, the newest
            _, _, forgot = self.queue.run(np.full(len(held), RELEASE, dtype=np.int8), held[::-1])
            self._forget(forgot)
        self.counts.requests += 1
        keys = np.concatenate(request.keys).astype(np.uint64, copy=False)
        self._add_finished(keys, np.concatenate(request.tokens).astype(np.int64), request.ts)
        if request.dt:
            self._add_model(
                (
                    np.concatenate(request.dt),
                    np.concatenate(request.dq),
                    np.concatenate(request.cause),
                    np.concatenate(request.qtokens),
                    request.ts,
                ),
                keys,
            )

    def flush(self) -> None:
        """The stream went quiet: every running request has finished."""
        for request in list(self._running.values()):
            self._finish(request)

    def reset_cache(self) -> None:
        """The engine flushed its tree (AllBlocksCleared, restart): start empty."""
        self.flush()
        self.queue = self._new_queue(self.queue.horizon)
        self.chains.clear()
        self._forgotten.clear()
