"""The numeric kernel: exact LRU stack distances in one pass (Mattson 1970 + a Fenwick tree).

Every tracked block has one live access slot: the slot of its latest access. A Fenwick tree
over slots counts live slots, so the stack distance of a re-access is
    d = 1 + (live slots after the block's previous slot) = 1 + tracked - prefix(prev).
Slots are renumbered (compacted) when they run out, so memory is O(tracked blocks).
At most `horizon` blocks are tracked: the least recently used one is forgotten first, which
is exactly the block pushed to stack position H+1, so the curve stays exact for C <= H.

State lives in plain numpy arrays owned by kvset.core.analyzer.Analyzer; these functions are
compiled with numba (nogil, so a worker thread leaves the UI thread free).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core import fenwick
from kvset.core.hash_table import EMPTY, mix, table_delete, table_find, table_probe
from kvset.core.intrinsics import popcount, prefetch
from kvset.core.kernel_layout import (
    BEYOND_HORIZON,
    C_ACCESSES,
    C_BEYOND,
    C_BEYOND_TOKENS,
    C_FIRST_TIME,
    C_FIRST_TIME_TOKENS,
    C_HITS,
    C_TOKENS,
    FIRST_TIME,
    GONE_FULL,
    GONE_HAS_EMPTY_KEY,
    M_COARSE_CURRENT,
    M_EVICTED,
    M_FINE_CURRENT,
    M_GONE_CAP,
    M_GONE_FILL,
    M_GONE_FLAGS,
    M_HORIZON,
    M_LATE,
    M_MAX_DISTANCE,
    M_NOW,
    M_OLDEST,
    M_REASON,
    M_RUN_ACCESSES,
    M_RUNS,
    M_SLOT,
    M_SLOT_START,
    M_TRACKED,
    STOP_DONE,
    STOP_GROW,
    STOP_GROW_GONE,
)
from kvset.core.kernel_runs import extend_run, resolve_slot
from kvset.core.kernel_types import Int
from kvset.core.live_slots import SB_SHIFT, WORDS_PER_SB, live_between, live_prefix, live_test, release_slot
from kvset.core.log_grid import WINDOW_GRID, bucket_of
from kvset.core.ring_kernel import Rings, ring_add
from kvset.core.slot_compaction import compact

GRID_EXACT_BITS, GRID_OCTAVE_BITS = WINDOW_GRID  # the windowed histograms' grid, as compile-time constants


# Prefetching, in two stages, so that an access's dependent DRAM loads overlap the work of the
# accesses before it: the hash-table cell of the key PREFETCH_CELL accesses ahead, then, once that
# cell has arrived, the live-bit word of the slot it holds, PREFETCH_SLOT accesses ahead.
PREFETCH_CELL = 24
PREFETCH_SLOT = 10
HOMES_MASK = 31  # ring of home cells: a power of two above PREFETCH_CELL, minus one

# The forgotten set: every block forgotten at the horizon, exactly, so that a miss is called a
# re-reference beyond the horizon only for a block really seen before (a Bloom filter's false "seen"
# made first accesses into re-references). Open addressing over uint64 keys with EMPTY marking a free
# cell; the one key equal to EMPTY is a flag. Kept at most half full: the kernel stops
# (STOP_GROW_GONE) for the analyzer to double it, until its budget, after which it is full
# (GONE_FULL) and remembers no more: the split of misses is then a bound, and said to be.


@njit(inline="always")
def _gone_has(gone: np.ndarray, meta: np.ndarray, key: np.uint64) -> bool:
    if key == EMPTY:
        return bool(meta[M_GONE_FLAGS] & GONE_HAS_EMPTY_KEY)
    mask = np.uint64(gone.shape[0] - 1)
    j = mix(key) & mask
    while True:
        k = gone[j]
        if k == key:
            return True
        if k == EMPTY:
            return False
        j = (j + np.uint64(1)) & mask


@njit(inline="always")
def gone_add(gone: np.ndarray, meta: np.ndarray, key: np.uint64) -> None:
    """Remember `key` (the caller has made room: fill below half the cells)."""
    if key == EMPTY:
        meta[M_GONE_FLAGS] |= GONE_HAS_EMPTY_KEY
        return
    mask = np.uint64(gone.shape[0] - 1)
    j = mix(key) & mask
    while True:
        k = gone[j]
        if k == key:
            return
        if k == EMPTY:
            gone[j] = key
            meta[M_GONE_FILL] += 1
            return
        j = (j + np.uint64(1)) & mask


@njit(nogil=True, cache=True)
def regrow_gone(old: np.ndarray, new: np.ndarray, meta: np.ndarray) -> None:
    """Move the forgotten set's keys into the larger (empty) table `new`."""
    meta[M_GONE_FILL] = 0
    for k in old:
        if k != EMPTY:
            gone_add(new, meta, k)


@njit(inline="always")
def _close_slot(
    rings: Rings,
    slot: Int,
    slot_width: float,
    starts: np.ndarray,
    end: Int,
    bucket_blocks: np.ndarray,
    bucket_tokens: np.ndarray,
    counts: np.ndarray,
    total_counts: np.ndarray,
    meta: np.ndarray,
) -> None:
    """The slot's tallies (the batch's accesses meta[M_SLOT_START]:end) into the fine ring, the coarse
    ring its slot lies in, and the all-time counters; the scratch is cleared for the next slot.
    rings = (fine, its spill, coarse width, coarse, its spill), as ring_kernel.ring_add takes them."""
    fine, fine_spill, coarse_width, coarse, coarse_spill = rings
    begun = np.searchsorted(starts, end) - np.searchsorted(starts, meta[M_SLOT_START])
    ring_add(fine, fine_spill, slot, bucket_blocks, bucket_tokens, True, counts, meta, M_FINE_CURRENT, begun)
    coarse_slot = np.int64(np.floor(slot * slot_width / coarse_width))
    ring_add(
        coarse,
        coarse_spill,
        coarse_slot,
        bucket_blocks,
        bucket_tokens,
        True,
        counts,
        meta,
        M_COARSE_CURRENT,
        begun,
    )
    for q in range(counts.shape[0]):
        total_counts[np.uint64(q)] += counts[np.uint64(q)]
        counts[np.uint64(q)] = 0
    for q in range(bucket_blocks.shape[0]):
        bucket_blocks[np.uint64(q)] = 0
        bucket_tokens[np.uint64(q)] = 0
    meta[M_SLOT_START] = end


@njit(nogil=True, cache=True)
def feed_kernel(
    keys: np.ndarray,
    tokens: np.ndarray,
    stamps: np.ndarray,
    per_access: bool,
    slot_width: float,
    runs: bool,
    start: Int,
    stop: Int,
    table: np.ndarray,
    mask: Int,
    max_tracked: Int,
    slot_keys: np.ndarray,
    live: np.ndarray,
    fen: np.ndarray,
    meta: np.ndarray,
    gone: np.ndarray,
    hist: np.ndarray,
    bucket_blocks: np.ndarray,
    bucket_tokens: np.ndarray,
    counts: np.ndarray,
    out: np.ndarray,
    starts: np.ndarray,
    rings: Rings,
    total_counts: np.ndarray,
) -> Int:
    """Process keys[start:stop] from the time slot meta[M_SLOT] on; return the index reached.

    With per_access, stamps holds one timestamp per access; otherwise the caller has put the whole
    call into the current slot. Each slot's tallies (bucket_blocks, bucket_tokens, counts: the
    scratch) go to the rings and to total_counts as the slot ends, and at the end of the call
    (_close_slot; starts: the batch's request starts). Stops early, with meta[M_REASON] saying
    why, the scratch kept for the call that resumes, when
      STOP_GROW: a new block needs a larger table (tracked == max_tracked < horizon), or
      STOP_GROW_GONE: the forgotten set must grow.
    Accesses stamped before the current slot count in it (meta[M_LATE]).
    With `runs`, a run of re-read blocks (see kernel_runs.extend_run) is taken at once after its first two
    accesses; without, every access goes through the hash table (the per-block kernel).
    """
    nslots = slot_keys.shape[0]
    horizon = meta[M_HORIZON]
    track_gone = gone.shape[0] > 1
    # one token count for all, and no distances wanted, are given as length-1 arrays
    per_access_tokens = tokens.shape[0] == keys.shape[0]
    want_out = out.shape[0] == keys.shape[0]
    slot = meta[M_SLOT]
    slot_begin = slot * slot_width
    slot_end = (slot + 1) * slot_width
    # hot state in locals (registers), written back to meta once on the way out
    now = meta[M_NOW]
    tracked = meta[M_TRACKED]
    late = 0
    max_d = meta[M_MAX_DISTANCE]
    n_acc = n_tok = n_hits = 0
    # The newest word's live bits join the Fenwick tree only when the word is full: one tree
    # update per 64 accesses instead of one per access. A query reads the tree only for the
    # superblocks below its own and popcounts the words of its own, so it never misses them.
    pend = np.uint64(0)
    # home cells of the keys ahead, hashed once when their prefetch starts
    homes = np.empty(HOMES_MASK + 1, dtype=np.int64)
    for j in range(start, min(stop, start + PREFETCH_CELL)):
        homes[j & HOMES_MASK] = np.int64(mix(keys[j]) & np.uint64(mask))
    # Hits often come in runs over consecutive old slots (a request re-sending its context in the
    # order it was sent before): a slot's prefix is then the previous hit's plus the live bits
    # between them, with no tree query, and the tree's decrements for one superblock go in at once.
    run_p: Int = -1  # slot of the previous hit, while its prefix is still valid
    run_prefix: Int = 0  # live slots in [0, run_p] before it was freed
    freed = 0  # slots freed in superblock freed_sb, not yet subtracted in the tree
    freed_sb: Int = -1
    last_hit: Int = -1  # the access run_p belongs to
    reason = STOP_DONE
    i: Int = start
    while i < stop:
        is_late = 0  # counted only once the access is done, so a resumed access is not counted twice
        if per_access:
            t = stamps[i]
            if t >= slot_end or t < slot_begin:  # divide only near or past the slot's bounds
                s = np.int64(np.floor(t / slot_width))
                if s > slot:
                    counts[C_ACCESSES] += n_acc
                    counts[C_TOKENS] += n_tok
                    counts[C_HITS] += n_hits
                    n_acc = n_tok = n_hits = 0
                    _close_slot(
                        rings,
                        slot,
                        slot_width,
                        starts,
                        i,
                        bucket_blocks,
                        bucket_tokens,
                        counts,
                        total_counts,
                        meta,
                    )
                    slot = s
                    meta[M_SLOT] = s
                    slot_begin = slot * slot_width
                    slot_end = (slot + 1) * slot_width
                if s < slot:
                    is_late = 1
        if now >= nslots:
            # compact first, so the table is consistent while slots are renumbered
            if pend:
                fenwick.add(fen, (now - 1) >> SB_SHIFT, popcount(pend))
                pend = np.uint64(0)
            if freed:
                fenwick.add(fen, freed_sb, -freed)
                freed = 0
            run_p = -1
            meta[M_NOW] = now
            compact(table, mask, slot_keys, live, fen, meta, tracked)
            now = meta[M_NOW]
        if i + PREFETCH_CELL < stop:
            home = np.int64(mix(keys[i + PREFETCH_CELL]) & np.uint64(mask))
            homes[(i + PREFETCH_CELL) & HOMES_MASK] = home
            prefetch(table, 2 * home)
        if i + PREFETCH_SLOT < stop:
            ahead = keys[i + PREFETCH_SLOT]
            c = 2 * homes[(i + PREFETCH_SLOT) & HOMES_MASK]
            if table[c] == ahead and table[c + 1] != EMPTY:  # found in its home cell (the usual case)
                q = np.int64(table[c + 1])
                if q < nslots:
                    prefetch(live, q >> 6)
        key = keys[i]
        tok = tokens[i] if per_access_tokens else tokens[0]
        h = table_probe(table, mask, key, homes[i & HOMES_MASK])
        in_run = False  # this access hit the next live slot after the previous access's
        if h >= 0:
            p = resolve_slot(live, slot_keys, np.int64(table[2 * h + 1]))
            if run_p >= 0 and p > run_p and (p >> 6) - (run_p >> 6) <= WORDS_PER_SB:
                # the previous hit's slot was just below: count up from its prefix, no tree query
                between = live_between(live, run_p, p)
                prefix = run_prefix - 1 + between
                in_run = between == 1 and last_hit == i - 1
            else:
                if freed and (p >> SB_SHIFT) > freed_sb:  # the query reads the tree below p's superblock
                    fenwick.add(fen, freed_sb, -freed)
                    freed = 0
                prefix = live_prefix(live, fen, p)
            d = tracked - prefix + 1
            if d > max_d:
                max_d = d
            bit = np.uint64(1) << np.uint64(p & 63)
            live[p >> 6] &= ~bit
            if (p >> 6) == (now >> 6) and (pend & bit):
                pend &= ~bit  # never reached the tree
            else:
                # the tree's decrement waits while hits free slots of one superblock
                if (p >> SB_SHIFT) != freed_sb:
                    if freed:
                        fenwick.add(fen, freed_sb, -freed)
                    freed_sb = p >> SB_SHIFT
                    freed = 0
                freed += 1
            run_p = p
            run_prefix = prefix
            last_hit = i
            hist[d, 0] += 1  # blocks and tokens side by side: one cache line
            hist[d, 1] += tok
            b = bucket_of(d, GRID_EXACT_BITS, GRID_OCTAVE_BITS)
            bucket_blocks[b] += 1
            bucket_tokens[b] += tok
            n_hits += 1
            if want_out:
                out[i] = d
        else:
            if tracked >= horizon:
                if (
                    track_gone
                    and meta[M_GONE_FILL] >= meta[M_GONE_CAP]
                    and not meta[M_GONE_FLAGS] & GONE_FULL
                ):
                    reason = STOP_GROW_GONE
                    break
                # forget the least recently used tracked block (stack position H)
                s = meta[M_OLDEST]
                while not live_test(live, s):
                    if (live[s >> 6] >> np.uint64(s & 63)) == 0:
                        s = (s | 63) + 1  # rest of this word is free
                    else:
                        s += 1
                old = slot_keys[s]
                pend = release_slot(live, fen, pend, now, s)
                run_p = -1  # a slot below the last hit's is gone: its prefix changed
                meta[M_OLDEST] = s + 1
                table_delete(table, mask, table_find(table, mask, old))
                tracked -= 1
                meta[M_EVICTED] += 1
                if track_gone and meta[M_GONE_FILL] < meta[M_GONE_CAP]:
                    gone_add(gone, meta, old)
                h = table_find(table, mask, key)
            elif tracked >= max_tracked:
                reason = STOP_GROW
                break
            if track_gone and meta[M_EVICTED] > 0 and _gone_has(gone, meta, key):
                counts[C_BEYOND] += 1
                counts[C_BEYOND_TOKENS] += tok
                if want_out:
                    out[i] = BEYOND_HORIZON
            else:
                counts[C_FIRST_TIME] += 1
                counts[C_FIRST_TIME_TOKENS] += tok
                if want_out:
                    out[i] = FIRST_TIME
            h = -h - 1
            table[2 * h] = key
            tracked += 1
        # the access becomes its block's live slot
        slot_keys[now] = key
        bit = np.uint64(1) << np.uint64(now & 63)
        live[now >> 6] |= bit
        pend |= bit
        table[2 * h + 1] = np.uint64(now)
        now += 1
        if (now & 63) == 0:
            fenwick.add(fen, (now - 1) >> SB_SHIFT, popcount(pend))
            pend = np.uint64(0)
        n_acc += 1
        n_tok += tok
        late += is_late
        i += 1
        if runs and in_run and i < stop:
            if pend:
                fenwick.add(fen, (now - 1) >> SB_SHIFT, popcount(pend))
                pend = np.uint64(0)
            if freed:
                fenwick.add(fen, freed_sb, -freed)
                freed = 0
            k, k_tok, k_late, last_q = extend_run(
                keys,
                tokens,
                stamps,
                per_access,
                slot_width,
                slot,
                i,
                stop,
                p,
                now,
                slot_keys,
                live,
                fen,
                d,
                out,
            )
            if k:
                meta[M_RUNS] += 1
                meta[M_RUN_ACCESSES] += k
                # all k at the distance d of the access before them; the stack's order below is unchanged,
                # so run_prefix holds for the run's last slot too
                hist[d, 0] += k
                hist[d, 1] += k_tok
                bucket_blocks[b] += k
                bucket_tokens[b] += k_tok
                n_hits += k
                n_acc += k
                n_tok += k_tok
                late += k_late
                now += k
                i += k
                run_p = last_q
                last_hit = i - 1
                for j in range(i, min(stop, i + PREFETCH_CELL)):  # the skipped keys' homes were not hashed
                    home = np.int64(mix(keys[j]) & np.uint64(mask))
                    homes[j & HOMES_MASK] = home
                    prefetch(table, 2 * home)
    if pend:
        fenwick.add(fen, (now - 1) >> SB_SHIFT, popcount(pend))
    if freed:
        fenwick.add(fen, freed_sb, -freed)
    meta[M_NOW] = now
    meta[M_TRACKED] = tracked
    meta[M_LATE] += late
    meta[M_REASON] = reason
    meta[M_MAX_DISTANCE] = max_d
    counts[C_ACCESSES] += n_acc
    counts[C_TOKENS] += n_tok
    counts[C_HITS] += n_hits
    if reason == STOP_DONE:
        _close_slot(
            rings, slot, slot_width, starts, i, bucket_blocks, bucket_tokens, counts, total_counts, meta
        )
    return i
