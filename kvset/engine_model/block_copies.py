"""A second copy of a cached block: what vLLM's pool holds when a request computes a block again.

vLLM's lookup stops at the first block it cannot serve, so a request computes every block after it,
cached or not; a block it computes takes a new block from the head of the free queue, and vLLM caches
it under the same hash beside the cached copy (BlockPool.cache_full_blocks: one hash, several blocks).
The old copy stays where it was in the free queue until it is evicted. Pinning the cached key instead
would take that copy out of the queue, so every block released before it would look one nearer the
newest release than it is in the engine, and the pool would seem to hold more than it does.

vLLM publishes a BlockRemoved for each copy it evicts, the hash staying cached while another copy is:
`stored` and `removed` count the copies, so that the stream's resident set (which tells a hit report
from a request's first store) drops a block only with its last copy.

So the replay gives the new copy a key of its own (`fresh`) and follows it from then on (`current`):
the old copy keeps its place in the free queue, looked up no more, until the queue forgets it. A later
lookup of the hash finds it while either copy is cached, which is the newer one's release but for the
rare case of an older copy released later.

A model of one group (or of a sliding window) rarely computes a cached block: its lookup stops where a
block was evicted, and the blocks after it were released before it and evicted first. A Mamba group
makes it common: a hit needs a state at its last block, so most requests compute again a prefix that
full attention still holds. The replay keys copies so only with a Mamba group (README, "A Mamba group").
"""

from __future__ import annotations

import numpy as np

from kvset.engine_model.records import MODEL_HORIZON
from kvset.engine_model.u64_map import U64Map

_MIX = np.uint64(0xBF58476D1CE4E5B9)


class BlockCopies:
    """The key each cached block's newest copy goes by in the replay's free queue."""

    def __init__(self, memory: int = MODEL_HORIZON) -> None:
        self._current = U64Map()
        self._memory = memory
        self._made = 0  # copies keyed so far: what makes each new key new
        self._extra = U64Map()  # cached blocks' copies beyond the first, as the engine's events say

    def __len__(self) -> int:
        return len(self._current)

    def current(self, keys: np.ndarray) -> np.ndarray:
        """The key of each block's newest copy (the block's own key until it was computed again)."""
        values, found = self._current.get(keys)
        return np.where(found, values.view(np.uint64), keys)

    def fresh(self, keys: np.ndarray, computed_again: np.ndarray) -> np.ndarray:
        """Each block's key after a request computed the blocks `keys`: a new key where
        `computed_again` (the block was still cached, pinned or queued), else its current one."""
        out = self.current(keys)
        n = int(computed_again.sum())
        if not n:
            return out
        if len(self._current) + n > self._memory:
            self._current.clear()  # (the oldest copies' blocks go back to their own keys)
        serial = np.arange(self._made + 1, self._made + n + 1, dtype=np.uint64)
        self._made += n
        with np.errstate(over="ignore"):
            new = (keys[computed_again] ^ (serial * _MIX)) * _MIX
        out[computed_again] = new
        self._current.put(keys[computed_again], new.view(np.int64))
        return out

    def stored(self, keys: np.ndarray, resident: np.ndarray, report: bool) -> None:
        """A BlockStored of the counted group; `resident`: which of its blocks were cached already. A
        hit report names cached blocks again; any other store of one caches a second copy."""
        again = keys[resident]
        if report or not len(again):
            return
        if len(self._extra) + len(again) > self._memory:
            self._extra.clear()
        counts, _ = self._extra.get(again, 0)
        self._extra.put(again, counts + 1)

    def removed(self, keys: np.ndarray) -> np.ndarray:
        """A BlockRemoved of the counted group: the blocks whose last copy went (the others stay)."""
        counts, _ = self._extra.get(keys, 0)
        kept = counts > 0
        if not kept.any():
            return keys
        self._extra.put(keys[kept], counts[kept] - 1)
        self._extra.pop(keys[kept], only=0)
        return keys[~kept]
