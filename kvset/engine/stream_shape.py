"""Which shape a KV event stream has, and a grouping into requests that keeps every access of any shape.

The request grouping of kvset.engine_model.replay was built for vLLM's scheduler: a request's lookup
is one BlockStored of its whole cached prefix, its prefill one store per step of several blocks.
Other publishers send *one event per page* (SGLang's radix cache inserts a node page by page, and
a vLLM publisher may be driven that way): there a parentless page that is already resident is not
a lookup of a waiting request to be dropped but one more page of a request. Read as vLLM's shape,
such a stream loses most of its accesses. So the shape is measured first:

- "request steps": stores of several blocks at once (vLLM's scheduler). The vLLM grouping and
  block-pool model apply;
- "one event per page": (nearly) every store holds one block, and pages of one request follow each
  other chained (a store whose parent is the page stored just before it, in the same batch). Every
  stored page is an access: `PageChainGrouping` groups consecutive chained pages into requests;
- "radix inserts": signed 64-bit hashes, SGLang's: a store per radix-tree insert (its pages
  coalesced into one event, or one event per page), chained onto the prefix it extends, no hit
  reports. SGLang's radix cache is replayed on them (kvset.engine_model.radix_cache), which also keeps
  every page and reads each request's cached prefix off the parent chain;
- and in the first two, whether hit reports are present (stores of pages already resident, without a
  parent) or not (store-only: a request's cached prefix shows only as the parent of the first page it
  stores, as SGLang publishes; `PageChainGrouping` then reads the prefix off the known parent chain).

Until MIN_STORES stores have been seen the shape is undecided; a stream that ends before that is
decided on what it showed. Pure: values in, values out.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from kvset.engine_model.prefix_chain import PrefixChain
from kvset.quantities import plural

REQUEST_STEPS = "request steps"
ONE_EVENT_PER_PAGE = "one event per page"
RADIX_INSERTS = "radix inserts"
MIN_STORES = 32  # stores seen before the shape is decided
PER_PAGE_SHARE = 0.99  # of stores holding one block, for "one event per page"
CONTINUE_BATCHES = 2  # a page chained onto a request's last page this soon after continues it


@dataclass
class ShapeCounts:
    stores: int = 0
    single_page: int = 0
    chained_pages: int = 0  # single-page stores whose parent is the page stored just before
    signed_hash_events: int = 0  # events with negative hashes (SGLang publishes signed hashes)


class StreamShape:
    """The measured shape of one stream (see the module docstring)."""

    def __init__(self) -> None:
        self.counts = ShapeCounts()
        self.decided: str | None = None
        self.changed_after = 0  # multi-block stores seen after "one event per page" was decided
        self._last_key: int | None = None  # the last page stored in the current batch

    def begin_batch(self, signed_hash_events: int) -> None:
        self._last_key = None
        self.counts.signed_hash_events += signed_hash_events

    def stored(self, n_keys: int, parent: int | None, first_key: int, last_key: int) -> None:
        c = self.counts
        c.stores += 1
        if n_keys == 1:
            c.single_page += 1
            if parent is not None and parent == self._last_key:
                c.chained_pages += 1
        elif self.decided == ONE_EVENT_PER_PAGE:
            self.changed_after += 1
        self._last_key = last_key
        if self.decided is None and c.stores >= MIN_STORES:
            self.decided = self._judge()

    def _judge(self) -> str:
        c = self.counts
        if c.signed_hash_events:
            return RADIX_INSERTS
        per_page = c.single_page >= PER_PAGE_SHARE * c.stores and c.chained_pages > 0
        return ONE_EVENT_PER_PAGE if per_page else REQUEST_STEPS

    def shape(self, final: bool = False) -> str | None:
        """The shape, or None while undecided (decided on what was seen when `final`)."""
        if self.decided is None and final and self.counts.stores:
            self.decided = self._judge()
        return self.decided

    @property
    def signed_hashes(self) -> bool:
        return self.counts.signed_hash_events > 0

    def describe(self, hits_reported: bool) -> str:
        """The shape in words, for the status details and the JSON."""
        c = self.counts
        shape = self.decided or f"undecided ({plural(c.stores, 'store')} of {MIN_STORES} needed)"
        hits = "hit reports present" if hits_reported else "store-only (no hit reports)"
        text = (
            f"{shape}, {hits}: {c.single_page} of {plural(c.stores, 'store')} hold one block, "
            f"{c.chained_pages} chained onto the page before"
        )
        if self.signed_hashes:
            text += "; signed 64-bit hashes (SGLang's form)"
        if self.changed_after:
            text += f"; {plural(self.changed_after, 'store')} of several blocks since (grouped page by page)"
        return text


@dataclass
class PageCounts:
    requests: int = 0
    pages: int = 0  # stored pages handed out (every one the stream holds)
    prefix_pages: int = 0  # pages read back along parent chains


@dataclass
class _Run:
    """Pages of one request, in chain order."""

    keys: list[np.ndarray]
    tokens: list[np.ndarray]
    last_batch: int
    ts: float
    prefix_pages: int = 0  # read back along the parent chain (store-only streams)


class PageChainGrouping:
    """Every stored page as an access, grouped into requests by their chain (see the module docstring).

    A page continues a request when its parent (given, or remembered from the page's first store) is
    that request's last page, stored in this batch or up to CONTINUE_BATCHES before; otherwise it
    starts a request. With `reconstruct_prefix` (a store-only stream), a request whose first page has
    a parent starts with the pages of that parent chain as far as they are known: the cached prefix
    the engine matched, which it does not publish.
    """

    def __init__(self) -> None:
        self.chains = PrefixChain()
        self._open: OrderedDict[int, _Run] = OrderedDict()  # last page of an open request -> it
        self._batch = -1
        self._ts = 0.0
        self._out: list[tuple[np.ndarray, np.ndarray, float]] = []
        self._out_pages = 0
        self.counts = PageCounts()
        self.finish_lag = CONTINUE_BATCHES

    def begin_batch(self, ts: float) -> None:
        self._batch += 1
        self._ts = ts
        while self._open:
            last, run = next(iter(self._open.items()))
            if run.last_batch >= self._batch - CONTINUE_BATCHES:
                break
            del self._open[last]
            self._hand_out(run)

    def stored(
        self,
        keys: np.ndarray,
        tokens: np.ndarray,
        parent: int | None,
        reconstruct_prefix: bool,
        page_tokens: int,
    ) -> None:
        if not len(keys):
            return
        first = int(keys[0])
        given = parent is not None
        if parent is None:
            parent = self.chains.parent(first)  # a re-reported page: the parent of its first store
        self.chains.stored(keys, parent if given else None)
        run = self._open.pop(parent, None) if parent is not None else None
        if run is None:
            run = _Run([], [], self._batch, self._ts)
            if reconstruct_prefix and given and parent is not None:
                prefix = self.chains.chain(parent)
                if len(prefix):
                    run.keys.append(prefix)
                    run.tokens.append(np.full(len(prefix), page_tokens, dtype=np.int64))
                    run.prefix_pages = len(prefix)
        run.keys.append(keys)
        run.tokens.append(tokens)
        run.last_batch, run.ts = self._batch, self._ts
        self.counts.pages += len(keys)
        same_tail = self._open.pop(int(keys[-1]), None)
        if same_tail is not None:  # two lookups of one prefix: the first is a request of its own
            self._hand_out(same_tail)
        self._open[int(keys[-1])] = run

    def _hand_out(self, run: _Run) -> None:
        keys = np.concatenate(run.keys).astype(np.uint64, copy=False)
        self._out.append((keys, np.concatenate(run.tokens).astype(np.int64, copy=False), run.ts))
        self._out_pages += len(keys)
        self.counts.requests += 1
        self.counts.prefix_pages += run.prefix_pages

    def flush(self) -> None:
        """The stream went quiet: every open request is finished."""
        for run in self._open.values():
            self._hand_out(run)
        self._open.clear()

    def reset(self) -> None:
        """The engine dropped its cache: open requests finish, no parent chain is known any more."""
        self.flush()
        self.chains.clear()

    @property
    def finished_blocks(self) -> int:
        return self._out_pages

    def take_accesses(self) -> list[tuple[np.ndarray, np.ndarray, float]]:
        out, self._out, self._out_pages = self._out, [], 0
        return out

    def state(self) -> dict[str, int]:
        return {"open": len(self._open)}
