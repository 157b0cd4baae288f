"""What an engine tracker hands its source: block accesses gathered request by request, and its
part of the source's health (the source adds what only the I/O knows: connected, state, counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvset.types import AccessBatch, PrincipalNames


@dataclass(frozen=True)
class HealthParts:
    notes: tuple[str, ...] = ()
    details: tuple[tuple[str, str], ...] = ()
    # Whether the accesses include the engine's hits (see SourceHealth.reports_hits).
    reports_hits: bool | None = None
    hits_reconstructed: bool = False  # (see SourceHealth.hits_reconstructed)
    counts: tuple[tuple[str, int], ...] = ()  # (see SourceHealth.counts)


class PendingAccesses:
    """Block accesses not yet handed out, one request at a time."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._keys: list[np.ndarray] = []
        self._tokens: list[np.ndarray] = []
        self._times: list[float] = []  # one per request
        self._ranks: list[int | None] = []  # one per request: the rank whose cache saw it
        self._principals: list[np.ndarray | None] = []  # one per request: its ids by level, if named
        self._total = 0

    def __len__(self) -> int:
        return self._total

    def add_request(
        self,
        keys: np.ndarray,
        tokens: np.ndarray,
        at: float,
        rank: int | None = None,
        principal: np.ndarray | None = None,
    ) -> None:
        """One request's blocks in order, the tokens each covers, when it was seen, by which rank and
        for whom (its principal id at each level, kvset.engine.kv_event_principals)."""
        self._keys.append(keys)
        self._tokens.append(tokens)
        self._times.append(at)
        self._ranks.append(rank)
        self._principals.append(principal)
        self._total += len(keys)

    def take(self, block_size: int | None, names: PrincipalNames | None = None) -> AccessBatch | None:
        """Everything pending as one batch (None if nothing is), and start afresh. With `names`, the
        requests' principals (a request named by none is unknown at every level)."""
        if not self._total:
            return None
        counts = np.array([len(k) for k in self._keys], dtype=np.int64)
        principals = self._principal_rows(counts) if names is not None else None
        starts = np.zeros(len(counts), dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        batch = AccessBatch(
            keys=np.concatenate(self._keys).astype(np.uint64, copy=False),
            tokens=np.concatenate(self._tokens),
            request_starts=starts,
            timestamps=np.repeat(np.asarray(self._times, dtype=np.float64), counts),
            block_size=block_size,
            # ranks only when every request has one (a tracker gives all or none)
            rank=None if None in self._ranks else np.repeat(np.asarray(self._ranks, dtype=np.int64), counts),
            principals=principals,
            principal_names=names if principals is not None else None,
        )
        self._clear()
        return batch

    def _principal_rows(self, counts: np.ndarray) -> np.ndarray | None:
        given = [p for p in self._principals if p is not None]
        if not given:
            return None
        unknown = np.zeros_like(given[0])
        rows = np.stack([unknown if p is None else p for p in self._principals])
        return np.repeat(rows, counts, axis=0).astype(np.int32, copy=False)
