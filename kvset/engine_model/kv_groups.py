"""A hybrid model's KV cache groups in one block pool, and the hit length vLLM computes across them.

vLLM 0.33 gives each KV cache group (a set of layers of one kind) its own blocks, all taken from one
shared pool with one free queue; a block's hash is the same in every group (no group id is mixed into
it), so a block is keyed here by (group, hash): the other groups' keys are the primary group's XOR a
per-group constant (`twin_keys`), which keeps them apart from each other and from the primary's.

What each kind holds of a request, and what its lookup needs (HybridKVCacheCoordinator):
- full attention: every block; a prefix of h blocks is a hit only if all h are cached;
- sliding window of W tokens: only the blocks the window reaches. The lookup needs the last
  ceil((W - 1) / block_size) blocks before the hit point cached (the earlier ones are not even
  touched); while the request runs, a block that falls behind the window is freed into the shared
  free queue at the request's next step (`step`), so a window group pins few blocks but fills the
  queue early;
- mamba (vLLM's MambaManager, "align" mode): a state only where the group's own stores name one (at
  most one per computed chunk, at its end, and one per output block); a hit needs the state at the
  hit point. While the request runs, vLLM frees every state but its newest at its next step
  (remove_skipped_blocks), so they too enter the shared free queue early (`MambaStates`).

The hit length at a pool of C blocks is the longest h every group can serve. With D_g(h) the pool
size from which group g serves a hit of h blocks (its blocks' free-queue distances: the prefix's
largest for full attention, the window's before h for a sliding window, the block at h - 1 for
mamba), E(h) = max_g D_g(h) and block j is a hit at C iff some h > j has E(h) <= C: its distance is
the smallest E(h) over h > j (`joint_distances`), so one histogram still gives every pool at once.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from kvset.engine_model.block_copies import BlockCopies
from kvset.engine_model.free_queue import PIN, QUERY, RELEASE
from kvset.engine_model.records import OpenRequest

# the replay's free-queue runner: (ops, keys) -> (positions, pinned counts); and positions -> distances
Run = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
Distances = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]

FULL_ATTENTION = "full_attention"
SLIDING_WINDOW = "sliding_window"
MAMBA = "mamba"
_SALT = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class KvGroup:
    """One KV cache group as its events describe it."""

    group_idx: int
    kind: str | None  # kv_cache_spec_kind as vLLM names it (None: not said)
    sliding_window: int | None  # tokens, for a sliding-window group
    block_size: int

    @property
    def window_blocks(self) -> int | None:
        """Blocks a hit needs before the hit point: None for all of them (full attention)."""
        if self.kind == MAMBA:
            return 1
        if self.sliding_window:
            return max(1, math.ceil((self.sliding_window - 1) / self.block_size))
        return None

    @property
    def salt(self) -> np.uint64:
        return np.uint64((int(_SALT) * (self.group_idx + 1)) & 0xFFFFFFFFFFFFFFFF)


def twin_keys(keys: np.ndarray, group: KvGroup) -> np.ndarray:
    """The keys of `group`'s copies of the primary group's blocks `keys`."""
    return np.asarray(keys, dtype=np.uint64) ^ group.salt


def window_max(d: np.ndarray, k: int) -> np.ndarray:
    """out[h - 1] = max(d[max(0, h - k) : h]) for h = 1 .. len(d): the largest distance in the k
    blocks before each hit point."""
    n = len(d)
    if n == 0:
        return d.copy()
    if k >= n:
        return np.maximum.accumulate(d)
    padded = np.concatenate([np.full(k - 1, d.min(), dtype=d.dtype), d])
    return np.asarray(np.lib.stride_tricks.sliding_window_view(padded, k).max(axis=1), dtype=d.dtype)


def joint_distances(primary: np.ndarray, twins: list[tuple[KvGroup, np.ndarray]]) -> np.ndarray:
    """Per block of a request's prompt, the pool size from which vLLM's hybrid lookup hits it.

    `primary`: the full-attention group's raw free-queue distances, block by block; `twins`: each other
    group's raw distances of its copies of the same blocks."""
    need = np.maximum.accumulate(primary) if len(primary) else primary
    for group, d in twins:
        k = group.window_blocks
        served = np.maximum.accumulate(d) if k is None else window_max(d, k)
        need = np.maximum(need, served)
    # block j is hit when some hit point h > j is served: the smallest need from j on
    return np.minimum.accumulate(need[::-1])[::-1] if len(need) else need


@dataclass
class MambaStates:
    """The blocks a Mamba group's stores name, by the batch they came in: where vLLM holds a state.

    A Mamba group's BlockStored is the twin of the full-attention one (the same tokens and parent) but
    names only the blocks whose state was kept; the replay, running behind the stream, asks of each
    full-attention store it replays which of its blocks got a state in that batch (`take`)."""

    _named: dict[tuple[int, int, int], int] = field(default_factory=dict)  # (group, batch, key) -> stores
    _order: deque[tuple[int, int, list[int]]] = field(default_factory=deque)  # (batch, group, keys)

    def __len__(self) -> int:
        return len(self._named)

    def stored(self, group_idx: int, keys: np.ndarray, batch: int) -> None:
        listed = [int(k) for k in keys.tolist()]
        for k in listed:
            at = (group_idx, batch, k)
            self._named[at] = self._named.get(at, 0) + 1
        self._order.append((batch, group_idx, listed))

    def take(self, group_idx: int, keys: np.ndarray, batch: int) -> np.ndarray:
        """Which of a store's `keys` (replayed in `batch`) hold a state; each naming serves one store."""
        out = np.zeros(len(keys), dtype=bool)
        for i, k in enumerate(keys.tolist()):
            at = (group_idx, batch, int(k))
            left = self._named.get(at, 0)
            if left > 0:
                out[i] = True
                self._named[at] = left - 1
        return out

    def expire(self, batch: int) -> None:
        """The namings of batches before `batch` whose store was not replayed (a hit report's) go."""
        while self._order and self._order[0][0] < batch:
            old, group_idx, listed = self._order.popleft()
            for k in listed:
                self._named.pop((group_idx, old, k), None)


def _ops(op: int, n: int) -> np.ndarray:
    return np.full(n, op, dtype=np.int8)


class GroupCopies:
    """The other groups' copies of a request's blocks in the replay's one free queue (module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[int, KvGroup] = {}
        # per request: its blocks that fell behind a window in this step, per group, freed at the next
        self._leaving: dict[int, dict[int, list[int]]] = {}
        self.states = MambaStates()  # where the Mamba groups' stores put a state
        # with a Mamba group, the key of each block's newest copy (kvset.engine_model.block_copies)
        self.copies: BlockCopies | None = None
        self._replaying = -1  # the batch the replay is in (its stores' states are that batch's)
        # per request: the states its stores named in this step, (group, its held list, key): freed at the
        # step after the next
        self._read_next: dict[int, list[tuple[int, list[int], int]]] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def get(self, group_idx: int) -> KvGroup | None:
        return self._groups.get(group_idx)

    def pop(self, group_idx: int, default: KvGroup | None = None) -> KvGroup | None:
        return self._groups.pop(group_idx, default)

    def add(self, group: KvGroup) -> None:
        self._groups[group.group_idx] = group
        if group.kind == MAMBA and self.copies is None:
            self.copies = BlockCopies()

    def __iter__(self) -> Iterator[KvGroup]:
        return iter(self._groups.values())

    def stored(self, group_idx: int, keys: np.ndarray, batch: int) -> None:
        """A store of another group in the stream's current batch: a Mamba group's names its states."""
        group = self._groups.get(group_idx)
        if group is not None and group.kind == MAMBA:
            self.states.stored(group_idx, keys, batch)

    def accessed_from(self, hit_blocks: int) -> list[tuple[int, int]]:
        """(group, first block it reads) of a request whose lookup hit `hit_blocks`: a window group
        reads only the blocks before the hit point its window reaches, then what the request adds."""
        out = []
        for group in self._groups.values():
            k = group.window_blocks
            out.append((group.group_idx, 0 if k is None else max(0, hit_blocks - k)))
        return out

    def read(self, request: OpenRequest, keys: np.ndarray, run: Run, distances: Distances) -> None:
        """Their distances, read before anything is pinned: one lookup across the groups."""
        for group in self._groups.values():
            twins = twin_keys(keys, group)
            request.twin_raw.setdefault(group.group_idx, []).append(
                distances(*run(_ops(QUERY, len(twins)), twins))
            )

    def pin(self, request: OpenRequest, keys: np.ndarray, hit: bool, run: Run) -> None:
        """Pinned as vLLM holds them: a window group only the blocks its window reaches (a hit's earlier
        blocks are not even touched), those that fall behind it freed while the request runs, last first;
        a Mamba group the state at a hit's last block, else the states its store named, and only its
        newest while it runs."""
        for group in self._groups.values():
            twins = twin_keys(keys, group)
            k = group.window_blocks
            held = request.twin_held.setdefault(group.group_idx, [])
            if group.kind == MAMBA:
                self._pin_states(request, group, keys, twins[-1:] if hit else None, run)
                continue
            pin = twins if k is None or not hit else twins[-k:]
            run(_ops(PIN, len(pin)), pin)
            held.extend(pin.tolist())
            # vLLM keeps the k whole blocks the next token's window reaches (and the one it fills)
            if k is not None and len(held) > k:
                early, held[:] = held[: len(held) - k], held[len(held) - k :]
                self._leaving.setdefault(request.id, {}).setdefault(group.group_idx, []).extend(early)

    def _pin_states(
        self, request: OpenRequest, group: KvGroup, keys: np.ndarray, hit: np.ndarray | None, run: Run
    ) -> None:
        """A Mamba group's states, pinned and freed as vLLM's align mode does (remove_skipped_blocks):
        the state a hit ends in is read by the step that admits it and freed at the next; a state a
        store names (its chunk's end) is read by the next chunk or token and freed in the step after
        that; of several named at once, all but the last are freed at the next."""
        g = group.group_idx
        named = hit if hit is not None else twin_keys(keys, group)[self.states.take(g, keys, self._replaying)]
        if not len(named):
            return
        run(_ops(PIN, len(named)), named)
        listed = named.tolist()
        leaving = self._leaving.setdefault(request.id, {}).setdefault(g, [])
        if hit is not None:
            leaving.extend(listed)
            return
        leaving.extend(listed[:-1])
        held = request.twin_held.setdefault(g, [])
        held.append(listed[-1])
        self._read_next.setdefault(request.id, []).append((g, held, listed[-1]))

    def _age_states(self) -> None:
        """The states named in the last step: read in this one, freed at the next."""
        for rid, states in self._read_next.items():
            for g, held, key in states:
                if key in held:
                    held.remove(key)
                    self._leaving.setdefault(rid, {}).setdefault(g, []).append(key)
        self._read_next.clear()

    def step(self, run: Run, batch: int) -> None:
        """A new engine step (the replay's `batch`): the blocks that fell behind a running window in the
        last one (and a Mamba group's older states) are freed, last first. vLLM frees them in the
        request's next allocate_slots (remove_skipped_blocks, on the tokens computed so far), so after
        the requests that finished in the last step (their blocks freed in update_from_output) and
        before this step's lookups."""
        self._replaying = batch
        self.states.expire(batch)
        for by_group in self._leaving.values():
            for early in by_group.values():
                run(_ops(RELEASE, len(early)), np.array(early[::-1], dtype=np.uint64))
        self._leaving.clear()
        self._age_states()

    def release(self, request: OpenRequest, run: Run) -> None:
        """The request finished: group by group after the primary's, each last block first (vLLM's order;
        blocks still waiting for `step` are the oldest of their group's)."""
        leaving = self._leaving.pop(request.id, {})
        self._read_next.pop(request.id, None)
        for group_idx, twins in request.twin_held.items():
            every = leaving.get(group_idx, []) + twins
            run(_ops(RELEASE, len(every)), np.array(every[::-1], dtype=np.uint64))

    def joint(self, request: OpenRequest) -> tuple[np.ndarray, np.ndarray]:
        """The request's (distance, unpinned distance) per prompt block across the groups."""
        out = []
        for i in (0, 1):
            primary = np.concatenate([r[i] for r in request.raw])
            twins = [
                (self._groups[g], np.concatenate([r[i] for r in raw]))
                for g, raw in request.twin_raw.items()
                if g in self._groups
            ]
            out.append(joint_distances(primary, twins))
        return out[0], out[1]
