"""The sampled analyzer's filter: which accesses of a batch go to the tracked-block kernel.

A block is tracked iff its priority (h >> shift_b) is at most the limit, where h is a seeded 64-bit
mix of its key and shift_b the head boost of the access's position band b (kvset.core.sampling).
Every access is hashed and tested, so this pass is most of the sampled analyzer's cost per access:
it tests 64 accesses at a time into a bit mask (a loop without branches, which vectorizes), then
walks the mask's set bits, for a whole batch before the kernel handles any (gather_batch), checking
the timestamps on the way. Without the head boost (bands by access count, kvset.core.sampling_rates)
gather_counted does the same in one scalar pass that also counts every access in a sketch. The
search for a slot's end is here too.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from kvset.core import hash_table as HT
from kvset.core import intrinsics as IN
from kvset.core.kernel_types import Int
from kvset.core.sampling_rates import rate_limit, seed_salt

CHUNK = 64  # accesses tested into one mask word
SKETCH_SKIP_BITS = (
    3  # the access-count sketch's cell: hash bits above the random groups' (sampling_kernel.GROUPS)
)
PREFETCH_KEYS = (
    512  # keys are requested this far ahead: the hardware's prefetch fell behind (1.12 -> 0.85 ns)
)


@njit(inline="always")
def priority_hash(key: np.uint64, salt: np.uint64) -> np.uint64:
    """The seeded hash h of a key (uniform on 64 bits)."""
    return HT.mix(key ^ salt)


@njit(inline="always")
def band_of(pos: Int, last_band: Int) -> Int:
    """Position band: 0 for position 0, then one band per doubling (1, 2-3, 4-7, ...), capped.
    Without a branch: the count of leading zeros of 0 is 64."""
    b = 64 - np.int64(IN.ctlz(np.uint64(pos)))
    return b if b < last_band else last_band


@njit(inline="always")
def band_range(b: Int, nbands: Int, x: Int, stop: Int, base: Int, back: bool) -> tuple[Int, Int]:
    """The indices in [x, stop) of the accesses at positions in band b (empty: a >= e)."""
    lo = 0 if b == 0 else 1 << (b - 1)
    hi = 1 << b if b < nbands - 1 else 1 << 62
    if back:
        a, e = max(x, base - hi + 1), min(stop, base - lo + 1)
    else:
        a, e = max(x, base + lo), min(stop, base + hi)
    return a, max(a, e)


@njit(inline="always")
def count_position_bands(
    band_counts: np.ndarray, tokens: np.ndarray, per_access: bool, x: Int, stop: Int, base: Int, back: bool
) -> Int:
    """Add the accesses of [x, stop) (one request's, positions as band_range takes them) and their
    tokens to band_counts by position band; returns their tokens."""
    nbands = band_counts.shape[0]
    seg_tokens = 0  # summed here, added once: 26 additions to one counter waited on each other
    for b in range(nbands):
        a, e = band_range(b, nbands, x, stop, base, back)
        if per_access:
            t_sum = 0
            for z in range(a, e):
                t_sum += tokens[z]
        else:
            t_sum = (e - a) * tokens[0]
        band_counts[b, 0] += e - a
        band_counts[b, 1] += t_sum
        seg_tokens += t_sum
    return seg_tokens


@njit(inline="always")
def band_thresholds(limit: np.uint64, shifts: np.ndarray) -> np.ndarray:
    """Band b keeps the hashes h with (h >> shifts[b]) <= limit, i.e. h <= its threshold. A compare
    with a threshold vectorizes where numba's shift by a variable amount does not (0.7 against 1.2
    ns an access, measured)."""
    out = np.empty(shifts.shape[0], dtype=np.uint64)
    top = np.uint64(0xFFFFFFFFFFFFFFFF)
    for b in range(shifts.shape[0]):
        sh = np.uint64(shifts[b])
        if limit > (top >> sh):
            out[b] = top
        else:
            out[b] = (limit << sh) | ((np.uint64(1) << sh) - np.uint64(1))
    return out


@njit(inline="always")
def head_thresholds(thresholds: np.ndarray) -> np.ndarray:
    """The threshold of each of the first CHUNK positions, forward and backward: a request's first
    chunk spans bands 0-6, and a threshold loaded by position vectorizes where one looked up by band
    does not."""
    last = thresholds.shape[0] - 1
    head = np.empty(2 * CHUNK, dtype=np.uint64)
    for p in range(CHUNK):
        head[p] = thresholds[band_of(p, last)]
        head[2 * CHUNK - 1 - p] = head[p]
    return head


@njit(inline="always")
def request_base(
    r: Int, starts: np.ndarray, nstarts: Int, n: Int, reverse: bool, carry: Int
) -> tuple[bool, Int]:
    """(back, base) of request r: positions are x - base, or base - x when back (a reversed
    request, counted from its last access). r = -1: the batch continues the last request, whose
    first access was `carry` accesses before this batch."""
    if reverse and r >= 0:
        return True, (starts[r + 1] if r + 1 < nstarts else n) - 1
    if r >= 0:
        return False, starts[r]
    return False, -carry


@njit(nogil=True, cache=True)
def gather_batch(
    keys: np.ndarray,
    stamps: np.ndarray,
    check: bool,
    bound: float,
    starts: np.ndarray,
    reverse: bool,
    carry: Int,
    salt: np.uint64,
    thresholds: np.ndarray,
    found: np.ndarray,
    found_band: np.ndarray,
    found_key: np.ndarray,
) -> tuple[Int, bool, bool]:
    """The sampled accesses of a whole batch, in order: their indices, position bands and keys in
    found, found_band, found_key (as long as the batch); returns (how many, every timestamp within
    +-bound, the timestamps never decrease). The timestamps are checked (when `check`: one per
    access) in the same pass as the keys are hashed, which reads the batch once: the check alone
    was a third of the filter's time. Nothing is changed before the caller has the check's answer.
    Accesses before starts[0] continue the last request, `carry` accesses in."""
    head = head_thresholds(thresholds)
    n = keys.shape[0]
    nstarts = starts.shape[0]
    state = np.zeros(2, dtype=np.int64)  # timestamps out of bounds, timestamps below the one before
    if check and n:
        state[0] += not ((stamps[0] >= -bound) & (stamps[0] <= bound))
    m: Int = 0
    g: Int = 0
    r = -1
    while g < n:
        while r + 1 < nstarts and starts[r + 1] <= g:
            r += 1
        seg_end = starts[r + 1] if r + 1 < nstarts else n
        back, base = request_base(r, starts, nstarts, n, reverse, carry)
        m, g = gather_segment(
            keys,
            stamps,
            check,
            bound,
            state,
            g,
            seg_end,
            base,
            back,
            salt,
            thresholds,
            head,
            found,
            found_band,
            found_key,
            m,
        )
    return m, state[0] == 0, state[1] == 0


@njit(nogil=True, cache=True)
def gather_counted(
    keys: np.ndarray,
    stamps: np.ndarray,
    check: bool,
    bound: float,
    salt: np.uint64,
    thresholds: np.ndarray,
    sketch: np.ndarray,
    last_band: Int,
    access_band: np.ndarray,
    found: np.ndarray,
    found_band: np.ndarray,
    found_key: np.ndarray,
) -> tuple[Int, bool, bool]:
    """gather_batch for bands by access count (no head boost): an access's band is
    band_of(the accesses to its sketch cell so far, last_band), in access_band (as long as the batch).
    The sketch (one row of saturating counters, indexed by hash bits the filter and the random groups
    do not read) is counted here: the caller takes the batch back out with uncount if the timestamps
    are refused."""
    n = keys.shape[0]
    cells = np.uint64(sketch.shape[0] - 1)
    top = sketch.dtype.type(np.iinfo(sketch.dtype).max)
    bad = 0
    down = 0
    m: Int = 0
    for i in range(n):
        if check:
            v = stamps[i]
            bad += not ((v >= -bound) & (v <= bound))
            if i > 0:
                down += v < stamps[i - 1]
        h = priority_hash(keys[i], salt)
        cell = (h >> np.uint64(SKETCH_SKIP_BITS)) & cells
        c = sketch[cell]
        if c < top:
            sketch[cell] = c + 1
        b = band_of(np.int64(c), last_band)
        access_band[i] = b
        if h <= thresholds[b]:
            found[m] = i
            found_band[m] = b
            found_key[m] = keys[i]
            m += 1
    return m, bad == 0, down == 0


@njit(nogil=True, cache=True)
def uncount(keys: np.ndarray, salt: np.uint64, sketch: np.ndarray) -> None:
    """Take a batch gather_counted counted back out of the sketch (a saturated counter stays)."""
    cells = np.uint64(sketch.shape[0] - 1)
    top = sketch.dtype.type(np.iinfo(sketch.dtype).max)
    for i in range(keys.shape[0]):
        cell = (priority_hash(keys[i], salt) >> np.uint64(SKETCH_SKIP_BITS)) & cells
        if 0 < sketch[cell] < top:
            sketch[cell] -= 1


@njit(nogil=True, cache=True)
def refilter(
    found: np.ndarray,
    found_band: np.ndarray,
    found_key: np.ndarray,
    lo: Int,
    m: Int,
    salt: np.uint64,
    thresholds: np.ndarray,
) -> Int:
    """Keep, of found[lo:m], the accesses the (lowered) thresholds still sample; returns the new m."""
    j = lo
    for i in range(lo, m):
        if priority_hash(found_key[i], salt) <= thresholds[found_band[i]]:
            found[j], found_band[j], found_key[j] = found[i], found_band[i], found_key[i]
            j += 1
    return j


@njit(inline="always")
def gather_segment(
    keys: np.ndarray,
    stamps: np.ndarray,
    check: bool,
    bound: float,
    state: np.ndarray,
    a: Int,
    e: Int,
    base: Int,
    back: bool,
    salt: np.uint64,
    thresholds: np.ndarray,
    head: np.ndarray,
    found: np.ndarray,
    found_band: np.ndarray,
    found_key: np.ndarray,
    m: Int,
) -> tuple[Int, Int]:
    """Append the sampled accesses among keys[a:e] (one request's, at positions x - base, or base - x
    when back) to found, found_band and found_key from index m, in order, and check the timestamps
    of [a, e) when `check` (gather_batch). Chunks are aligned to positions (multiples of CHUNK), so
    that past the first one each lies in one band. Returns (m, e)."""
    last = thresholds.shape[0] - 1
    c = a
    while c < e:
        if back:  # positions fall as the index rises: end the chunk at a multiple of CHUNK
            w = min((base - c) % CHUNK + 1, e - c)
            p_lo, p_hi = base - (c + w - 1), base - c
        else:
            w = min(CHUNK - (c - base) % CHUNK, e - c)
            p_lo, p_hi = c - base, c + w - 1 - base
        b_lo, b_hi = band_of(p_lo, last), band_of(p_hi, last)
        # Loads are indexed by unsigned c + j: contiguous vector loads. A signed c + j (negative, for
        # all numba knows) compiles to gathers, 3x slower, and a slice keys[c : c + CHUNK] costs two
        # atomic reference-count updates, 8 % of the sampled analyzer's time (measured with perf).
        # A short chunk tests a whole CHUNK where the arrays allow it (a constant trip count), and
        # the bits past its end are cleared.
        full = c + CHUNK <= keys.shape[0]
        uc = np.uint64(c)
        if c + PREFETCH_KEYS + CHUNK <= keys.shape[0]:
            for q in range(0, CHUNK, 8):  # a cache line each
                IN.prefetch_read(keys, c + PREFETCH_KEYS + q)
                if check:
                    IN.prefetch_read(stamps, c + PREFETCH_KEYS + q)
        if check:
            if full and c > 0:
                # each against the one before it, a whole CHUNK without branches (it vectorizes):
                # past a short chunk's end they are the batch's next ones, checked twice, harmlessly
                ok = True
                ordered = True
                for j in range(CHUNK):
                    v = stamps[uc + np.uint64(j)]
                    ok &= (v >= -bound) & (v <= bound)
                    ordered &= v >= stamps[uc + np.uint64(j) - np.uint64(1)]
            else:
                ok = True
                ordered = True
                for z in range(max(c, 1), c + w):
                    ok &= (stamps[z] >= -bound) & (stamps[z] <= bound)
                    ordered &= stamps[z] >= stamps[z - 1]
            state[0] += not ok
            state[1] += not ordered
        bits = np.uint64(0)
        if b_lo == b_hi:  # one band (every chunk of a request past its first)
            top = thresholds[b_lo]
            if full:
                for j in range(CHUNK):
                    bits |= np.uint64(priority_hash(keys[uc + np.uint64(j)], salt) <= top) << np.uint64(j)
            else:
                for j in range(w):
                    bits |= np.uint64(priority_hash(keys[uc + np.uint64(j)], salt) <= top) << np.uint64(j)
        else:  # the first chunk: positions below CHUNK
            first = 2 * CHUNK - 1 - p_hi if back else p_lo
            uf = np.uint64(first)
            if full and first + CHUNK <= head.shape[0]:
                for j in range(CHUNK):
                    bits |= np.uint64(
                        priority_hash(keys[uc + np.uint64(j)], salt) <= head[uf + np.uint64(j)]
                    ) << np.uint64(j)
            else:
                for j in range(w):
                    bits |= np.uint64(
                        priority_hash(keys[uc + np.uint64(j)], salt) <= head[uf + np.uint64(j)]
                    ) << np.uint64(j)
        if w < CHUNK:
            bits &= (np.uint64(1) << np.uint64(w)) - np.uint64(1)
        while bits:
            low = bits & (~bits + np.uint64(1))
            y = c + 63 - np.int64(IN.ctlz(low))
            found[m] = y
            found_band[m] = band_of(base - y if back else y - base, last)
            found_key[m] = keys[y]
            m += 1
            bits ^= low
        c += w
    return m, c


@njit(nogil=True, cache=True)
def keep_mask(keys: np.ndarray, salt: np.uint64, limit: np.uint64, shift: Int) -> np.ndarray:
    """The filter alone: True where (hash >> shift) <= limit (SHARDS' rule with shift 0)."""
    out = np.empty(keys.shape[0], dtype=np.bool_)
    for i in range(keys.shape[0]):
        out[i] = (priority_hash(keys[i], salt) >> np.uint64(shift)) <= limit
    return out


@njit(inline="always")
def first_at_or_after(stamps: np.ndarray, x: Int, stop: Int, t_end: float) -> Int:
    """The first index in [x, stop) stamped at or after t_end, or stop (chunks without an early exit
    vectorize)."""
    i = x
    while i + 32 <= stop:
        hit = False
        for j in range(i, i + 32):
            hit |= stamps[j] >= t_end
        if hit:
            break
        i += 32
    for j in range(i, stop):
        if stamps[j] >= t_end:
            return j
    return stop


@njit(inline="always")
def first_at_or_after_sorted(stamps: np.ndarray, x: Int, stop: Int, t_end: float, guess: Int) -> Int:
    """The same for non-decreasing stamps, searched from a guess (3/4 of the last slot's length on
    from x): a linear scan forward or back from it reads a few lines the kernel reads next anyway,
    where a binary search sent a dozen dependent probes to memory not read yet (2 % of the
    sampled kernel's time)."""
    g = min(max(guess, x), stop)
    if g < stop and stamps[g] < t_end:
        return first_at_or_after(stamps, g, stop, t_end)
    while g - 32 >= x and stamps[g - 32] >= t_end:  # back 32 at a time: all of them are at or after
        g -= 32
    while g > x and stamps[g - 1] >= t_end:
        g -= 1
    return g


def sample_filter(keys: npt.ArrayLike, rate: float, seed: int = 0) -> np.ndarray:
    """SHARDS' filter: True for the keys kept at `rate` with `seed` (hash(key) < rate x 2^64).

    The same rule the sampled analyzer applies to blocks past the request heads."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    return keep_mask(keys, seed_salt(seed), np.uint64(rate_limit(rate)), 0)
