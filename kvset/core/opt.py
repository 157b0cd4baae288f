"""The optimal curve: Belady's MIN at every capacity, from one offline pass over a whole stream.

    h = opt_histogram(keys, tokens=tokens, request_starts=starts, order="reverse")
    c = h.curve()            # a HitRateCurve: hit_rate(), working_set() ... as for LRU

MIN (on a miss with a full cache, evict the block whose next use is farthest; the missed block
is always inserted) is a stack algorithm, so every access has an OPT stack distance d and MIN
with capacity C hits exactly the accesses with 1 <= d <= C; d = 0 is a first access. The
distances come from Mattson's priority stack (kvset.core.opt_kernel). It needs the future, so
it takes the whole stream at once: a trace file, not a live feed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvset.core.analyzer import Analyzer
from kvset.core.curve import HitRateCurve
from kvset.core.feed_args import ORDERS, Order, reverse_within_requests, tokens_array
from kvset.core.opt_kernel import allocate, next_uses, opt_kernel


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
) -> OptHistogram:
    """OPT stack distances of a whole access stream, in one pass.

    keys: uint64 block keys in access order; tokens: per access, or one number for all (default 1);
    request_starts, order: in `reverse` order each request's blocks are accessed last to first,
    as the analyzer does (Analyzer(order=...)); forward takes the stream as it is.
    Time about (1 + R) log S per access (R runs of records, S blocks on the stack: see
    opt_kernel); memory 8 bytes an access plus 100 to 150 bytes a distinct block.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
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
    state = allocate(distinct)
    out = np.empty(n if return_distances else 1, dtype=np.int64)
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
