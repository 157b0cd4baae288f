"""The rope behind the optimal curve's priority stack: next-use times in a treap of chunks.

A treap of chunks of up to CAP keys; each node knows, for its subtree, the number of
keys and of nodes, the largest and smallest key and whether the keys strictly ascend (with the
first and last key, to join subtrees). Positional edits keep sizes exact on the way down and
leave every other field to flush(), which recomputes the nodes the edits passed, once per access,
deepest first. A full chunk splits; when the pool of nodes runs out or the chunks average a
quarter full, rebuild() repacks them. All state is in int64 arrays (nd: one row of fields per
node, row 0 the empty tree; ck: the chunks) allocated by kvset.core.opt_kernel.allocate(); nothing here allocates, so
it compiles without reference counting. The stack algorithm on top of it is kvset.core.opt_kernel.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvset.core.kernel_types import Int, Jit

CAP = 64  # keys per chunk; a full chunk splits in two halves

# node fields (one int64 row per node; row 0 is the empty tree)
LT = 0
RT = 1
NN = 2  # nodes in the subtree
SZ = 3  # keys in the subtree
MX = 4  # largest key in the subtree
MN = 5  # smallest key
ASC = 6  # 1 if the subtree's keys strictly ascend
FK = 7  # first key
LK = 8  # last key
CNT = 9  # keys in this node's chunk
CMX = 10
CMN = 11
CBRK = 12  # adjacent pairs in the chunk that do not ascend
PR = 13  # treap priority
DIRTY = 14  # the flush tag that last marked the node for recomputation
FIELDS = 15

BIG = np.int64(1) << 62

# The stack kernel allocates nothing, so it runs without numba's reference counting: with it, every
# array handed to a helper costs atomic increments and decrements, which took 40 % of the time.
plain: Jit = njit(_nrt=False)  # type: ignore[call-overload]  # _nrt is private: not in numba's stubs
inline_plain: Jit = njit(_nrt=False, inline="always")  # type: ignore[call-overload]  # the same
PATH = 512  # deepest treap path the work arrays allow (a random treap of 10^7 chunks is ~70 deep)


@inline_plain
def _xorshift(s: np.uint64) -> np.uint64:
    s ^= (s << np.uint64(13)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    s ^= s >> np.uint64(7)
    s ^= (s << np.uint64(17)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    return s


# refresh_chunk and locate are compiled once and called, not inlined into every edit: a call costs
# nothing beside the loop or the descent it makes, and each inlined copy adds to the compile time.
@plain
def refresh_chunk(nd: np.ndarray, ck: np.ndarray, v: Int) -> None:
    c = nd[v, CNT]
    mx = np.int64(-1)
    mn = BIG
    brk = 0
    for j in range(c):
        k = ck[v, j]
        if k > mx:
            mx = k
        if k < mn:
            mn = k
        if j > 0 and k <= ck[v, j - 1]:
            brk += 1
    nd[v, CMX] = mx
    nd[v, CMN] = mn
    nd[v, CBRK] = brk


@inline_plain
def pull(nd: np.ndarray, ck: np.ndarray, v: Int) -> None:
    """Recompute v's subtree fields from its children and its chunk (row 0 is the empty tree)."""
    a = nd[v, LT]
    b = nd[v, RT]
    s = nd[a, SZ]
    mx = nd[a, MX]
    mn = nd[a, MN]
    asc = nd[a, ASC]
    fk = nd[a, FK]
    lk = nd[a, LK]
    c = nd[v, CNT]
    if c > 0:
        cf = ck[v, 0]
        casc = 1 if nd[v, CBRK] == 0 else 0
        if s == 0:
            asc = casc
            fk = cf
        elif asc == 1 and (casc == 0 or lk >= cf):
            asc = 0
        lk = ck[v, c - 1]
        s += c
        if nd[v, CMX] > mx:
            mx = nd[v, CMX]
        if nd[v, CMN] < mn:
            mn = nd[v, CMN]
    if nd[b, SZ] > 0:
        if s == 0:
            asc = nd[b, ASC]
            fk = nd[b, FK]
        elif asc == 1 and (nd[b, ASC] == 0 or lk >= nd[b, FK]):
            asc = 0
        lk = nd[b, LK]
        s += nd[b, SZ]
        if nd[b, MX] > mx:
            mx = nd[b, MX]
        if nd[b, MN] < mn:
            mn = nd[b, MN]
    nd[v, SZ] = s
    nd[v, MX] = mx
    nd[v, MN] = mn
    nd[v, ASC] = asc
    nd[v, FK] = fk
    nd[v, LK] = lk
    nd[v, NN] = nd[a, NN] + 1 + nd[b, NN]


@plain
def _merge(nd: np.ndarray, ck: np.ndarray, a: Int, b: Int) -> Int:
    if a == 0:
        return b
    if b == 0:
        return a
    if nd[a, PR] > nd[b, PR]:
        nd[a, RT] = _merge(nd, ck, nd[a, RT], b)
        pull(nd, ck, a)
        return a
    nd[b, LT] = _merge(nd, ck, a, nd[b, LT])
    pull(nd, ck, b)
    return b


@plain
def _split(nd: np.ndarray, ck: np.ndarray, v: Int, m: Int) -> tuple[Int, Int]:
    """(first m nodes in order, the rest)."""
    if v == 0:
        return 0, 0
    left = nd[v, LT]
    if nd[left, NN] >= m:
        a, b = _split(nd, ck, left, m)
        nd[v, LT] = b
        pull(nd, ck, v)
        return a, v
    a, b = _split(nd, ck, nd[v, RT], m - nd[left, NN] - 1)
    nd[v, RT] = a
    pull(nd, ck, v)
    return v, b


@plain
def _pull_all(nd: np.ndarray, ck: np.ndarray, v: Int) -> None:
    if v == 0:
        return
    _pull_all(nd, ck, nd[v, LT])
    _pull_all(nd, ck, nd[v, RT])
    pull(nd, ck, v)


@plain
def rebuild(
    nd: np.ndarray, ck: np.ndarray, root: Int, seed: np.uint64, flat: np.ndarray, stack: np.ndarray
) -> tuple[Int, Int, np.uint64]:
    """Repack every key, in order, into half-full chunks under a fresh treap. Returns (root, used, seed)."""
    total = nd[root, SZ]
    k = 0
    top = 0
    v = root
    while top > 0 or v != 0:  # in-order walk of the chunks
        while v != 0:
            stack[top] = v
            top += 1
            v = nd[v, LT]
        top -= 1
        v = stack[top]
        c = nd[v, CNT]
        for j in range(c):
            flat[k + j] = ck[v, j]
        k += c
        v = nd[v, RT]
    for v in range(nd.shape[0]):
        for f in range(FIELDS):
            nd[v, f] = 0
    nd[0, MX] = -1
    nd[0, MN] = BIG
    nd[0, ASC] = 1
    half = CAP // 2
    used = 1
    top = 0
    for start in range(0, total, half):
        v = used
        used += 1
        c = min(half, total - start)
        for j in range(c):
            ck[v, j] = flat[start + j]
        nd[v, CNT] = c
        refresh_chunk(nd, ck, v)
        seed = _xorshift(seed)
        nd[v, PR] = np.int64(seed >> np.uint64(1))
        last = 0
        while top > 0 and nd[stack[top - 1], PR] < nd[v, PR]:
            top -= 1
            last = stack[top]
        nd[v, LT] = last
        if top > 0:
            nd[stack[top - 1], RT] = v
        stack[top] = v
        top += 1
    root = stack[0] if top > 0 else 0
    _pull_all(nd, ck, root)
    return root, used, seed


@plain
def locate(
    nd: np.ndarray, root: Int, pos: Int, insert: bool, delta: Int, dirty: np.ndarray
) -> tuple[Int, Int, Int]:
    """Descend to the chunk holding position pos (insert: pos may be one past a chunk's end).

    Sizes on the way change by delta at once (later searches need them); every other field of
    the nodes passed is left for flush, which dirty collects them for. Returns (node, offset,
    node rank).
    """
    v = root
    depth = 0
    rank = 0
    tag = dirty[0, 0]
    while True:
        nd[v, SZ] += delta
        if nd[v, DIRTY] != tag:
            nd[v, DIRTY] = tag
            k = dirty[0, 1] + 1
            dirty[0, 1] = k
            dirty[k, 0] = v
            dirty[k, 1] = depth
        depth += 1
        left = nd[v, LT]
        ls = nd[left, SZ]
        if pos < ls:
            v = left
            continue
        pos -= ls
        if pos < nd[v, CNT] or (insert and pos == nd[v, CNT]):
            return v, pos, rank + nd[left, NN]
        pos -= nd[v, CNT]
        rank += nd[left, NN] + 1
        v = nd[v, RT]


@plain
def flush(nd: np.ndarray, ck: np.ndarray, dirty: np.ndarray, counts: np.ndarray, order: np.ndarray) -> None:
    """Recompute the nodes edits passed through, deepest first, so children are done before parents."""
    k = dirty[0, 1]
    if k == 0:
        return
    # counting sort by depth, deepest first
    top = 0
    for i in range(1, k + 1):
        dep = dirty[i, 1]
        counts[dep] += 1
        if dep > top:
            top = dep
    at = 0
    for dep in range(top, -1, -1):
        c = counts[dep]
        counts[dep] = at
        at += c
    for i in range(1, k + 1):
        dep = dirty[i, 1]
        order[counts[dep]] = dirty[i, 0]
        counts[dep] += 1
    for i in range(k):
        pull(nd, ck, order[i])
    for dep in range(top + 1):
        counts[dep] = 0
    dirty[0, 0] += 1  # a new tag: no node is marked any more
    dirty[0, 1] = 0


@plain
def remove_at(nd: np.ndarray, ck: np.ndarray, root: Int, pos: Int, dirty: np.ndarray) -> Int:
    """Remove and return the key at position pos."""
    v, j, rank = locate(nd, root, pos, False, -1, dirty)
    c = nd[v, CNT]
    k: Int = ck[v, j]
    if 0 < j < c - 1:
        if ck[v, j] <= ck[v, j - 1]:
            nd[v, CBRK] -= 1
        if ck[v, j + 1] <= ck[v, j]:
            nd[v, CBRK] -= 1
        if ck[v, j + 1] <= ck[v, j - 1]:
            nd[v, CBRK] += 1
    elif j > 0:
        if ck[v, j] <= ck[v, j - 1]:
            nd[v, CBRK] -= 1
    elif c > 1 and ck[v, 1] <= ck[v, 0]:
        nd[v, CBRK] -= 1
    for i in range(j, c - 1):
        ck[v, i] = ck[v, i + 1]
    nd[v, CNT] = c - 1
    if k == nd[v, CMX] or k == nd[v, CMN]:
        refresh_chunk(nd, ck, v)
    return k


@plain
def replace_at(nd: np.ndarray, ck: np.ndarray, root: Int, pos: Int, key: Int, dirty: np.ndarray) -> Int:
    """Overwrite the key at position pos (the tree's shape stays); returns the key it held."""
    v, j, rank = locate(nd, root, pos, False, 0, dirty)
    c = nd[v, CNT]
    old: Int = ck[v, j]
    if j > 0:
        nd[v, CBRK] += (1 if key <= ck[v, j - 1] else 0) - (1 if old <= ck[v, j - 1] else 0)
    if j < c - 1:
        nd[v, CBRK] += (1 if ck[v, j + 1] <= key else 0) - (1 if ck[v, j + 1] <= old else 0)
    ck[v, j] = key
    if old == nd[v, CMX] or old == nd[v, CMN]:
        refresh_chunk(nd, ck, v)
    else:
        if key > nd[v, CMX]:
            nd[v, CMX] = key
        if key < nd[v, CMN]:
            nd[v, CMN] = key
    return old


@plain
def insert_at(
    nd: np.ndarray,
    ck: np.ndarray,
    root: Int,
    pos: Int,
    key: Int,
    dirty: np.ndarray,
    counts: np.ndarray,
    order: np.ndarray,
    used: Int,
    seed: np.uint64,
) -> tuple[Int, Int, np.uint64]:
    """Insert key at position pos. Returns (root, nodes used, seed); used < 0 asks for a rebuild."""
    if used >= nd.shape[0] - 1:
        v, j, rank = locate(nd, root, pos, True, 0, dirty)
        if nd[v, CNT] == CAP:
            return root, -1, seed
    v, j, rank = locate(nd, root, pos, True, 1, dirty)
    c = nd[v, CNT]
    if c < CAP:
        if c > 0:
            if 0 < j < c and ck[v, j] <= ck[v, j - 1]:
                nd[v, CBRK] -= 1
            if j > 0 and key <= ck[v, j - 1]:
                nd[v, CBRK] += 1
            if j < c and ck[v, j] <= key:
                nd[v, CBRK] += 1
        for i in range(c, j, -1):
            ck[v, i] = ck[v, i - 1]
        ck[v, j] = key
        nd[v, CNT] = c + 1
        if c == 0 or key > nd[v, CMX]:
            nd[v, CMX] = key
        if c == 0 or key < nd[v, CMN]:
            nd[v, CMN] = key
        return root, used, seed
    # split the full chunk: u takes the upper half and goes right after v
    u = used
    used += 1
    half = CAP // 2
    for i in range(half, CAP):
        ck[u, i - half] = ck[v, i]
    nd[u, CNT] = CAP - half
    nd[v, CNT] = half
    if j <= half:
        w, o = v, j
    else:
        w, o = u, j - half
    cw = nd[w, CNT]
    for i in range(cw, o, -1):
        ck[w, i] = ck[w, i - 1]
    ck[w, o] = key
    nd[w, CNT] = cw + 1
    refresh_chunk(nd, ck, v)
    refresh_chunk(nd, ck, u)
    nd[u, LT] = 0
    nd[u, RT] = 0
    nd[u, DIRTY] = 0
    seed = _xorshift(seed)
    nd[u, PR] = np.int64(seed >> np.uint64(1))
    pull(nd, ck, u)
    flush(nd, ck, dirty, counts, order)
    a, b = _split(nd, ck, root, rank + 1)
    root = _merge(nd, ck, _merge(nd, ck, a, u), b)
    return root, used, seed


@plain
def argmin(nd: np.ndarray, ck: np.ndarray, root: Int, target: Int) -> Int:
    """Position of the (unique) key equal to the smallest key, target; -1 if there is none."""
    v = root
    pos: Int = 0
    while v != 0:
        left = nd[v, LT]
        if nd[left, SZ] > 0 and nd[left, MN] == target:
            v = left
            continue
        pos += nd[left, SZ]
        if nd[v, CNT] > 0 and nd[v, CMN] == target:
            for j in range(nd[v, CNT]):
                if ck[v, j] == target:
                    return pos + j
        pos += nd[v, CNT]
        v = nd[v, RT]
    return -1  # not there: the stack is inconsistent


@plain
def record_runs(
    nd: np.ndarray,
    ck: np.ndarray,
    root: Int,
    d: Int,
    rs: np.ndarray,
    re: np.ndarray,
    stack: np.ndarray,
    phase: np.ndarray,
) -> Int:
    """The runs of consecutive record depths among 0..d-1 into rs/re; returns their number.

    A depth is a record when its key exceeds every key above it. Whole subtrees are skipped when
    they hold no record (largest key not above the running maximum) or are all records
    (ascending and starting above it).
    """
    nr = 0
    cur = np.int64(-1)
    in_run = False
    pos = 0
    top = 0
    stack[0] = root
    phase[0] = 0
    top = 1
    while top > 0 and pos < d:
        v = stack[top - 1]
        ph = phase[top - 1]
        if ph == 0:
            s = nd[v, SZ]
            if s == 0:
                top -= 1
                continue
            if pos + s <= d:
                if nd[v, MX] <= cur:
                    if in_run:
                        re[nr - 1] = pos - 1
                        in_run = False
                    pos += s
                    top -= 1
                    continue
                if nd[v, ASC] == 1 and nd[v, FK] > cur:
                    if not in_run:
                        rs[nr] = pos
                        nr += 1
                        in_run = True
                    cur = nd[v, LK]
                    pos += s
                    top -= 1
                    continue
            phase[top - 1] = 1
            stack[top] = nd[v, LT]
            phase[top] = 0
            top += 1
        elif ph == 1:
            c = nd[v, CNT]
            if c > 0:
                if pos + c <= d and nd[v, CMX] <= cur:
                    if in_run:
                        re[nr - 1] = pos - 1
                        in_run = False
                    pos += c
                elif pos + c <= d and nd[v, CBRK] == 0 and ck[v, 0] > cur:
                    if not in_run:
                        rs[nr] = pos
                        nr += 1
                        in_run = True
                    cur = ck[v, c - 1]
                    pos += c
                else:
                    for j in range(c):
                        if pos >= d:
                            break
                        k = ck[v, j]
                        if k > cur:
                            if not in_run:
                                rs[nr] = pos
                                nr += 1
                                in_run = True
                            cur = k
                        elif in_run:
                            re[nr - 1] = pos - 1
                            in_run = False
                        pos += 1
            phase[top - 1] = 2
            stack[top] = nd[v, RT]
            phase[top] = 0
            top += 1
        else:
            top -= 1
    if in_run:
        re[nr - 1] = d - 1
    return nr
