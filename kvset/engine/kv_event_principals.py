"""Whom the KV events' accesses are for: each request's tenant, session and adapter, off its stores.

A BlockStored says (kvset.engine.kv_events.principal_fields) the request's session and LoRA name on
every store, but its cache salt only on a store that starts the request's chain (vLLM puts the salt
in the first block's extra keys). Blocks of different salts never share a hash, so a store that
continues a chain is of its parent's tenant: each stored block keeps its principals, and a
continuation takes the tenant of its parent block.

A request handed out by the tracker's grouping is named by the principals of its last block: the
latest store of that block was this request's own (its last prompt or output block, or, for a request
whose blocks were all cached, the hit report of its own lookup). Two requests of different sessions
with the very same prompt share that block too; the later store names both.

Memory is bounded: the blocks' principals are kept in two generations of LABELS_MEMORY blocks each,
enough for the blocks stored between a request's last store and its hand-out (the replay's delay
line); nothing is kept until an event names a principal.
"""

from __future__ import annotations

import numpy as np

from kvset.engine_model.u64_map import U64Map
from kvset.types import PRINCIPAL_LEVELS, PRINCIPAL_NAMES_CAP, PrincipalNames

LABELS_MEMORY = 1 << 18  # blocks per generation (about 9 MB each at the map's load factor)
_BITS = 21  # bits of each level's id in the packed value (the names of all levels share the ids)
_MASK = (1 << _BITS) - 1
assert PRINCIPAL_NAMES_CAP + 1 <= _MASK, "every id the names give (the cap's own included) must pack"
_TENANT, _SESSION, _ADAPTER = (PRINCIPAL_LEVELS.index(level) for level in ("tenant", "session", "adapter"))


class EventPrincipals:
    """Blocks' principals as their stores said them; a finished request's principals."""

    def __init__(self, memory: int = LABELS_MEMORY) -> None:
        self.names = PrincipalNames()
        self.memory = memory
        self._recent: U64Map | None = None  # None: no event has named a principal yet
        self._older = U64Map()

    @property
    def active(self) -> bool:
        return self._recent is not None

    def stored(
        self, keys: np.ndarray, parent: int | None, salt: str | None, session: str | None, lora: str | None
    ) -> None:
        """One counted BlockStored: its blocks are for these principals."""
        if self._recent is None:
            if salt is None and session is None and lora is None:
                return
            self._recent = U64Map()
        tenant = self.names.id(salt)
        if salt is None and parent is not None:
            tenant = int(self._row(np.array([parent], dtype=np.uint64))[0, _TENANT])
        packed = tenant | self.names.id(session) << _BITS | self.names.id(lora) << (2 * _BITS)
        if len(self._recent) + len(keys) > self.memory:
            self._older, self._recent = self._recent, U64Map()
        self._recent.put(keys, packed)

    def _row(self, keys: np.ndarray) -> np.ndarray:
        """(len(keys), levels) int32 principal ids of these blocks (0 where not known)."""
        out = np.zeros((len(keys), len(PRINCIPAL_LEVELS)), dtype=np.int32)
        if self._recent is None:
            return out
        packed, found = self._recent.get(keys, default=0)
        older, in_older = self._older.get(keys, default=0)
        packed = np.where(found, packed, np.where(in_older, older, 0))
        out[:, _TENANT] = packed & _MASK
        out[:, _SESSION] = (packed >> _BITS) & _MASK
        out[:, _ADAPTER] = (packed >> (2 * _BITS)) & _MASK
        return out

    def of_key(self, key: int) -> np.ndarray:
        """The principal ids of the request whose last block is `key` (-1: it had none: unknown)."""
        if key < 0 or self._recent is None:
            return np.zeros(len(PRINCIPAL_LEVELS), dtype=np.int32)
        row: np.ndarray = self._row(np.array([key], dtype=np.uint64))[0]
        return row

    def of_request(self, keys: np.ndarray) -> np.ndarray | None:
        """The principal ids (one per level) of a finished request with these blocks; None until an
        event has named a principal."""
        if self._recent is None:
            return None
        return self.of_key(int(keys[-1]) if len(keys) else -1)
