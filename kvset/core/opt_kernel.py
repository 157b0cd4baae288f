"""The numeric kernel of the optimal curve: Belady MIN stack distances at every capacity in one pass.

MIN is a priority stack algorithm (Mattson et al. 1970): order the blocks so that the top C are
exactly what MIN holds with capacity C; the priority of a block is its next use (sooner = keep).
On an access to the block at depth d (0-based, d = stack size for a first access) the blocks
above it cascade: walking down from the top, the carried block is always the one used latest so
far; it swaps into every position whose block is used latest of all seen ("a record").
Equivalently the records of depths 0..d-1 (each used later than everything above it) shift
down to the next record's depth, the last one to depth d, and the accessed block goes on top
with its new next use. The OPT stack distance of the access is d + 1 (0 for a first access).

Records come in a few *runs* of consecutive depths (2 to 4 per access on average on agentic,
Mooncake, uniform and Zipf traces, where there are hundreds of records), and shifting a run
down by one is one removal at its end and one insertion at its start. So the stack is a rope of
next-use times and an access costs a search for the smallest key (the accessed block: its next
use is now), a walk of the records that skips whole subtrees, and 2 R + 2 positional edits:
O((1 + R) (log(S / CAP) + CAP)) for R runs and S stacked blocks. At most SHORT records (on a
re-read prefix, mostly the top alone) are rewritten in place instead, one overwrite each.
An access whose block lies one depth below the last one's, with the top (and perhaps the depth
above it) the only records, is one store into a chunk (kvset.core.opt_runs); one with the top and
one run of records down to it, each a depth further than the last one's, is one insertion and one
removal (a shifted run, the same module), with no search and no walk of the records; one whose
records are the top and the first of the keys of blocks read for the last time, gathered above it,
is two stores (a dead run, the same module).
Memory: the next-use array (8 bytes an access) and about 80 bytes per distinct block.

Blocks are never named: only their next-use times are stored. A block never used again has key
n (never); on a first access such a block is carried to the very bottom, below everything that
can still be hit, and is dropped instead, so S stays near the number of blocks with a future.

The rope and its positional edits are in kvset.core.opt_rope.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from kvset.core.hash_table import EMPTY, mix, table_find
from kvset.core.intrinsics import prefetch
from kvset.core.kernel_types import Int, Jit
from kvset.core.opt_rope import (
    ASC,
    BIG,
    CAP,
    CNT,
    FIELDS,
    MN,
    MX,
    NN,
    PATH,
    PR,
    SZ,
    argmin,
    flush,
    inline_plain,
    insert_at,
    pull,
    rebuild,
    record_runs,
    remove_at,
    replace_at,
)
from kvset.core.opt_runs import DEAD_SPAN, find_at, key_at, next_dead, prefix_max, settle, shifted_run_start

NEXT_USE_AHEAD = 32  # next_uses prefetches the table cell of the key this many accesses before


@njit(nogil=True, cache=True)
def next_uses(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """nxt[i] = index of the next access to keys[i], or n (never again); and the distinct keys."""
    n = keys.shape[0]
    nxt = np.empty(n, np.int64)
    mask = 1023
    table = np.empty(2 * (mask + 1), np.uint64)
    table[1::2] = EMPTY
    distinct = 0
    for i in range(n - 1, -1, -1):
        if i >= NEXT_USE_AHEAD:  # the key's cell is a cache miss once the table outgrows the caches
            prefetch(table, 2 * np.int64(mix(keys[i - NEXT_USE_AHEAD]) & np.uint64(mask)))
        h = table_find(table, mask, keys[i])
        if h >= 0:
            nxt[i] = np.int64(table[2 * h + 1])
            table[2 * h + 1] = np.uint64(i)
            continue
        nxt[i] = n
        h = -h - 1
        table[2 * h] = keys[i]
        table[2 * h + 1] = np.uint64(i)
        distinct += 1
        if 4 * distinct > 2 * (mask + 1):  # keep the table at most half full
            cells = 2 * (mask + 1)
            grown = np.empty(2 * cells, np.uint64)
            grown[1::2] = EMPTY
            for c in range(mask + 1):
                if table[2 * c + 1] != EMPTY:
                    g = -table_find(grown, cells - 1, table[2 * c]) - 1
                    grown[2 * g] = table[2 * c]
                    grown[2 * g + 1] = table[2 * c + 1]
            table = grown
            mask = cells - 1
    return nxt, distinct


class OptState(NamedTuple):
    """The kernel's arrays, in its argument order; hist is the result."""

    nd: np.ndarray
    ck: np.ndarray
    dirty: np.ndarray
    counts: np.ndarray
    order: np.ndarray
    stack: np.ndarray
    phase: np.ndarray
    rs: np.ndarray
    re: np.ndarray
    hist: np.ndarray
    flat: np.ndarray
    bstack: np.ndarray
    taken: np.ndarray  # accesses each way took: TAKEN's names, in order


# the ways an access goes, counted in OptState.taken (which of them a trace takes is what its speed
# depends on: docs/method.md, section 12)
TAKEN = ("run", "dead run", "shifted run", "few records", "record runs")
RUN, DEAD_RUN, SHIFTED_RUN, FEW_RECORDS, RECORD_RUNS = range(len(TAKEN))


def allocate(distinct: int) -> OptState:
    """The kernel's state for a stream of `distinct` distinct blocks (about 80 bytes each).

    Chunks after a rebuild are half full and the stack never holds more blocks than there are
    distinct ones, so twice that many chunks leave half the pool for splits between rebuilds.
    """
    nodes = 2 * (2 * distinct // CAP + 2) + 64
    nd = np.zeros((nodes, FIELDS), np.int64)
    ck = np.zeros((nodes, CAP), np.int64)
    dirty = np.zeros((8 * PATH, 2), np.int64)  # row 0: (current tag, count); then (node, depth)
    counts = np.zeros(PATH, np.int64)
    order = np.empty(8 * PATH, np.int64)
    stack = np.empty(PATH, np.int64)
    phase = np.empty(PATH, np.int64)
    rs = np.empty(distinct + 2, np.int64)
    re = np.empty(distinct + 2, np.int64)
    hist = np.zeros((distinct + 2, 2), np.int64)
    flat = np.empty(distinct + 2, np.int64)
    bstack = np.empty(nodes + 1, np.int64)
    taken = np.zeros(len(TAKEN), np.int64)
    return OptState(nd, ck, dirty, counts, order, stack, phase, rs, re, hist, flat, bstack, taken)


SHORT = 4  # at most this many records are shifted in place, more by positional edits

# without numba's reference counting, as the rope's helpers (opt_rope)
_compiled: Jit = njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]  # _nrt: not in numba's stubs


@inline_plain
def _count(hist: np.ndarray, out: np.ndarray, want_out: bool, t: Int, dist: Int, tok: Int, maxd: Int) -> Int:
    """Access t at distance dist into the histogram (and out); returns the largest distance so far."""
    hist[dist, 0] += 1
    hist[dist, 1] += tok
    if want_out:
        out[t] = dist
    return max(maxd, dist)


@_compiled
def opt_kernel(
    nxt: np.ndarray,
    tokens: np.ndarray,
    out: np.ndarray,
    nd: np.ndarray,
    ck: np.ndarray,
    dirty: np.ndarray,
    counts: np.ndarray,
    order: np.ndarray,
    stack: np.ndarray,
    phase: np.ndarray,
    rs: np.ndarray,
    re: np.ndarray,
    hist: np.ndarray,
    flat: np.ndarray,
    bstack: np.ndarray,
    taken: np.ndarray,
) -> Int:
    """OPT stack distances for next-use times nxt (n = never), histogrammed into hist[d] = (accesses, tokens).

    d = 0 for a first access. tokens: one per access, or a length-1 array for all; out: a distance
    per access, or length 1 for none; the other arrays come from allocate(). Returns the largest
    distance, or -1 if the stack lost count of its blocks (a bug: the caller raises).
    """
    n = nxt.shape[0]
    inf = np.int64(n)
    per_access_tokens = tokens.shape[0] == n
    want_out = out.shape[0] == n
    nd[0, MX] = -1
    nd[0, MN] = BIG
    nd[0, ASC] = 1
    root: Int = 1
    used: Int = 2
    pull(nd, ck, 1)
    seed = np.uint64(0x9E3779B97F4A7C15)
    nd[1, PR] = np.int64(seed >> np.uint64(1))
    dirty[0, 0] = 1
    maxd: Int = 0
    stacked = 0
    # a run (kvset.core.opt_runs): run_d the depth of its last access, (run_v, run_j) the chunk and
    # offset of the depth below (run_v 0: no run), (w_v, w_j) those of run_d, where the carried key
    # run_c belongs (kept here until the run ends), run_m at least every key at depths 1..run_d-1;
    # the top's chunk and key (kept here too)
    run_v: Int = 0
    run_j: Int = 0
    run_d: Int = 0
    run_m: Int = 0
    run_c: Int = 0
    w_v: Int = 0
    w_j: Int = 0
    moved = False  # the run took an access
    top_v: Int = 0
    top_key: Int = 0
    # a shifted run (kvset.core.opt_runs): sh_d the depth of its last access, sh_k where its run of
    # records starts (0: no shifted run), sh_x the key there, sh_y the top's, sh_m at least every key
    # at depths 1..sh_k-1
    sh_d: Int = 0
    sh_k: Int = 0
    sh_x: Int = 0
    sh_y: Int = 0
    sh_m: Int = 0
    # a dead run (kvset.core.opt_runs): dr_d the depth of its last access, dr_a that of the first dead
    # key below the top, dr_m at least every key at depths 1..dr_a-1, (a_v, a_j) the chunk and offset of dr_a, (dr_v, dr_j)
    # those of dr_d + 1 (dr_v 0: no dead run); the top's chunk and key are top_v and top_key, as above
    dr_v: Int = 0
    dr_j: Int = 0
    dr_d: Int = 0
    dr_a: Int = 0
    dr_m: Int = 0
    a_v: Int = 0
    a_j: Int = 0
    for t in range(n):
        tok = tokens[t] if per_access_tokens else tokens[0]
        if run_v != 0:
            if run_j == nd[run_v, CNT]:  # the run leaves its chunk: on to the next one
                run_v, run_j = find_at(nd, root, run_d + 1) if run_d + 1 < nd[root, SZ] else (0, 0)
            if run_v != 0 and ck[run_v, run_j] == t and run_m <= top_key:
                # the top, and the carried key if it is larger, the only records above the block:
                # the smaller of the two stays at run_d, the larger is carried on to the block's depth
                low = min(top_key, run_c)
                run_c = max(top_key, run_c)
                ck[w_v, w_j] = low
                if low > run_m:
                    run_m = low
                top_key = nxt[t]
                moved = True
                if w_v != run_v:
                    settle(nd, ck, root, run_d, w_v, dirty, counts, order)
                w_v, w_j = run_v, run_j
                run_d += 1
                run_j += 1
                maxd = _count(hist, out, want_out, t, run_d + 1, tok, maxd)
                taken[RUN] += 1
                continue
            # the run ends: what it kept aside goes back, the chunks it wrote are made right, and the
            # access goes the long way
            if moved:
                ck[w_v, w_j] = run_c
                settle(nd, ck, root, run_d, w_v, dirty, counts, order)
                ck[top_v, 0] = top_key
                settle(nd, ck, root, 0, top_v, dirty, counts, order)
            run_v = 0
        if dr_v != 0:
            if dr_j == nd[dr_v, CNT]:  # the block's depth leaves its chunk
                settle(nd, ck, root, dr_d, dr_v, dirty, counts, order)
                dr_v, dr_j = find_at(nd, root, dr_d + 1) if dr_d + 1 < nd[root, SZ] else (0, 0)
            if dr_v != 0 and ck[dr_v, dr_j] == t and dr_m <= top_key:
                # the top and the first dead key the only records: the top's key to dr_a, n to the block
                ck[dr_v, dr_j] = inf
                if top_key != inf:
                    ck[a_v, a_j] = top_key
                    dr_a, a_v, a_j, dr_m = next_dead(
                        nd, ck, root, dr_a + 1, a_v, a_j + 1, top_key, inf, inf, dirty, counts, order
                    )
                top_key = nxt[t]
                dr_d += 1
                dr_j += 1
                maxd = _count(hist, out, want_out, t, dr_d + 1, tok, maxd)
                taken[DEAD_RUN] += 1
                continue
            # the dead run ends: the chunks it wrote are made right, and the access goes the long way
            if dr_v != 0:
                settle(nd, ck, root, dr_d + 1, dr_v, dirty, counts, order)
            settle(nd, ck, root, dr_a, a_v, dirty, counts, order)
            ck[top_v, 0] = top_key
            settle(nd, ck, root, 0, top_v, dirty, counts, order)
            dr_v = 0
        if sh_k > 0:
            k = -1
            if sh_d + 1 < nd[root, SZ] and key_at(nd, ck, root, sh_d + 1) == t:
                k = shifted_run_start(nd, ck, root, sh_y, sh_x, sh_k, sh_m)
            if k > 0:
                # the top's key to depth k, the run below it down by one into the block's depth
                if k > sh_k:
                    sh_m = max(sh_m, sh_x)
                if dirty[0, 1] > dirty.shape[0] - 4 * PATH:  # room for three more paths
                    flush(nd, ck, dirty, counts, order)
                remove_at(nd, ck, root, sh_d + 1, dirty)
                root, used, seed = insert_at(nd, ck, root, k, sh_y, dirty, counts, order, used, seed)
                if used < 0:
                    flush(nd, ck, dirty, counts, order)
                    root, used, seed = rebuild(nd, ck, root, seed, flat, bstack)
                    root, used, seed = insert_at(nd, ck, root, k, sh_y, dirty, counts, order, used, seed)
                replace_at(nd, ck, root, 0, nxt[t], dirty)
                # the nodes' summaries are left for the flush when the shifted run ends (or the edits
                # need them): while it goes on nothing reads them, only the sizes, which edits keep
                if CAP * nd[root, NN] > 4 * nd[root, SZ] + 16 * CAP:
                    flush(nd, ck, dirty, counts, order)
                    root, used, seed = rebuild(nd, ck, root, seed, flat, bstack)
                sh_x, sh_y, sh_k = sh_y, nxt[t], k
                sh_d += 1
                maxd = _count(hist, out, want_out, t, sh_d + 1, tok, maxd)
                taken[SHIFTED_RUN] += 1
                continue
            sh_k = 0
            flush(nd, ck, dirty, counts, order)
        size = nd[root, SZ]
        seen = size > 0 and nd[root, MN] == t  # the accessed block's key is its next use: now
        d = argmin(nd, ck, root, t) if seen else size
        if d < 0 or size != stacked:
            return -1
        dist = d + 1 if seen else 0
        nr = record_runs(nd, ck, root, d, rs, re, stack, phase) if d > 0 else 0
        records = 0
        for i in range(nr):
            records += re[i] - rs[i] + 1
        if (seen or nr > 0) and records <= SHORT:
            # few records (most accesses of a re-read prefix: the top alone, or one more): shift
            # them along the chain in place, the new next use on top, the last record into the
            # block's depth (or below the stack for a first access); the tree keeps its shape
            carry = nxt[t]
            old_top = carry
            if nr == 0:
                replace_at(nd, ck, root, 0, carry, dirty)
            for i in range(nr):
                for p in range(rs[i], re[i] + 1):
                    carry = replace_at(nd, ck, root, p, carry, dirty)
                    if p == 0:
                        old_top = carry
            if seen and nr > 0:
                replace_at(nd, ck, root, d, carry, dirty)
            elif not seen and carry != inf:  # a dead block carried to the bottom is dropped
                root, used, seed = insert_at(nd, ck, root, d, carry, dirty, counts, order, used, seed)
                if used < 0:
                    flush(nd, ck, dirty, counts, order)
                    root, used, seed = rebuild(nd, ck, root, seed, flat, bstack)
                    root, used, seed = insert_at(nd, ck, root, d, carry, dirty, counts, order, used, seed)
                stacked += 1
            flush(nd, ck, dirty, counts, order)
            if CAP * nd[root, NN] > 4 * nd[root, SZ] + 16 * CAP:
                root, used, seed = rebuild(nd, ck, root, seed, flat, bstack)
            if seen and (records == 1 or (records == 2 and re[nr - 1] == d - 1)) and d + 1 < nd[root, SZ]:
                # the top alone moved (into depth d), or the top and the depth above d: a run may follow
                run_d = d
                run_m = old_top  # at least every key at depths 1..d-1 now
                run_c = carry
                top_v = find_at(nd, root, 0)[0]
                top_key = ck[top_v, 0]
                w_v, w_j = find_at(nd, root, d)
                run_v, run_j = find_at(nd, root, d + 1)
                moved = False
            elif seen and records == 2 and carry == inf and d + 1 < nd[root, SZ]:
                # the top and a dead key the records: a dead run may follow, from the next dead key on
                # (depth d's at the latest); the keys above it are at most the old top's and those passed
                a_v, a_j = find_at(nd, root, re[nr - 1] + 1)
                dr_a, a_v, a_j, dr_m = next_dead(
                    nd, ck, root, re[nr - 1] + 1, a_v, a_j, old_top, inf, DEAD_SPAN, dirty, counts, order
                )
                if dr_a >= 0:
                    dr_d = d
                    top_v = find_at(nd, root, 0)[0]
                    top_key = ck[top_v, 0]
                    dr_v, dr_j = find_at(nd, root, d + 1)
            maxd = _count(hist, out, want_out, t, dist, tok, maxd)
            taken[FEW_RECORDS] += 1
            continue
        if seen:
            remove_at(nd, ck, root, d, dirty)
        # each run's last record moves to where the next run starts (the last one to depth d)
        for i in range(nr - 1, -1, -1):
            if dirty[0, 1] > dirty.shape[0] - 2 * PATH:  # room for two more paths
                flush(nd, ck, dirty, counts, order)
            z = remove_at(nd, ck, root, re[i], dirty)
            if i == nr - 1:
                if not seen and z == inf:
                    stacked -= 1
                    continue  # a dead block carried to the bottom: drop it
                at = d - 1
            else:
                at = rs[i + 1] - 1
            root, used, seed = insert_at(nd, ck, root, at, z, dirty, counts, order, used, seed)
            if used < 0:
                flush(nd, ck, dirty, counts, order)
                root, used, seed = rebuild(nd, ck, root, seed, flat, bstack)
                root, used, seed = insert_at(nd, ck, root, at, z, dirty, counts, order, used, seed)
        if seen and rs[0] == 0 and re[nr - 1] == d - 1 and nr <= 2 and (nr == 1 or re[0] == 0) and d >= 2:
            # the top and one run of records down to the block: a shifted run may follow, from the
            # depth the old top went to; the keys above it are those now at 0..sh_k-2
            sh_k = 1 if nr == 1 else rs[1]
            flush(nd, ck, dirty, counts, order)
            sh_x = key_at(nd, ck, root, sh_k - 1)  # the old top's key
            sh_m = prefix_max(nd, ck, root, sh_k - 1)
            sh_y = nxt[t]
            sh_d = d
        root, used, seed = insert_at(nd, ck, root, 0, nxt[t], dirty, counts, order, used, seed)
        if used < 0:
            flush(nd, ck, dirty, counts, order)
            root, used, seed = rebuild(nd, ck, root, seed, flat, bstack)
            root, used, seed = insert_at(nd, ck, root, 0, nxt[t], dirty, counts, order, used, seed)
        flush(nd, ck, dirty, counts, order)
        if not seen:
            stacked += 1
        if CAP * nd[root, NN] > 4 * nd[root, SZ] + 16 * CAP:  # chunks a quarter full: repack
            root, used, seed = rebuild(nd, ck, root, seed, flat, bstack)
        maxd = _count(hist, out, want_out, t, dist, tok, maxd)
        taken[RECORD_RUNS] += 1
    return maxd
