"""The sampled analyzer's rule for which blocks it keeps, at which rate (kvset.core.sampling).

A block is kept iff its priority h >> s_b is at most the limit L: h a seeded 64-bit mix of its key,
s_b the head boost of the access's position band b (band 0 for position 0, then one per doubling:
1, 2-3, 4-7, ...). The band's rate is min(1, R x 2^s_b), R = (L + 1) / 2^64. At R = 1 % the boosts
are HEAD_BOOSTS; at another rate they shift by K - 8, K = log2(HEAD_SHARE / R) rounded, so the
boosted rates stay about where they are (past band 7 they halve a band down to R).

The boost is only sound when a block keeps one position band: in a prefix cache a block's position
is fixed by its prefix (vLLM's block hashes, Mooncake's hash ids), so a block keeps one rate. When
keys are not prefix-chained (a generic cache trace, a stream cut into fixed-size requests) a block
with h between two bands' thresholds is seen at the boosted positions and missed at the others:
its re-accesses look farther apart than they are and the curve comes out low (points, on such a
10M-access trace), its first accesses too many. The blocks with h <= L (kept at every position)
show it: each of their re-accesses is seen, with the band of the access before. When, after at
least MIN_PLAIN_EVIDENCE of their re-accesses, more than MOVED_SHARE of them changed rate, the
positions are taken as not fixed and the sample falls back to plain spatial sampling (SHARDS' rule:
no boost, every band at R). Its bands then go by how often a block was accessed before (band_of of
the count of its cell in a sketch of 2^20 saturating counters: 0, 1, 2-3, 4-7, ...), so that a few
hot blocks in or out of the sample no longer swing the curve (post-stratification scales each band
to its exact access count, as it does position bands); what the position bands tallied before is
one band, BEFORE_PLAIN. Measured on benchmarks/sampling.py's traces: 0 % of them change rate on
prefix-chained keys, 2 % on the agentic workload (its documents sit anywhere in a request), 23-75 %
on keys cut into 16- to 1024-block requests.
"""

from __future__ import annotations

import math

import numpy as np

HEAD_SHARE = 2.56  # K = log2(HEAD_SHARE / R) rounded: 8 at R = 1 %, the rate HEAD_BOOSTS are for
HEAD_BOOSTS = (6, 6, 6, 4, 4, 3, 2, 1)  # log2 of the rate over R of position bands 0-7 at K = 8
BANDS = 13  # position bands 0..11 (positions below 2048), then the rest
FIXED_SIZE_HEAD = 8  # fixed size: the boost of rate 1 % (2^8 x 0.01 = HEAD_SHARE)
MAX_HASH = (1 << 64) - 1
# A sampled block weighs 1 / rate in the kernel's int64 fixed point (WEIGHT_ONE = 2^16): below this
# rate the weight would not fit (2^63 / 2^16 = 1.4e14), and no trace is large enough to sample so thinly.
MIN_RATE = 1e-12
# Falling back to plain sampling: re-accesses of blocks kept at every position, at least this many
# seen (at R = 1 % about the first 50k accesses: what the boosts got wrong before is a percent of a
# 10M-access trace) and more than this share of them at a position of another rate.
MIN_PLAIN_EVIDENCE = 500
MOVED_SHARE = 0.1
COUNT_BANDS = BANDS - 1  # plain sampling: bands by access count 0, 1, 2-3, ..., from 1024 on
BEFORE_PLAIN = BANDS - 1  # and the band of what was tallied while the heads were boosted
# log2 of the rate over R of count bands 0-11 at K = 8: blocks accessed 128 times before on boosted,
# 1024 times and more at 16 %. On the agentic workload's keys cut into 32-block requests (10M accesses,
# seeds 0-2) this table made 0.24 points of error looking at 6.6 % of the accesses; one band further
# (from 64 on, up to 32 %) 0.11 at 13 %; from 32 on, up to 64 %, 0.18 at 25 %.
COUNT_BOOSTS = (0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4)
SKETCH_CELLS = 1 << 20  # counters of the access-count sketch (uint16: 2 MiB)


def seed_salt(seed: int) -> np.uint64:
    """The 64-bit value mixed into every key for `seed` (splitmix64 of it, so seed 0 mixes too)."""
    x = (int(seed) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & MAX_HASH
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MAX_HASH
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MAX_HASH
    return np.uint64(x ^ (x >> 31))


def rate_limit(rate: float) -> int:
    """The largest priority kept at `rate`: keep iff priority <= limit, i.e. hash < rate x 2^64."""
    if not MIN_RATE <= rate <= 1.0:
        raise ValueError(f"sample rate must lie in [{MIN_RATE:g}, 1], got {rate!r}")
    return min(MAX_HASH, math.ceil(rate * 2.0**64) - 1)


def limit_rate(limit: int) -> float:
    return (limit + 1) / 2.0**64


def head_shifts(head: int) -> np.ndarray:
    """Band b's rate is 2^shift_b times the tail's: HEAD_BOOSTS moved by head - 8 (head = K), and
    past them halving a band, as they do, down to the tail's (at K = 8 they end there)."""
    return np.array(
        [max(0, HEAD_BOOSTS[b] + head - 8 if b < len(HEAD_BOOSTS) else head - b) for b in range(BANDS)],
        dtype=np.int64,
    )


def count_shifts(head: int) -> np.ndarray:
    """Without the head boost, bands by access count: COUNT_BOOSTS moved by head - 8, as head_shifts;
    never falling with the count, so a block once kept stays kept. BEFORE_PLAIN at the tail's rate."""
    shifts = [max(0, COUNT_BOOSTS[c] + head - 8) if COUNT_BOOSTS[c] else 0 for c in range(COUNT_BANDS)]
    return np.array([*shifts, 0], dtype=np.int64)


def head_for_rate(rate: float) -> int:
    """K at a fixed rate (see head_shifts)."""
    return max(0, min(BANDS - 1, round(math.log2(HEAD_SHARE / rate)))) if rate < 1 else 0


def band_rates(limit: int, shifts: np.ndarray) -> np.ndarray:
    """Sampling rate of each position band at `limit`."""
    rates: np.ndarray = np.minimum(1.0, limit_rate(limit) * np.exp2(shifts))
    return rates
