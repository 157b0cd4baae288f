"""The optimal curve: Belady's MIN at every capacity, from one offline pass over a whole stream.

    h = opt_histogram(keys, tokens=tokens, request_starts=starts, order="reverse")
    c = h.curve()            # a HitRateCurve: hit_rate(), working_set() ... as for LRU

MIN (on a miss with a full cache, evict the block whose next use is farthest; the missed block
is always inserted) is a stack algorithm, so every access has an OPT stack distance d and MIN
with capacity C hits exactly the accesses with 1 <= d <= C; d = 0 is a first access. The
distances come from Mattson's priority stack (kvset.core.opt_kernel), which needs the future,
or from the stack of critical times (kvset.core.opt_critical), which needs only the past; each
is faster on other traces, and both take the whole stream at once here: a trace file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from kvset.core import opt_critical
from kvset.core.analyzer import Analyzer
from kvset.core.curve import HitRateCurve
from kvset.core.feed_args import ORDERS, Order, reverse_within_requests, tokens_array
from kvset.core.opt_kernel import allocate, next_uses, opt_kernel

Method = Literal["auto", "priority", "critical"]
METHODS: tuple[Method, ...] = ("auto", "priority", "critical")
# At this share of chained re-uses and above, the priority stack's runs beat the critical stack
# (prefix-chained traces: 99.9 %, one store an access); below it the critical stack is faster
# (the agentic trace, 98.4 %; Zipf and uniform keys, near 0): the README's table of the two.
CHAINED = 0.99


@dataclass(frozen=True, eq=False)
class OptHistogram:
    """OPT stack distances of one access stream, counted.

    blocks[d], tokens[d]: accesses (and the tokens they cover) at distance d, d = 0 the first
    accesses; distances: one per access in the order given (when asked for), else None.
    """

    blocks: np.ndarray
    tokens: np.ndarray
    accesses: int
    total_tokens: int
    distinct_blocks: int
    distances: np.ndarray | None = None

    @property
    def first_time(self) -> int:
        return int(self.blocks[0]) if len(self.blocks) else 0

    def max_distance(self) -> int:
        return len(self.blocks) - 1

    def curve(self) -> HitRateCurve:
        """MIN's hits at every capacity 1 .. the largest distance: exact everywhere, no horizon.

        A cache as large as the number of distinct blocks never evicts, so that is the horizon.
        """
        top = self.max_distance()
        return HitRateCurve(
            capacities=np.arange(1, top + 1, dtype=np.int64),
            block_hits=np.cumsum(self.blocks[1 : top + 1]),
            token_hits=np.cumsum(self.tokens[1 : top + 1]),
            accesses=self.accesses,
            tokens=self.total_tokens,
            horizon=max(1, self.distinct_blocks),
            exact=True,
        )


def opt_histogram(
    keys: npt.ArrayLike,
    tokens: npt.ArrayLike | None = None,
    *,
    request_starts: npt.ArrayLike | None = None,
    order: Order = "forward",
    return_distances: bool = False,
    method: Method = "auto",
) -> OptHistogram:
    """OPT stack distances of a whole access stream, in one pass.

    keys: uint64 block keys in access order; tokens: per access, or one number for all (default 1);
    request_starts, order: in `reverse` order each request's blocks are accessed last to first,
    as the analyzer does (Analyzer(order=...)); forward takes the stream as it is.
    method: "priority", Mattson's priority stack of next uses (kvset.core.opt_kernel): time about
    (1 + R) log S per access (R runs of records, S blocks on the stack), memory 8 bytes an access
    plus 100 to 150 bytes a distinct block; "critical", the stack of critical times
    (kvset.core.opt_critical): time the depths its walk does not skip, memory 8 bytes an access and
    8 a distinct block; "auto" takes the priority stack where most re-uses are chained (CHAINED).
    Both give the same distances.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    n = len(keys)
    tok = tokens_array(tokens, n, 1)
    starts = Analyzer._request_starts(request_starts, n)
    perm = None
    if order == "reverse" and len(starts):
        perm = reverse_within_requests(starts, n)
        keys = keys[perm]
        if tok.shape[0] == n:
            tok = tok[perm]
    nxt, distinct = next_uses(keys)
    out = np.empty(n if return_distances else 1, dtype=np.int64)
    if method == "critical" or (method == "auto" and opt_critical.chained_share(nxt) < CHAINED):
        opt_critical.to_previous_uses(nxt)  # in place: the critical stack needs only the past
        hist = np.zeros((distinct + 2, 2), np.int64)
        top = opt_critical.critical_kernel(nxt, tok, out, hist, *opt_critical.allocate(distinct, n))
    else:
        state = allocate(distinct)
        top = opt_kernel(nxt, tok, out, *state)
        if top < 0:
            raise RuntimeError("OPT kernel: the stack lost count of its blocks (a bug in kvset)")
        hist = state.hist
    distances = None
    if return_distances:
        distances = out
        if perm is not None:
            distances = np.empty_like(out)
            distances[perm] = out
    total = int(tok.sum()) if tok.shape[0] == n else int(tok[0]) * n
    return OptHistogram(
        blocks=hist[: top + 1, 0].copy(),
        tokens=hist[: top + 1, 1].copy(),
        accesses=n,
        total_tokens=total,
        distinct_blocks=int(distinct),
        distances=distances,
    )
