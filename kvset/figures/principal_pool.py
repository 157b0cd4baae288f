"""The principals' side of the pool (part of the principals figure, kvset.figures.principals): the share
of the resident cache each one holds, who displaces whom, and whether a session's next turn comes
back before its blocks are gone.

All three are read off one LRU replay of the stream at the pool's size (kvset.core.pool_replay): a
model of the pool, not the engine's own resident set, which the results say (`model`). Cardinality
stays the report's: the top principals of a level one by one and the rest as (other).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from kvset.types import OTHER_PRINCIPALS

if TYPE_CHECKING:  # every command line reads the figure's options: numpy is loaded by compute only
    from kvset.core.pool_replay import PoolReplay, PoolTrace
    from kvset.core.principals import PrincipalStream

POOL_MODEL = "LRU of the pool's size replayed over the stream"
DISPLACER_MIN_SHARE = 0.05  # of the level's accesses: a principal this small is not called the displacer


@dataclass(frozen=True, eq=False)
class Displacement:
    """Blocks evicted by row i's accesses that column j's accesses then missed, among one level's
    principals as reported (the top ones and (other) last). others_per_access[i]: the misses row i's
    evictions cost the others (its own excluded) per access of its own. top_displacer: the named
    principal, among those with at least DISPLACER_MIN_SHARE of the accesses, with the most of them
    per access: the neighbour that pushes the others out beyond its size (a tenant with five times
    a flood's traffic may cost the others more misses in all, and still less for each access); None
    when none of them displaced another."""

    level: str
    names: tuple[str, ...]
    blocks: tuple[tuple[int, ...], ...]
    top_displacer: str | None
    others_per_access: tuple[float, ...] = ()


@dataclass(frozen=True, eq=False)
class PrincipalPool:
    """The pool replay's figures at `capacity_blocks`. shares[level][i]: the share of the resident
    cache held by the level's i-th principal as reported; mean_blocks the blocks it held on average;
    eviction_age_seconds: the median time an evicted block had stayed since its last use (None: no
    eviction, or the stream has no times); turn gaps of the named sessions with two turns or more."""

    capacity_blocks: int
    capacity_source: str
    shares: dict[str, tuple[float, ...]]
    mean_blocks: dict[str, tuple[float, ...]]
    displacement: tuple[Displacement, ...]
    eviction_age_seconds: float | None
    sessions_with_turns: int
    sessions_next_turn_in_time: float | None  # share of them whose median gap is under the eviction age
    session_gaps: dict[str, float]  # the reported sessions' median gap, by name
    model: str = POOL_MODEL


# trace -> ((capacity, source, streams), its figures): live, one trace and its streams stand until the
# collector's next read, and a snapshot a second would otherwise sum the whole window again each time
_LAST: WeakKeyDictionary[PoolTrace, tuple[tuple[object, ...], PrincipalPool]] = WeakKeyDictionary()


def read_capacity(trace: PoolTrace, capacity: int, source: str) -> int:
    """Where a trace's principals are read: at the knee, the one they were first read at. Live, the
    knee moves with every access while a trace and its streams stand for one collector's read (10 s),
    and a new knee at each snapshot would replay the whole window each time."""
    found = _LAST.get(trace)
    if source == "knee" and found is not None and found[1].capacity_source == "knee":
        return found[1].capacity_blocks
    return capacity


def compute_pool(
    trace: PoolTrace,
    streams: dict[str, tuple[PrincipalStream, ...]],
    capacity: int,
    source: str,
) -> PrincipalPool:
    key = (capacity, source, tuple(streams.items()))  # the streams compare as the objects they are
    found = _LAST.get(trace)
    if found is not None and found[0] == key:
        return found[1]
    pool = _compute_pool(trace, streams, capacity, source)
    _LAST[trace] = (key, pool)
    return pool


def _compute_pool(
    trace: PoolTrace,
    streams: dict[str, tuple[PrincipalStream, ...]],
    capacity: int,
    source: str,
) -> PrincipalPool:
    import numpy as np

    # each level's rows: its top principals, then (other), the rest of them (kvset.core.principals)
    reported = {
        level: [r.principal_id for r in rows if r.principal_id is not None] for level, rows in streams.items()
    }
    replay = trace.replay(capacity, reported)
    shares, blocks, matrices = {}, {}, []
    for place, (level, rows) in enumerate(streams.items()):
        held = replay.held[place, : len(rows)].astype(np.float64)
        total = float(held.sum())
        shares[level] = tuple(float(h / total) if total else 0.0 for h in held)
        blocks[level] = tuple(float(h / len(trace)) for h in held)
        matrices.append(_displacement(level, rows, replay, place, len(trace)))
    age = _eviction_age(replay)
    ids, gaps = trace.turn_gaps("session")
    timed = np.isfinite(gaps)
    ids, gaps = ids[timed], gaps[timed]
    in_time = None
    if len(gaps) and not len(replay.eviction_ages):
        in_time = 1.0  # the pool never evicts: every next turn finds what its last one left
    elif len(gaps) and age is not None:
        in_time = float(np.mean(gaps < age))
    session_rows = streams.get("session", ())
    named = {s.principal_id: s.name for s in session_rows if s.principal_id is not None}
    found = {named[int(i)]: float(g) for i, g in zip(ids, gaps, strict=True) if int(i) in named}
    return PrincipalPool(
        capacity,
        source,
        shares,
        blocks,
        tuple(matrices),
        age,
        len(gaps),
        in_time,
        found,
    )


def _displacement(
    level: str, rows: Sequence[PrincipalStream], replay: PoolReplay, place: int, n: int
) -> Displacement:
    import numpy as np

    k = len(rows)
    matrix = replay.displaced[place, :k, :k]
    names = tuple(r.name if r.principal_id is not None else OTHER_PRINCIPALS for r in rows)
    others = matrix.sum(axis=1) - np.diag(matrix)
    accesses = replay.accesses[place, :k]
    per_access = others / np.maximum(accesses, 1)
    named = np.array([r.principal_id is not None for r in rows], dtype=bool)
    candidates = named & (accesses >= DISPLACER_MIN_SHARE * n) & (others > 0)
    top = None
    if candidates.any():  # ties: the first reported, the one with more accesses
        top = names[int(np.argmax(np.where(candidates, per_access, -1.0)))]
    matrix_rows = tuple(tuple(int(v) for v in row) for row in matrix)
    return Displacement(level, names, matrix_rows, top, tuple(float(v) for v in per_access))


def _eviction_age(replay: PoolReplay) -> float | None:
    import numpy as np

    ages = replay.eviction_ages
    finite = np.isfinite(ages)
    if not finite.all():
        ages = ages[finite]
    # the replay's own array, partly sorted in place: a copy would be 8 bytes an eviction more
    return float(np.median(ages, overwrite_input=True)) if len(ages) else None
