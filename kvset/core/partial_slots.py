"""The time slots of a partial stack (kvset.core.partial_stack): the analyzer's two slot rings of one
run of accesses, in a form that merges in time order to the rings one process would have.

One process counts an access in the fine slot max(its stamp's slot, the newest slot so far): time
never runs backwards in the rings (kvset.core.analyzer). A later partition B, analysed alone, knows
only its own newest slot; after an earlier A the true slot of each of B's accesses is
max(its slot in B, A's newest), so B's slots older than A's newest fold into A's newest, and its
accesses in them were late. The same holds for the coarse ring (a coarse slot is its fine slot's).

A ring keeps its last n slots; what falls out is summed into one more row, the spill. After A, a
spilled slot of B lands in A's newest slot when that slot is still in the merged ring, else in the
merged spill: either way where the spill lands is known, so no slot is lost that the merged ring
would hold. B's firsts (the accesses kvset.core.partial_stack resolves against A's stack) carry
their fine slot: a first found in A becomes, in its slot, a hit at its distance's grid bucket or a
miss beyond the horizon instead of a first access, as in the all-time histogram.

Late accesses need every slot, not the last n: each partition keeps, per fine slot it touched, the
accesses not late in it (on time); B's on-time accesses in slots older than A's newest are late.
That list costs 16 bytes per touched slot (58 kB for an hour of 1 s slots).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from kvset.core import kernel_layout as KL
from kvset.core.kernel_types import Int
from kvset.core.log_grid import WINDOW_GRID, bucket_of
from kvset.core.slots import NO_SLOT, SlotRing

Ints = npt.NDArray[np.int64]
GRID_EXACT_BITS, GRID_OCTAVE_BITS = WINDOW_GRID


class SpillRing(SlotRing):
    """A SlotRing that sums each slot it drops (a row taken over by a newer slot) into its spill: the
    kernel's ring_add does, given spill_arrays()."""

    def __init__(self, width: float, n_slots: int, n_buckets: int) -> None:
        super().__init__(width, n_slots, n_buckets)
        self.spill_blocks = np.zeros(n_buckets, dtype=np.int64)
        self.spill_tokens = np.zeros(n_buckets, dtype=np.int64)
        self.spill_counts = np.zeros(KL.COUNTS_SIZE, dtype=np.int64)
        self._spill_requests = np.zeros(1, dtype=np.int64)

    def spill_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.spill_blocks, self.spill_tokens, self.spill_counts, self._spill_requests

    @property
    def spill_requests(self) -> int:
        return int(self._spill_requests[0])


@dataclass(frozen=True, eq=False)
class RingState:
    """A slot ring's rows, the last of them (index n) the spill: every slot older than the last n.
    ids[r]: the slot in row r < n (NO_SLOT: none); current: the newest slot (NO_SLOT: none yet)."""

    width: float
    blocks: Ints  # (n + 1, buckets) grid histograms
    tokens: Ints
    counts: Ints  # (n + 1, kernel.COUNTS_SIZE)
    requests: Ints  # (n + 1,)
    ids: Ints  # (n,)
    current: int

    @property
    def n_slots(self) -> int:
        return len(self.ids)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.blocks, self.tokens, self.counts, self.requests, self.ids))

    # Pickled (as Dask moves states between processes) with only its rows that hold counts: a
    # partition of a few seconds touches a few of its 361 fine and 121 coarse rows, and the dense
    # rows are 4.7 MB a state at the default horizon.
    def __getstate__(self) -> tuple[Any, ...]:
        used = np.flatnonzero(
            self.blocks.any(axis=1) | self.tokens.any(axis=1) | self.counts.any(axis=1) | (self.requests != 0)
        )
        rows = [getattr(self, name)[used] for name in _ROWS]
        return self.width, self.blocks.shape, used, rows, self.ids, self.current

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        width, (n_rows, n_buckets), used, rows, ids, current = state
        whole = empty_ring(width, n_rows - 1, n_buckets)
        for name, part in zip(_ROWS, rows, strict=True):
            getattr(whole, name)[used] = part
        for name in ("width", *_ROWS):
            object.__setattr__(self, name, getattr(whole, name))
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "current", current)

    def rows_of(self, slots: Ints) -> Ints:
        """The row each slot is counted in: its own within the last n slots, else the spill."""
        n = self.n_slots
        rows: Ints = np.where(slots > self.current - n, slots % n, n)
        return rows

    def ring(self) -> SlotRing:
        """The rows as a SlotRing, which the analyzers' views read."""
        n, nb = self.n_slots, self.blocks.shape[1]
        r = SlotRing(self.width, n, nb)
        r.blocks, r.tokens = self.blocks[:n].copy(), self.tokens[:n].copy()
        r.counts, r.requests, r.slot_ids = self.counts[:n].copy(), self.requests[:n].copy(), self.ids.copy()
        r.current = None if self.current == NO_SLOT else self.current
        return r


_ROWS = ("blocks", "tokens", "counts", "requests")  # a ring's per-row arrays, the spill row last


def empty_ring(width: float, n_slots: int, n_buckets: int) -> RingState:
    return RingState(
        width=float(width),
        blocks=np.zeros((n_slots + 1, n_buckets), dtype=np.int64),
        tokens=np.zeros((n_slots + 1, n_buckets), dtype=np.int64),
        counts=np.zeros((n_slots + 1, KL.COUNTS_SIZE), dtype=np.int64),
        requests=np.zeros(n_slots + 1, dtype=np.int64),
        ids=np.full(n_slots, NO_SLOT, dtype=np.int64),
        current=NO_SLOT,
    )


def ring_state(ring: SpillRing) -> RingState:
    """A SpillRing's rows and spill, with the rows older than its last n slots moved to the spill."""
    n = ring.n_slots
    out = empty_ring(ring.width, n, ring.blocks.shape[1])
    rows = np.flatnonzero(ring.slot_ids != NO_SLOT)
    if ring.current is None or not len(rows):
        return out
    _replace(out, ring.current)
    dst = out.rows_of(ring.slot_ids[rows])  # its own row, or the spill
    for name, spill in (
        ("blocks", ring.spill_blocks),
        ("tokens", ring.spill_tokens),
        ("counts", ring.spill_counts),
        ("requests", ring.spill_requests),
    ):
        whole = getattr(out, name)
        _add_rows(whole, dst, getattr(ring, name), rows)
        whole[n] += spill
    kept = dst < n
    out.ids[dst[kept]] = ring.slot_ids[rows[kept]]
    return out


@njit(nogil=True, cache=True)
def _add_rows(whole: np.ndarray, dst: Ints, part: np.ndarray, src: Ints) -> None:  # pragma: no cover
    """whole[dst[i]] += part[src[i]], row by row (np.add.at and reduceat took 15 ms a ring)."""
    for i in range(dst.shape[0]):
        whole[dst[i]] += part[src[i]]


def _replace(state: RingState, current: int) -> None:
    object.__setattr__(state, "current", current)


def merge_rings(a: RingState, b: RingState) -> RingState:
    """The rings of A's accesses then B's: B's slots older than A's newest fold into it (see the module)."""
    if (a.width, a.n_slots, a.blocks.shape) != (b.width, b.n_slots, b.blocks.shape):
        raise ValueError("time-slot rings of different shapes do not merge")
    if a.current == NO_SLOT or b.current == NO_SLOT:
        return b if a.current == NO_SLOT else a
    n = a.n_slots
    out = empty_ring(a.width, n, a.blocks.shape[1])
    _replace(out, max(a.current, b.current))
    a_rows = np.flatnonzero(a.ids != NO_SLOT)
    b_rows = np.flatnonzero(b.ids != NO_SLOT)
    slots = np.concatenate([a.ids[a_rows], np.maximum(b.ids[b_rows], a.current), [a.current]])
    dst = out.rows_of(slots)
    src_a = np.concatenate([a_rows, [n]])  # A's spill stays spilled
    dst_a = np.concatenate([dst[: len(a_rows)], [n]])
    dst_b = np.concatenate([dst[len(a_rows) : len(a_rows) + len(b_rows)], dst[-1:]])  # B's spill: A's newest
    src_b = np.concatenate([b_rows, [n]])
    for name in _ROWS:
        whole = getattr(out, name)
        _add_rows(whole, dst_a, getattr(a, name), src_a)
        _add_rows(whole, dst_b, getattr(b, name), src_b)
    in_ring = dst[:-1] < n
    out.ids[dst[:-1][in_ring]] = slots[:-1][in_ring]
    return out


@njit(inline="always")
def _row(slot: Int, current: Int, n: Int) -> Int:  # pragma: no cover - compiled
    """The row a slot is counted in (RingState.rows_of): its own within the last n, else the spill."""
    return slot % n if slot > current - n else n


@njit(inline="always")
def _resolve_at(
    r: Int, d: Int, n: Int, tok: Int, blocks: Ints, token_hist: Ints, counts: Ints
) -> None:  # pragma: no cover - compiled
    """n resolved firsts of `tok` tokens in all (d > 0: hits at distance d; -1: beyond the horizon)
    moved, in row r, from the first accesses to what they are."""
    counts[r, KL.C_FIRST_TIME] -= n
    counts[r, KL.C_FIRST_TIME_TOKENS] -= tok
    if d > 0:
        q = bucket_of(d, GRID_EXACT_BITS, GRID_OCTAVE_BITS)
        blocks[r, q] += n
        token_hist[r, q] += tok
        counts[r, KL.C_HITS] += n
    else:
        counts[r, KL.C_BEYOND] += n
        counts[r, KL.C_BEYOND_TOKENS] += tok


@njit(inline="always")
def _resolve_pending(own: Int, d: Int, n: Int, tok: Int, merged: Any) -> None:  # pragma: no cover
    """n resolved firsts of fine slot `own` and distance d in their rows of both rings; merged: A's
    newest fine and coarse slots, the two widths, and the merged rings (see _resolve_in_slots)."""
    newest, coarse_newest, fine_width, coarse_width, fine, coarse = merged
    fb, ft, fc, fcur = fine
    cb, ct, cc, ccur = coarse
    f = own if newest == NO_SLOT or own >= newest else newest
    c = np.int64(np.floor(own * fine_width / coarse_width))
    if coarse_newest != NO_SLOT and c < coarse_newest:
        c = coarse_newest
    _resolve_at(_row(f, fcur, fb.shape[0] - 1), d, n, tok, fb, ft, fc)
    _resolve_at(_row(c, ccur, cb.shape[0] - 1), d, n, tok, cb, ct, cc)


@njit(nogil=True, cache=True)
def _resolve_in_slots(
    first_slots: Ints,
    distance: Ints,
    tokens: Ints,
    newest: Int,
    coarse_newest: Int,
    fine_width: float,
    coarse_width: float,
    fine: tuple[Ints, Ints, Ints, Int],
    coarse: tuple[Ints, Ints, Ints, Int],
    moved: Ints,
) -> None:  # pragma: no cover - compiled
    """B's firsts after A, in one pass: moved[i], the fine slot of B's i-th first after A (its own, or
    A's newest if older); and each one merging resolved (distance d != 0, see _resolve_at) resolved
    in its rows of both merged rings (fine, coarse: blocks, tokens, counts and the newest slot). The
    coarse slot is the one of the first's own fine slot, in the kernel's arithmetic
    (kvset.core.kernel), or A's newest if older. Resolved firsts in a row with the same slot and
    distance (a run of re-reads, see kvset.core.partial_stack_merge) are moved together."""
    merged = (newest, coarse_newest, fine_width, coarse_width, fine, coarse)
    slot, dist, count, tok = NO_SLOT, np.int64(0), np.int64(0), np.int64(0)  # the firsts pending
    for i in range(first_slots.shape[0]):
        own = first_slots[i]
        f = own if newest == NO_SLOT or own >= newest else newest
        moved[i] = f
        d = distance[i]
        if d == 0:
            continue
        if count and (own != slot or d != dist):
            _resolve_pending(slot, dist, count, tok, merged)
            count = tok = 0
        slot, dist = own, d
        count += 1
        tok += tokens[i]
    if count:
        _resolve_pending(slot, dist, count, tok, merged)


@dataclass(frozen=True, eq=False)
class PartialSlots:
    """The time slots of one run of accesses: both rings, the fine slot of each first (in the order of
    PartialStack.firsts), the on-time accesses per fine slot touched (slot ids ascending), and the
    late accesses."""

    fine: RingState
    coarse: RingState
    first_slots: Ints
    on_time_slots: Ints
    on_time: Ints
    late: int

    def nbytes(self) -> int:
        arrays = (self.first_slots, self.on_time_slots, self.on_time)
        return self.fine.nbytes() + self.coarse.nbytes() + sum(a.nbytes for a in arrays)


def empty_slots(horizon: int, slot_seconds: float = 1.0, fine_slots: int = 360,
                coarse_seconds: float = 60.0, coarse_slots: int = 120) -> PartialSlots:  # fmt: skip
    nb = len(WINDOW_GRID.capacities(horizon))
    none = np.zeros(0, dtype=np.int64)
    return PartialSlots(
        empty_ring(slot_seconds, fine_slots, nb),
        empty_ring(coarse_seconds, coarse_slots, nb),
        none,
        none,
        none,
        0,
    )


def merge_slots(
    a: PartialSlots,
    b: PartialSlots,
    distance: Ints,
    first_tokens: Ints,
    new: npt.NDArray[np.bool_],
    a_complete: bool,
    horizon: int,
    keep_firsts: bool = True,
) -> PartialSlots:
    """The slots of A's accesses then B's. distance: what merging resolved of B's firsts (see
    _resolve_in_slots; 0: not found), first_tokens their tokens, new: those that stay firsts, which
    follow A's when A's firsts are all its blocks, up to the horizon (as PartialStack.firsts); not
    kept at a merge tree's root, which keeps no firsts."""
    newest = a.fine.current
    fine, coarse = merge_rings(a.fine, b.fine), merge_rings(a.coarse, b.coarse)
    b_fine = np.empty_like(b.first_slots)
    _resolve_in_slots(
        b.first_slots,
        distance,
        first_tokens,
        newest,
        a.coarse.current,
        a.fine.width,
        a.coarse.width,
        (fine.blocks, fine.tokens, fine.counts, fine.current),
        (coarse.blocks, coarse.tokens, coarse.counts, coarse.current),
        b_fine,
    )
    late = a.late + b.late
    on_slots, on_time = b.on_time_slots, b.on_time
    if newest != NO_SLOT and len(on_slots):
        older = on_slots < newest  # all late after A
        late += int(on_time[older].sum())
        on_slots, on_time = on_slots[~older], on_time[~older]
    slots = np.concatenate([a.on_time_slots, on_slots])
    counts = np.concatenate([a.on_time, on_time])
    if len(a.on_time_slots) and len(on_slots) and on_slots[0] == a.on_time_slots[-1]:  # A's newest, continued
        counts[len(a.on_time) - 1] += counts[len(a.on_time)]
        slots, counts = np.delete(slots, len(a.on_time)), np.delete(counts, len(a.on_time))
    if not keep_firsts:
        firsts = np.zeros(0, dtype=np.int64)
    else:
        firsts = np.concatenate([a.first_slots, b_fine[new]])[:horizon] if a_complete else a.first_slots
    return PartialSlots(fine, coarse, firsts, slots, counts, late)


@njit(nogil=True, cache=True)
def _mark_slots(
    stamps: npt.NDArray[np.float64],
    width: float,
    newest: Int,
    at: Ints,
    slots_at: Ints,
    ids: Ints,
    on_time: Ints,
) -> tuple[Int, Int]:  # pragma: no cover - compiled
    """Per access, the slot the analyzer counts it in (its stamp's, or the newest before it if later),
    written for the accesses at `at` (ascending) into slots_at; per slot of the batch, in order, its
    id and the accesses stamped in it (on time). Returns the number of slots and the newest. One pass,
    in the kernel's arithmetic; a stamp equal to the one before (a request's accesses share theirs)
    reuses its slot rather than dividing again."""
    k = -1
    j, m = 0, at.shape[0]
    want = at[0] if m else -1  # the next access whose slot is asked for
    last = np.nan  # compares unequal to every stamp, itself included
    own = np.int64(0)
    current = np.int64(0)  # ids[k], and its on-time count, kept out of memory until the slot ends
    count = np.int64(0)
    for i in range(stamps.shape[0]):
        s = stamps[i]
        if s != last:  # the newest slot, and so the batch's slots, change only where the stamp does
            own = np.int64(np.floor(s / width))
            last = s
            if own > newest:
                newest = own
            if k < 0 or current != newest:
                if k >= 0:
                    on_time[k] = count
                k += 1
                ids[k] = current = newest
                count = 0
        if own >= newest:
            count += 1
        if i == want:
            slots_at[j] = newest
            j += 1
            want = at[j] if j < m else -1
    if k >= 0:
        on_time[k] = count
    return k + 1, newest


class SlotMarks:
    """What the analyzer's rings do not say about a partition's accesses: the fine slot each first is
    counted in and the accesses on time per slot (the rest are late). Fed the timestamps of each
    batch, in the order the analyzer takes its accesses."""

    def __init__(self, width: float) -> None:
        self.width = float(width)
        self.newest = NO_SLOT
        self._ids: list[Ints] = []
        self._on_time: list[Ints] = []

    def feed(self, stamps: np.ndarray, n: int, at: Ints) -> Ints:
        """The slots of the batch's accesses at `at` (ascending indices into its n accesses; stamps:
        one per access, or one for all)."""
        slots_at = np.empty(len(at), dtype=np.int64)
        if len(stamps) == n and n > 1:
            ids, on_time = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
            k, newest = _mark_slots(stamps, self.width, self.newest, at, slots_at, ids, on_time)
            self.newest = int(newest)
            ids, on_time = ids[:k].copy(), on_time[:k].copy()  # not the batch-long arrays kept
        else:  # one stamp for the batch, as the analyzer reads it
            first = math.floor(float(stamps[0]) / self.width)
            newest = max(first, self.newest)
            slots_at[:] = newest
            ids, on_time = np.array([newest], dtype=np.int64), np.array([n if first >= self.newest else 0])
            self.newest = newest
        self._ids.append(ids)
        self._on_time.append(on_time)
        return slots_at

    def on_time(self) -> tuple[Ints, Ints]:
        """The slots touched, ascending, and the accesses on time in each."""
        none = np.zeros(0, dtype=np.int64)
        ids, counts = np.concatenate([none, *self._ids]), np.concatenate([none, *self._on_time])
        first = np.concatenate([[True], np.diff(ids) != 0]) if len(ids) else np.zeros(0, dtype=bool)
        starts = np.flatnonzero(first)
        return ids[starts], np.add.reduceat(counts, starts) if len(starts) else none
