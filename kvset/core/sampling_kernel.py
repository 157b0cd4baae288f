"""The numeric kernel of the sampled analyzer: a spatial sample of the blocks, weighted stack distances.

A block is tracked iff its priority u = h >> k_b is at most the limit L, where h is a seeded 64-bit
mix of its key and k_b the head boost of the access's position band b (see kvset.core.sampling).
With k_b = 0 that is SHARDS' rule h < R x 2^64; the first blocks of each request get 2^k_b times the
rate, so the blocks every request shares are sampled densely and cheaply. Where block positions
vary the bands go by access count instead (kvset.core.sampling_rates), each re-access weighed by
the rate of the access before it.

Every tracked block carries a weight, 1 / its sampling rate, and has one live slot: the slot of its
latest tracked access, holding its weight, the weighted count W of tracked accesses before it, its
full-stream access index g and its band: slot[s] = (weight, W, g, band), half a cache line; weight 0
is a free slot. Weights are fixed point (WEIGHT_ONE = weight 1), so the Fenwick tree's sums are
integer additions. At a re-access, with t the accesses in between (exact), a the weighted tracked
accesses in between and k the weighted live blocks after its slot (a Fenwick tree of weights),
    d = 1 + t * k / a        (1 + t when no tracked access lies in between)
estimates the stack distance: t is known exactly and k / a, the share of distinct blocks among the
accesses in between, is what the sample says. At rate 1 it is the exact distance (a = t, k counts
the distinct blocks). The kernel uses the exact kernel's hash table (kvset.core.hash_table).

The batch's sampled accesses are gathered before the kernel runs (kvset.core.sampling_filter:
every access is hashed and tested there, which is most of the cost when few are kept). Per time
slot's run, the kernel takes up to BATCH of them at a time, handles them in order with the hash
cell of the one PREFETCH_CELL ahead and the slot of the one PREFETCH_SLOT ahead already requested,
adds the hits to the all-time histograms in a loop of their own, then counts every access of the
run by band. The slots, the Fenwick tree and the passes that
are not per access are in kvset.core.sampling_slots.

The state lives in numpy arrays owned by kvset.core.sampling.SampledAnalyzer; compiled with numba,
nogil, like the exact kernel.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core import fenwick
from kvset.core import hash_table as HT
from kvset.core import intrinsics as IN
from kvset.core import kernel_layout as KL
from kvset.core.kernel_types import Int
from kvset.core.log_grid import FINE_GRID, WINDOW_GRID, bucket_of
from kvset.core.ring_kernel import ring_add
from kvset.core.sampling_filter import (
    count_position_bands,
    first_at_or_after,
    first_at_or_after_sorted,
    priority_hash,
    request_base,
)
from kvset.core.sampling_slots import (
    W_BAND,
    W_BEFORE,
    W_INDEX,
    W_WEIGHT,
    compact_slots,
    rebuild_fenwick,
)

# meta[] layout (int64)
S_NOW = 0  # next free slot
S_TRACKED = 1  # live slots == tracked blocks
S_CAPACITY = 2  # tracked blocks the arrays are sized for
S_INDEX = 3  # full-stream accesses so far: the index g of the next access
S_POS = 4  # position of the batch's first access in its request, when it continues the last one
S_SLOT = 5  # the fine time slot accesses are counted in
S_LATE = 6  # accesses stamped before the current slot, all time
S_REASON = 7  # why the kernel returned
S_SIZE_LIMIT = 8  # fixed size: most tracked blocks (0: fixed rate)
S_HORIZON = 9
S_MAX_DISTANCE = 10  # largest estimated distance inside the horizon
S_COMPACTIONS = 11
S_SAMPLED = 12  # tracked accesses so far (unweighted)
S_RUN_START = 13  # index in the batch where the current time slot's run began
S_REQUESTS = 14  # requests begun, all time
S_FINE_CURRENT = 15  # the rings' newest slots (NO_SLOT: none yet)
S_COARSE_CURRENT = 16
S_LIVE = 17  # sum of the live slots' weights (fixed point)
S_WEIGHT = 18  # weighted tracked accesses so far: W of the next tracked access (fixed point)
S_EVIDENCE = 19  # re-accesses of blocks kept at every position, while the heads are boosted
S_MOVED = 20  # those at a position band of another rate than the access before
META_SIZE = 21
WEIGHT_ONE = 1 << 16  # fixed point of the weights: room for 1e14 accesses in an int64

STOP_DONE = KL.STOP_DONE
STOP_GROW = KL.STOP_GROW
STOP_NEXT_SLOT = KL.STOP_NEXT_SLOT
STOP_EVICT = 3  # fixed size: a new block would exceed the size limit
STOP_MOVED = 4  # block positions vary: the heads must no longer be boosted (kvset.core.sampling_rates)

# sampled[group, band, kind, unit] (float64, weighted): kinds
T_ACCESSES = 0
T_FIRST_TIME = 1
T_BEYOND = 2
KINDS = 3

BATCH = 1024  # sampled accesses gathered before they are handled
PREFETCH_CELL = 16
PREFETCH_SLOT = 8
GROUPS = 8  # random groups of the sample (low bits of the hash), for the error bound
SCALE = 1 << 16  # fixed point of the time-slot rings (int64): weighted counts times SCALE

# the all-time histograms' grid and the windowed ones', as compile-time constants
FINE_EXACT_BITS, FINE_OCTAVE_BITS = FINE_GRID
GRID_EXACT_BITS, GRID_OCTAVE_BITS = WINDOW_GRID


@njit(nogil=True, cache=True)
def sampled_feed_kernel(
    keys: np.ndarray,
    tokens: np.ndarray,
    stamps: np.ndarray,
    per_access: bool,
    ordered: bool,
    slot_width: float,
    starts: np.ndarray,
    reverse: bool,
    start: Int,
    stop: Int,
    found_all: np.ndarray,
    band_all: np.ndarray,
    key_all: np.ndarray,
    n_found: Int,
    access_band: np.ndarray,
    salt: np.uint64,
    weights: np.ndarray,
    fixed_weights: np.ndarray,
    watch: bool,
    core_limit: np.uint64,
    min_evidence: Int,
    moved_share: float,
    table: np.ndarray,
    mask: Int,
    slot_key: np.ndarray,
    slot: np.ndarray,
    fen: np.ndarray,
    meta: np.ndarray,
    band_counts: np.ndarray,
    sampled: np.ndarray,
    hist: np.ndarray,
    ghist: np.ndarray,
    plain: tuple[np.ndarray, np.ndarray, np.ndarray],
    plain_weight: float,
    token_planes: bool,
    bucket_blocks: np.ndarray,
    bucket_tokens: np.ndarray,
    counts: np.ndarray,
    fine: tuple[np.ndarray, ...],
    coarse_width: float,
    coarse: tuple[np.ndarray, ...],
) -> Int:
    """Process keys[start:stop], from the time slot meta[S_SLOT] on; return the index reached.

    per_access: stamps has a timestamp per access (ordered: non-decreasing ones), else the whole
    call is in the current slot. starts: request starts in this batch (positions count from them;
    accesses before the first one continue the last request, at position meta[S_POS]); reverse:
    each request's accesses are in reverse order (positions still count from its first block).
    found_all[:n_found], band_all, key_all: the batch's sampled accesses (index, position band, key;
    sampling_filter.gather_batch). access_band: the band of every access of the batch when bands go
    by access count (sampling_filter.gather_counted), else empty. weights[b]: 1 / rate of band b
    (fixed_weights: the same in fixed point). watch: the heads are boosted, so the re-accesses of
    the blocks kept at every position (hash <= core_limit) are counted, and those whose band's rate
    differs from the access before's (meta[S_EVIDENCE], meta[S_MOVED]), and all their accesses are
    also tallied in `plain` (sampling_counts.PlainTallies: sampled, hist, ghist without the band
    axis), weighed plain_weight = 1 / R. Stops early, meta[S_REASON]
    saying why, when the arrays are full (STOP_GROW), when a fixed-size sample is full (STOP_EVICT)
    or when more than moved_share of at least min_evidence such re-accesses moved (STOP_MOVED); the
    access it stops at is untouched, so the caller resumes there.
    The all-time outputs (band_counts, sampled, hist, ghist) stay raw; hist and ghist in planes
    (blocks, tokens), the tokens planes (and the rings' tokens) only written when token_planes. Each
    time slot's run is tallied in the scratch (bucket_blocks, bucket_tokens, counts: fixed point,
    SCALE, each sampled access weighted by its band's accesses per weighted sampled access as of the
    run) and added to the fine and coarse rings (`fine`, `coarse`: tuples of SlotRing's arrays) when
    the slot ends.
    """
    nbands = weights.shape[0]
    per_access_tokens = tokens.shape[0] == keys.shape[0]
    nslots = slot_key.shape[0]
    horizon = meta[S_HORIZON]
    size_limit = meta[S_SIZE_LIMIT]
    capacity = meta[S_CAPACITY]
    n = keys.shape[0]
    nstarts = starts.shape[0]
    g0 = meta[S_INDEX] - start  # full-stream index of access x: g0 + x
    ring = np.empty((nbands, 2), dtype=np.float64)
    none = np.zeros(0, dtype=np.int64)
    no_spill = (none, none, none, none)  # the sampled analyzer's rings drop what they lose
    # hot state in locals, written back once on the way out
    now = meta[S_NOW]
    live = meta[S_LIVE]
    wsum = meta[S_WEIGHT]
    max_d = meta[S_MAX_DISTANCE]
    tracked = meta[S_TRACKED]
    evidence = meta[S_EVIDENCE]
    moved = meta[S_MOVED]
    n_sampled = 0
    reason = STOP_DONE
    # the batch's sampled accesses, gathered before the kernel (sampling_filter.gather_batch), from
    # the first one at `start` on; they are handled up to BATCH at a time
    cursor = np.searchsorted(found_all[:n_found], start, side="left")
    found_home = np.empty(BATCH, dtype=np.int64)
    hit_at = np.empty(BATCH, dtype=np.int64)  # the hits among them: index in found, distance, group,
    hit_distance = np.empty(BATCH, dtype=np.int64)  # and the windows' grid bucket (found with the distance)
    hit_group = np.empty(BATCH, dtype=np.int64)
    hit_grid = np.empty(BATCH, dtype=np.int64)
    hit_weight = np.empty(BATCH, dtype=np.float64)
    hit_core = np.empty(BATCH, dtype=np.bool_)  # a block kept at every band: a plain tally too
    plain_sampled, plain_hist, plain_ghist = plain
    counted = access_band.shape[0] > 0  # bands by access count, not position
    r = np.searchsorted(starts, start, side="right") - 1  # the request access `start` belongs to
    run_length: Int = 0  # the last time slot's accesses: the next one likely ends past 3/4 of as many
    x: Int = start
    while True:
        # -- one time slot's run: up to the first access stamped at or after the slot's end --------
        tslot = meta[S_SLOT]  # the time slot (not a tracked block's slot)
        slot_begin = tslot * slot_width
        slot_end = (tslot + 1) * slot_width
        if not per_access:
            end = stop
        elif ordered:
            end = first_at_or_after_sorted(stamps, x, stop, slot_end, x + run_length * 3 // 4)
        else:
            end = first_at_or_after(stamps, x, stop, slot_end)
        for b in range(nbands):
            for u in range(2):
                sw = 0.0
                grp: Int  # an int here, a numpy int64 below: numba unifies them, mypy is told
                for grp in range(GROUPS):
                    sw += sampled[grp, b, T_ACCESSES, u]
                ring[b, u] = SCALE * band_counts[b, u] / sw if sw > 0.0 else SCALE
        run_first = x
        run_length = end - x
        while x < end and reason == STOP_DONE:
            # the run's next sampled accesses, up to BATCH of them: every access before `done` that
            # is not among them is not sampled
            last = cursor
            while last < n_found and found_all[last] < end and last - cursor < BATCH:
                last += 1
            done = found_all[last] if last < n_found and found_all[last] < end else end
            found, found_band, found_key = found_all[cursor:last], band_all[cursor:last], key_all[cursor:last]
            m: Int = last - cursor
            cursor = last
            n_hits = 0
            # handle them in order; the table cell of the access PREFETCH_CELL ahead and the slot
            # its home cell names PREFETCH_SLOT ahead are fetched while the ones before are handled
            for j in range(min(m, PREFETCH_CELL)):
                found_home[j] = np.int64(HT.mix(found_key[j]) & np.uint64(mask))
                IN.prefetch(table, 2 * found_home[j])
            for j in range(m):
                if j + PREFETCH_CELL < m:
                    hj = np.int64(HT.mix(found_key[j + PREFETCH_CELL]) & np.uint64(mask))
                    found_home[j + PREFETCH_CELL] = hj
                    IN.prefetch(table, 2 * hj)
                if j + PREFETCH_SLOT < m:
                    v = table[2 * found_home[j + PREFETCH_SLOT] + 1]
                    if v < np.uint64(nslots):
                        IN.prefetch(slot, np.int64(v))
                        IN.prefetch(fen, np.int64(v) + 1)  # the first nodes of its Fenwick walks
                y = found[j]
                b = found_band[j]
                key = found_key[j]
                cell = HT.table_probe(table, mask, key, found_home[j])
                if cell < 0:
                    if size_limit > 0 and tracked >= size_limit:
                        reason = STOP_EVICT
                    elif tracked >= capacity:
                        reason = STOP_GROW
                    if reason != STOP_DONE:
                        done = y
                        break
                h = priority_hash(key, salt)
                core = watch and h <= core_limit
                if core and cell >= 0:
                    # a block kept at every position: its access before was seen, at its band
                    now_moved = moved + (slot[np.int64(table[2 * cell + 1]), W_WEIGHT] != fixed_weights[b])
                    if evidence + 1 >= min_evidence and now_moved > moved_share * (evidence + 1):
                        reason = STOP_MOVED
                        done = y
                        break
                    evidence += 1
                    moved = now_moved
                w = weights[b]
                if counted:
                    # bands by count (kvset.core.sampling_rates): a block is kept from the first access
                    # whose band's rate takes it on, so a re-access is seen at its access before's rate,
                    # and a first access only if the block is kept at every band; a block taken on at
                    # a boosted band was seen before unkept: no tally
                    if cell >= 0:
                        w = weights[slot[np.int64(table[2 * cell + 1]), W_BAND]]
                    elif h > core_limit:
                        w = 0.0
                    else:
                        w = weights[0]
                tok = tokens[y] if per_access_tokens else tokens[0]
                if now >= nslots:
                    # renumber the live slots in place
                    now = compact_slots(table, mask, slot_key, slot, fen, now)
                    live = rebuild_fenwick(slot, fen, now)
                    meta[S_COMPACTIONS] += 1
                grp = np.int64(h & np.uint64(GROUPS - 1))
                wt = w * tok
                ring_w = np.int64(w * ring[b, 0] + 0.5)
                ring_wt = np.int64(wt * ring[b, 1] + 0.5) if token_planes else ring_w * tok
                kind = T_ACCESSES  # a hit, unless beyond the horizon or a first access
                if cell >= 0:
                    p = np.int64(table[2 * cell + 1])
                    wp = slot[p, W_WEIGHT]
                    between = wsum - slot[p, W_BEFORE] - wp
                    gap = g0 + y - slot[p, W_INDEX] - 1
                    if between > 0:
                        share = (live - fenwick.prefix(fen, p)) / between
                        d = 1.0 + gap * (share if share < 1.0 else 1.0)
                    else:
                        d = 1.0 + gap
                    fenwick.remove_below(fen, p, wp, now)
                    live -= wp
                    slot[p, W_WEIGHT] = 0
                    di = np.int64(d + 0.5)
                    if di > horizon:
                        sampled[grp, b, T_BEYOND, 0] += w
                        sampled[grp, b, T_BEYOND, 1] += wt
                        kind = T_BEYOND
                        counts[KL.C_BEYOND] += ring_w
                        counts[KL.C_BEYOND_TOKENS] += ring_wt
                    else:
                        if di > max_d:
                            max_d = di
                        q = bucket_of(di, GRID_EXACT_BITS, GRID_OCTAVE_BITS)
                        hit_at[n_hits] = j
                        hit_distance[n_hits] = di
                        hit_group[n_hits] = grp
                        hit_grid[n_hits] = q
                        hit_weight[n_hits] = w
                        hit_core[n_hits] = core
                        n_hits += 1
                        bucket_blocks[q] += ring_w
                        if token_planes:
                            bucket_tokens[q] += ring_wt
                        counts[KL.C_HITS] += ring_w
                else:
                    cell = -cell - 1
                    table[2 * cell] = key
                    tracked += 1
                    sampled[grp, b, T_FIRST_TIME, 0] += w
                    sampled[grp, b, T_FIRST_TIME, 1] += wt
                    kind = T_FIRST_TIME
                    counts[KL.C_FIRST_TIME] += ring_w
                    counts[KL.C_FIRST_TIME_TOKENS] += ring_wt
                sampled[grp, b, T_ACCESSES, 0] += w
                sampled[grp, b, T_ACCESSES, 1] += wt
                if core:  # while boosted: the plain sample's tallies too (sampling_counts.PlainTallies)
                    plain_sampled[grp, T_ACCESSES, 0] += plain_weight
                    plain_sampled[grp, T_ACCESSES, 1] += plain_weight * tok
                    if kind != T_ACCESSES:
                        plain_sampled[grp, kind, 0] += plain_weight
                        plain_sampled[grp, kind, 1] += plain_weight * tok
                slot_key[now] = key
                wf = fixed_weights[b]
                slot[now, W_WEIGHT] = wf
                slot[now, W_BEFORE] = wsum
                slot[now, W_INDEX] = g0 + y
                slot[now, W_BAND] = b
                table[2 * cell + 1] = np.uint64(now)
                fenwick.append(fen, now, wf)
                live += wf
                wsum += wf
                now += 1
                n_sampled += 1
            # the hits' histograms, in a loop of their own after the list
            for k in range(n_hits):
                j = hit_at[k]
                b = found_band[j]
                di = hit_distance[k]
                w = hit_weight[k]
                f = bucket_of(di, FINE_EXACT_BITS, FINE_OCTAVE_BITS)
                q = hit_grid[k]
                hist[0, b, f] += w
                ghist[0, hit_group[k], b, q] += w
                tok = tokens[found[j]] if per_access_tokens else tokens[0]
                if token_planes:
                    hist[1, b, f] += w * tok
                    ghist[1, hit_group[k], b, q] += w * tok
                if hit_core[k]:
                    for u in range(2 if token_planes else 1):
                        plain_hist[u, f] += plain_weight * (tok if u else 1)
                        plain_ghist[u, hit_group[k], q] += plain_weight * (tok if u else 1)
            # every access of the round that was handled, counted exactly by band
            while x < done:
                while r + 1 < nstarts and starts[r + 1] <= x:
                    r += 1
                seg_end = min(done, starts[r + 1] if r + 1 < nstarts else n)
                back, base = request_base(r, starts, nstarts, n, reverse, meta[S_POS])
                if counted:  # bands by access count, one an access
                    seg_tokens = 0
                    for z in range(x, seg_end):
                        b = access_band[z]
                        t_one = tokens[z] if per_access_tokens else tokens[0]
                        band_counts[b, 0] += 1
                        band_counts[b, 1] += t_one
                        seg_tokens += t_one
                else:
                    seg_tokens = count_position_bands(
                        band_counts, tokens, per_access_tokens, x, seg_end, base, back
                    )
                counts[KL.C_ACCESSES] += SCALE * (seg_end - x)
                counts[KL.C_TOKENS] += SCALE * seg_tokens
                x = seg_end
        if per_access and not ordered:  # in order, nothing is stamped before its slot
            late = 0
            for z in range(run_first, x):
                late += stamps[z] < slot_begin
            meta[S_LATE] += late
        if reason != STOP_DONE:
            break  # the caller makes room and calls again: the run goes on in the same scratch
        # the run is over (the slot ends, or the batch): its tallies go to the rings
        begun = np.searchsorted(starts, x, side="left") - np.searchsorted(
            starts, meta[S_RUN_START], side="left"
        )
        meta[S_REQUESTS] += begun
        coarse_slot = np.int64(np.floor(tslot * slot_width / coarse_width))
        ring_add(
            fine,
            no_spill,
            tslot,
            bucket_blocks,
            bucket_tokens,
            token_planes,
            counts,
            meta,
            S_FINE_CURRENT,
            begun,
        )
        ring_add(
            coarse,
            no_spill,
            coarse_slot,
            bucket_blocks,
            bucket_tokens,
            token_planes,
            counts,
            meta,
            S_COARSE_CURRENT,
            begun,
        )
        for q in range(bucket_blocks.shape[0]):
            bucket_blocks[np.uint64(q)] = 0
        if token_planes:
            for q in range(bucket_tokens.shape[0]):
                bucket_tokens[np.uint64(q)] = 0
        for q in range(counts.shape[0]):
            counts[np.uint64(q)] = 0
        meta[S_RUN_START] = x
        if x >= stop:
            break
        meta[S_SLOT] = np.int64(np.floor(stamps[x] / slot_width))
    meta[S_INDEX] = g0 + x
    meta[S_NOW] = now
    meta[S_MAX_DISTANCE] = max_d
    meta[S_TRACKED] = tracked
    meta[S_EVIDENCE] = evidence
    meta[S_MOVED] = moved
    meta[S_SAMPLED] += n_sampled
    meta[S_LIVE] = live
    meta[S_WEIGHT] = wsum
    meta[S_REASON] = reason
    return x
