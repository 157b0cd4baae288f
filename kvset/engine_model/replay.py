"""One engine's BlockStored events grouped into requests, and vLLM's block pool replayed on them.

What vLLM 0.33 publishes for one request (kv_cache_report_mode "full"):
- at each lookup (KVCacheManager.get_computed_blocks) a BlockStored of its cached prefix, without
  parent. A request waiting for space is looked up again every scheduler step, so the same prefix
  is *re-reported* until the request is admitted (or until its cached prefix changes);
- at admission (allocate_slots) a BlockStored of the blocks it computes, whose parent is the last
  block of that prefix; then one per prefill chunk, then one block per 16 output tokens (decode);
- nothing when it finishes: its blocks go to the free queue, last block first (no event).

So here a parentless store whose blocks are all resident is a *hit report*, held until a store
chaining onto its last block confirms it (the request was admitted); a second report of the same
chain in a later batch means the first was a lookup that was not admitted (dropped, counted), and so
does a later report of a chain nested in it or holding it (the waiting request's cached prefix
shrank or grew: block hashes are chained, so equal hashes at one position mean equal prefixes). A
report neither confirmed nor superseded within `pending_batches` is an admission that stored nothing
(its prompt was cached but for a partial block, and its output filled no block).

Without hit reports (vLLM's default "incremental" mode) a request's first store still hangs on the
last block of the prefix its lookup found (its parent): that parent and its ancestors among the
resident blocks (kvset.engine_model.prefix_chain) are its hit blocks, looked up in the batch of that
store. A request whose prompt was cached but for a partial block and whose answer filled no block
stores nothing in this mode: it is not seen at all (the operating point sizes that from /metrics).

A store is a decode block when it is one block and the request stored nothing in the batch before,
or stored last more than 1.5 engine steps before (prefill chunks come step after step; a step is
the 10th percentile of the time between consecutive batches). A request whose cached prefix ends in a block another
request stored, and whose prefill only recomputes that request's blocks, is that request readmitted
after a preemption: vLLM keeps readmissions out of its prefix-cache counters, and so does this.

The model (see kvset.engine_model.free_queue): vLLM's pinned blocks and free queue, replayed on the requests'
admissions and estimated finishes. A request finishes unseen: its last output tokens fill no block.
vLLM (scheduler.py, kv_cache_manager.py) caches a block in the step that computes its last token,
and frees a request in the step that samples its last token, which it never computes: with L tokens
computed and blocks of B tokens, the last stored block ends at B*floor(L/B) and the request stays
L mod B steps more. An answer ends anywhere in its last block, so that is uniform over 0..B-1:
(B-1)/2 steps on average, a share (B-1)/(2B) of the B steps between two output blocks. So a request
is taken to finish that share of the way to its next output block after its last stored block (the
way measured in event batches: the median gap between the output blocks of requests; a step that
stores nothing publishes no batch, so batches are counted, not steps), or earlier when another
request's lookup or store holds one of its blocks (the agent's next turn, or its own readmission),
or in the step before a request that waited is admitted (vLLM admits it once room is made: `_room_made`).
The replay runs `delay_batches` behind the stream, so that these are known in time. At each lookup it gives
every prompt block its free-queue distance D: the block is a hit in a pool of C blocks iff the
prefix up to it has D <= C. A finished request hands its blocks to the analyzer as one request (in
chain order; `--order reverse` is vLLM's freeing order) and its distances to the engine model.

The hit reports' dedupe is kvset.engine_model.hit_reports, the lookups and pins on the free queue
kvset.engine_model.pool_operations (mixins of RequestReplay).
"""

from __future__ import annotations

from collections import OrderedDict, deque

import numpy as np

from kvset.engine_model.engine_steps import EngineSteps
from kvset.engine_model.free_queue import RELEASE, FreeQueue
from kvset.engine_model.hit_reports import HitReports
from kvset.engine_model.kv_groups import GroupCopies, KvGroup
from kvset.engine_model.pool_operations import PoolOperations
from kvset.engine_model.prefix_chain import PrefixChain
from kvset.engine_model.records import (
    MODEL_HORIZON,
    FinishedOutputs,
    OpenRequest,
    Report,
    RequestCounts,
)
from kvset.engine_model.u64_map import U64Map

_GOLDEN = 0.6180339887498949  # request ids times it, mod 1: spread evenly over [0, 1)
DELAY_BATCHES = 32
OUTPUT_BLOCK_GAP = 16  # batches between two output blocks of a request until measured (a step a batch)
GAP_SAMPLES = 512
PENDING_BATCHES = 24  # a hit report waits this long for its admission's store (a prompt cached but
# for its partial last block stores nothing until its first output block, 16 steps on); below
# DELAY_BATCHES, so that an admission found at the end is still replayed where it happened
OWNER_KEEP_BATCHES = 4096  # how long a finished request's blocks still name it (readmissions)
# ... and at most this many of their blocks: 4,096 batches of 10,000 blocks held 41 M keys (GBs)
OWNER_KEEP_BLOCKS = MODEL_HORIZON


class RequestReplay(HitReports, PoolOperations, FinishedOutputs):
    """One engine's (one rank's) requests from its BlockStored events, and the block-pool replay."""

    def __init__(
        self,
        delay_batches: int = DELAY_BATCHES,
        finish_share: float | None = None,
        pending_batches: int = PENDING_BATCHES,
        horizon: int = MODEL_HORIZON,
    ) -> None:
        if finish_share is not None and not 0 < finish_share <= 1:
            raise ValueError("finish_share must be in (0, 1]")
        self.delay = delay_batches
        self.finish_share = finish_share  # None: the uniform end's, from the block size (_lag)
        self._gaps: deque[int] = deque(maxlen=GAP_SAMPLES)  # batches between consecutive output blocks
        self.block_size = 0  # tokens of a full block, the largest a store said
        self.finish_lag = self._lag()  # the stay in whole batches, as the snapshot shows it
        self.steps = EngineSteps()  # the engine's step, from the batches' time stamps
        self.pending_batches = pending_batches
        self.counts = RequestCounts()
        self.filling = 1  # blocks each running request holds that are not full yet (uncached)
        self.queue = FreeQueue(horizon)
        # parent links of the resident blocks: the hits the default (incremental) mode leaves out
        self.chain = PrefixChain()
        self.groups = GroupCopies()  # a hybrid model's other KV cache groups, in the same pool
        # blocks the free queue forgot beyond its horizon (a miss of one is not a first access), in
        # two generations; numba tables: 17 bytes a cell, not a Python int each
        self._forgotten_recent = U64Map()
        self._forgotten_older = U64Map()
        self._batch = -1  # index of the current batch
        self._ts: dict[int, float] = {}  # batch index -> its time, while in the delay line
        self._items: OrderedDict[int, list[tuple[str, OpenRequest, int]]] = (
            OrderedDict()
        )  # batch -> [(op, request, store index)]
        self._reports: OrderedDict[int, Report] = OrderedDict()  # last key -> report
        self._dropped: OrderedDict[int, Report] = OrderedDict()  # recently dropped, by last key
        self._tails: dict[int, OpenRequest] = {}  # last key of an open request -> it
        self._owner = U64Map()  # key -> id of the request that stored it last
        self._requests: dict[int, OpenRequest] = {}  # open (not finished in the replay) requests
        self._finished_keys: OrderedDict[int, tuple[int, list[np.ndarray]]] = (
            OrderedDict()
        )  # id -> (batch, keys)
        self._finished_sets: dict[int, set[int]] = {}
        self._finished_blocks = 0  # blocks in _finished_keys
        self._running: dict[int, OpenRequest] = {}  # admitted in the replay, not yet finished
        self._waiting: dict[int, int] = {}  # batch -> lookups in it that the engine did not admit
        self._finished_in = -1  # the last replayed batch at whose end a request finished
        self._replayed = -1  # the last replayed batch
        self.flushing = False  # a flush begun, the delay line not yet replayed to its end (flush)
        self._next_id = 0
        self._init_outputs()
        self._out_groups: list[tuple[int, np.ndarray, np.ndarray, float]] = []  # (group, keys, tokens, time)

    # ----------------------------------------------------------------- grouping (live)
    def begin_batch(self, ts: float) -> None:
        if self.flushing:  # the stream goes on after a quiet moment: the flush ends first
            self.flush()
        previous = self._ts.get(self._batch)
        if previous is not None and ts > previous:
            self.steps.observe(ts - previous)
        self._batch += 1
        self._ts[self._batch] = ts
        self._items[self._batch] = []
        self._expire_reports()
        self._replay_upto(self._batch - self.delay)

    def stored(self, keys: np.ndarray, tokens: np.ndarray, parent: int | None, all_resident: bool) -> None:
        """One counted BlockStored of the current batch; `all_resident`: every block was cached before."""
        if self._batch < 0:
            raise RuntimeError("begin_batch first")
        b = self._batch
        if len(tokens) and int(tokens.max()) > self.block_size:
            self.block_size = int(tokens.max())
            self.finish_lag = self._lag()  # its share depends on the block size
        if parent is None and all_resident:
            self.chain.stored(keys, None)
            self._report(keys, tokens)
            return
        request = None
        if parent is not None:
            request = self._confirm(parent)
            if request is None:
                request = self._continuation(parent, keys)
            if request is None:
                request = self._reconstructed(parent)
        if request is None:
            request = self._open(np.empty(0, np.uint64), np.empty(0, np.int64), parent, b)
            if parent is None:
                self.counts.without_report += 1
            else:
                self.counts.unknown_prefix += 1
        self.chain.stored(keys, parent)
        # an output block: one block after a batch without the request's stores (prefill chunks come
        # step after step), or a first store after the lookup (the prompt was cached but its last part)
        previous = request.last_store if request.last_store >= 0 else request.reported
        since = None if request.last_store_ts is None else self._ts[b] - request.last_store_ts
        later = b > previous + 1 or bool(
            since is not None and self.steps.step_seconds and since > 1.5 * self.steps.step_seconds
        )
        decode = request.decode_from is not None or (len(keys) == 1 and later)
        if decode and request.decode_from is None:
            request.decode_from = request.blocks
        elif decode and request.stores[-1][3] and len(keys) == 1:
            self._gaps.append(b - request.last_store)
            if len(self._gaps) % 32 == 0:
                self.finish_lag = self._lag()
        recomputed = bool(all_resident) and not decode
        request.stores.append((b, keys, tokens, decode, recomputed))
        if decode:
            request.output_keys.update(keys.tolist())
        else:
            request.last_prompt = int(keys[-1])
        request.last_store = b
        request.last_store_ts = self._ts[b]
        self._items[b].append(("S", request, len(request.stores) - 1))
        self._tails[int(keys[-1])] = request
        # the blocks' owners until now, read while they are made this request's (one pass, not two)
        of_parent = self._owner.get(self._parent_key(parent))
        of_keys = self._owner.swap(keys, request.id)
        if len(request.stores) == 1 and not decode:
            request.restores = int(of_keys[0][0]) if of_keys[1][0] else None
        read = (np.concatenate([of_parent[0], of_keys[0]]), np.concatenate([of_parent[1], of_keys[1]]))
        self._evidence(parent, keys, request, read)

    def add_group(self, group: KvGroup) -> None:
        """Another KV cache group shares the pool: its copies of every block are replayed beside the
        primary group's (kvset.engine_model.kv_groups)."""
        self.groups.add(group)

    def group_stored(self, group_idx: int, keys: np.ndarray, report: bool) -> None:
        """Another group's store in the current batch (a Mamba group's names the blocks with a state)."""
        if not report:
            self.groups.stored(group_idx, keys, self._batch)

    def removed(self, keys: np.ndarray) -> None:
        """The engine evicted these blocks (BlockRemoved): no later lookup can have hit them."""
        self.chain.removed(keys.tolist())

    def _reconstructed(self, parent: int) -> OpenRequest | None:
        """A new request whose hits were not reported: its cached prefix is the resident chain ending
        in `parent`, looked up now (None: a link of that chain is not known)."""
        hit = self.chain.walk(parent)
        if hit is None:
            return None
        self.counts.reconstructed += 1
        self.counts.reconstructed_blocks += len(hit)
        return self._open(hit, np.full(len(hit), self.block_size, np.int64), None, self._batch)

    def _lag(self) -> int:
        gap = float(np.median(self._gaps)) if len(self._gaps) >= 16 else OUTPUT_BLOCK_GAP
        share = self.finish_share
        if share is None:  # a uniform end in the last block: (B-1)/2 of its B steps (module docstring)
            size = self.block_size or OUTPUT_BLOCK_GAP
            share = (size - 1) / (2 * size)
        self._stay = min(self.delay - 1.0, max(1.0, share * gap))  # batches, not rounded
        return int(min(self.delay - 1, max(1, round(self._stay))))

    def _stays(self, request: OpenRequest) -> int:
        """The batches `request` is taken to stay after its last store: the mean stay in whole batches,
        one request rounding up and the next down, so that their mean is the stay itself (7.5 steps
        for blocks of 16, where one rounding for all would hold every request half a batch longer)."""
        return int(self._stay + (request.id * _GOLDEN) % 1.0)

    def _continuation(self, parent: int, keys: np.ndarray) -> OpenRequest | None:
        request = self._tails.get(parent)
        if request is None:
            return None
        if (
            request.finish_seen is not None
            or self._batch - request.last_store > self.delay  # (16 steps between output blocks)
            or (request.decode_from is not None and len(keys) > 1)
        ):
            return None  # not its next chunk or output block: a new request continuing its chain
        del self._tails[parent]
        return request

    def _open(
        self, hit_keys: np.ndarray, hit_tokens: np.ndarray, parent: int | None, reported: int
    ) -> OpenRequest:
        request = OpenRequest(self._next_id, hit_keys, hit_tokens, parent, self._batch, reported)
        self._next_id += 1
        self._requests[request.id] = request
        # replayed where the engine looked it up, when that batch is still in the delay line
        where = reported if reported in self._items else self._batch
        self._items[where].append(("Q", request, -1))
        return request

    @staticmethod
    def _parent_key(parent: int | None) -> np.ndarray:
        """The parent as a key array: one key, or none."""
        return np.array([] if parent is None else [parent], dtype=np.uint64)

    def _evidence(
        self,
        parent: int | None,
        keys: np.ndarray,
        request: OpenRequest | None,
        read: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """A lookup or store holding an open request's output, or its whole prompt once it answers: that
        request has finished (its blocks are another request's prefix: the agent's next turn, or its own
        readmission). A shared prefix it happened to compute first (a system prompt) says nothing.
        `read`: the owners of the parent and keys, when already read (the store's own swap)."""
        me = None if request is None else request.id
        held = np.concatenate([self._parent_key(parent), keys])
        owners, known = self._owner.get(held) if read is None else read
        others = known & (owners != (-1 if me is None else me))
        if not others.any():  # (most blocks are new)
            return
        for k, rid in zip(held[others].tolist(), owners[others].tolist(), strict=True):
            other = self._requests.get(rid)
            if other is None or not (
                k in other.output_keys or (k == other.last_prompt and other.decode_from is not None)
            ):
                continue
            if (
                other.finish_seen is not None
                or other.last_store >= self._batch
                or other.last_store + self._stays(other) < self._batch
            ):
                continue
            other.finish_seen = self._batch
            self._items[self._batch].insert(0, ("F", other, -1))

    def _expire_reports(self, everything: bool = False) -> None:
        cutoff = self._batch + 1 if everything else self._batch - self.pending_batches
        while self._reports:
            last, report = next(iter(self._reports.items()))
            if report.batch >= cutoff:
                break
            del self._reports[last]
            for _ in range(report.count):
                self.counts.admitted_without_store += 1
                self._open(report.keys, report.tokens, None, report.batch)
        while self._dropped and next(iter(self._dropped.values())).batch < cutoff:
            self._dropped.popitem(last=False)
        while self._finished_keys:
            rid, (batch, keys) = next(iter(self._finished_keys.items()))
            if batch >= self._batch - OWNER_KEEP_BATCHES and self._finished_blocks <= OWNER_KEEP_BLOCKS:
                break
            del self._finished_keys[rid]
            self._finished_blocks -= sum(len(arr) for arr in keys)
            self._finished_sets.pop(rid, None)
            for arr in keys:
                self._owner.pop(arr, only=rid)  # (a block stored again since names its new owner)

    def flush(self, batches: int | None = None) -> bool:
        """The stream went quiet: replay everything, and finish every request. With `batches`, replay
        at most that many of the delay line's batches now, the rest at the next calls (`flushing` until
        then; True once done): the same operations in the same order as at once, so that the first
        requests finish after that much work, not after the whole line's. A new batch ends it first."""
        if not self.flushing:
            self._expire_reports(everything=True)
            self.flushing = True
        if batches is not None and len(self._items) > batches:
            self._replay_upto(next(iter(self._items)) + batches - 1)
            return False
        self.flushing = False
        self._replay_upto(self._batch)
        self._items[self._batch] = []  # (the current batch may go on)
        for request in list(self._running.values()):
            self._finish(request, self._batch)
        for request in list(self._requests.values()):  # opened, never admitted by the replay
            self._finish(request, self._batch)
        return True

    def reset_cache(self) -> None:
        """The engine dropped its cache (restart, AllBlocksCleared): finish everything, start empty."""
        self.flush()
        self.queue = FreeQueue(self.queue.horizon)
        self.chain.clear()
        self._forgotten_recent, self._forgotten_older = U64Map(), U64Map()
        self._reports.clear()
        self._dropped.clear()
        self._tails.clear()
        self._waiting.clear()

    # ----------------------------------------------------------------- the replay (delayed)
    def _replay_upto(self, last: int) -> None:
        while self._items and next(iter(self._items)) <= last:
            batch, items = self._items.popitem(last=False)
            self._room_made(batch, items)
            self._replayed = batch
            stepped = False  # the window groups' blocks of the last step are freed (GroupCopies.step)
            for op, request, index in items:
                if op != "F" and not stepped:  # after the finishes of the last step ("F" come first)
                    self.groups.step(self._run, batch)
                    stepped = True
                if op == "F":
                    if not request.released and request.id in self._running:
                        self.counts.finished_by_evidence += 1
                        self._finish(request, batch)
                elif op == "Q":
                    self._running[request.id] = request
                    self._admit(request)
                elif not request.released:
                    self._store(request, index)
            if not stepped:
                self.groups.step(self._run, batch)
            for request in list(self._running.values()):
                if request.last_store + self._stays(request) <= batch:  # (a store seen later moves it on)
                    self.counts.finished_by_lag += 1
                    self._finish(request, batch)
            self._ts.pop(batch - 1, None)
            self._waiting.pop(batch - 1, None)

    def _room_made(self, batch: int, items: list[tuple[str, OpenRequest, int]]) -> None:
        """A lookup the engine did not admit in the last batch, and an admission in this one: vLLM's
        scheduler admits a waiting request only once room is made (a free sequence slot, enough free
        blocks), and a request that finishes makes it in the step before (update_from_output frees it
        before the next schedule). When the replay finished nobody then, the request most likely to
        have ended does: the running one longest past its last store that stores nothing since (its
        answer ends uniformly in its last block, so the longer it ran, the likelier). Without the
        hit reports of full mode no lookup is seen to wait, and nothing changes."""
        if (
            self._waiting.get(batch - 1, 0) <= 0
            or self._finished_in >= batch - 1
            or not any(op == "Q" for op, _, _ in items)
            or any(op == "F" for op, _, _ in items)
        ):
            return
        ended = [r for r in self._running.values() if 0 <= r.last_store < batch]
        if ended:
            self.counts.finished_by_evidence += 1
            self._finish(min(ended, key=lambda r: r.last_store), batch - 1)

    def _finish(self, request: OpenRequest, batch: int) -> None:
        request.released = True
        self._finished_in = max(self._finished_in, batch)
        self._running.pop(request.id, None)
        self._requests.pop(request.id, None)
        if request.held:
            held = np.concatenate(request.held)
            _, _, forgot = self.queue.run(np.full(len(held), RELEASE, dtype=np.int8), held[::-1])
            self._forget(forgot)
        self.groups.release(request, self._run)
        tail = request.tail()
        if tail is not None and self._tails.get(tail) is request:
            del self._tails[tail]
        stored = [s[1] for s in request.stores]
        self._finished_keys[request.id] = (batch, stored)
        self._finished_blocks += sum(len(arr) for arr in stored)
        self._hand_out(request, batch)

    def _readmission_of(self, request: OpenRequest) -> int | None:
        """The request this one readmits after a preemption, if it is one."""
        start = request.hit_keys[-1] if len(request.hit_keys) else request.parent
        if start is None or not request.stores:
            return None
        prefill = [s[1] for s in request.stores if not s[3]]
        # the preempted request stored the first block this one computes again, or, when all was
        # still cached, the block its lookup ended in
        rid = request.restores if prefill else self._owner.get_one(int(start))
        if rid is None or rid == request.id or rid not in self._finished_keys:
            return None
        if not prefill:
            return rid
        theirs = self._finished_sets.get(rid)
        if theirs is None:
            theirs = self._finished_sets[rid] = {
                k for arr in self._finished_keys[rid][1] for k in arr.tolist()
            }
        return rid if all(k in theirs for arr in prefill for k in arr.tolist()) else None

    def _hand_out(self, request: OpenRequest, batch: int) -> None:
        ts = self._ts.get(batch, self._ts.get(self._batch, 0.0))
        self.counts.requests += 1
        readmitted = self._readmission_of(request) is not None
        keys = [request.hit_keys] + [s[1] for s in request.stores]
        tokens = [np.zeros(len(request.hit_keys), np.int64) if readmitted else request.hit_tokens]
        for _, k, t, decode, _ in request.stores:
            tokens.append(np.zeros(len(k), np.int64) if decode or readmitted else t)
        all_keys = np.concatenate(keys).astype(np.uint64, copy=False)
        if len(all_keys):
            all_tokens = np.concatenate(tokens).astype(np.int64, copy=False)
            self._add_finished(all_keys, all_tokens, ts)
            for group, first in self.groups.accessed_from(len(request.hit_keys)):
                self._out_groups.append((group, all_keys[first:], all_tokens[first:], ts))
        if readmitted:
            self.counts.readmissions += 1
            self.counts.readmission_tokens += int(sum(int(t.sum()) for t in request.qtokens))
            return
        if request.parent is not None and not len(request.hit_keys):
            return  # its cached prefix is unknown: its hit rate too
        if request.dt:
            dt, dq = np.concatenate(request.dt), np.concatenate(request.dq)
            if request.raw:
                dt, dq = self.groups.joint(request)
            self._add_model(
                (dt, dq, np.concatenate(request.cause), np.concatenate(request.qtokens), ts), all_keys
            )
        else:
            empty = np.empty(0, np.int64)
            self._add_model((empty, empty, np.empty(0, np.int8), empty, ts), all_keys)

    # ----------------------------------------------------------------- outputs
    @property
    def open_requests(self) -> int:
        return len(self._requests)

    def take_group_accesses(self) -> list[tuple[int, np.ndarray, np.ndarray, float]]:
        """The other KV cache groups' own accesses of the finished requests: (group, keys, tokens, time)."""
        out, self._out_groups = self._out_groups, []
        return out
