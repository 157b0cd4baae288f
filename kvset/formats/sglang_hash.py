"""Page keys from token ids, as SGLang's radix cache names its pages in its KV events.

SGLang (0.5.23, mem_cache/utils.py and its native page hash) chains SHA-256 over pages:
    d_i = sha256(d_{i-1} + tokens of page i, each a little-endian uint32)
with no prefix for the first page of a chain. The event's block hash is the digest's first 8
bytes read big-endian as a *signed* 64-bit integer; kvset keeps the same 64 bits unsigned (the
two's complement kvset.engine.kv_events applies to signed hashes), so a trace hashed here and the
engine's events name a page with one key. Only full pages are hashed: the radix cache keeps a
page-aligned key. Requests with an extra_key (LoRA) or a cache_salt are hashed in a namespace of
their own by SGLang; that is not reproduced here (plain token ids carry neither).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

SGLANG_HASH_ALGO = "sglang"  # the --hash-algo name
_MAX_TOKEN = (1 << 32) - 1  # SGLang's page hash packs ids as uint32 (wider ones take another path)


def page_digests(token_ids: Sequence[int], page_size: int, parent: bytes | None = None) -> list[bytes]:
    """Full-page SHA-256 digests of one prompt, chained from `parent` (None: a new chain)."""
    if page_size <= 0:
        raise ValueError("page size must be positive")
    tokens = np.asarray(token_ids, dtype=np.int64)
    if len(tokens) and (tokens.min() < 0 or tokens.max() > _MAX_TOKEN):
        raise ValueError("token id outside 0..2**32-1")
    packed = tokens.astype("<u4").tobytes()
    width = 4 * page_size
    prev = parent
    out: list[bytes] = []
    for start in range(0, len(tokens) // page_size * width, width):
        h = hashlib.sha256()
        if prev is not None:
            h.update(prev)
        h.update(packed[start : start + width])
        prev = h.digest()
        out.append(prev)
    return out


def digest_to_key(digest: bytes) -> int:
    """The unsigned 64-bit key of a page: the bits of SGLang's signed event hash."""
    return int.from_bytes(digest[:8], "big")


def digest_to_event_hash(digest: bytes) -> int:
    """The signed 64-bit integer SGLang publishes for a page."""
    return int.from_bytes(digest[:8], "big", signed=True)


def page_keys(token_ids: Sequence[int], page_size: int) -> np.ndarray:
    """uint64 page keys of one prompt, equal (as 64 bits) to the hashes in SGLang's KV events."""
    digests = page_digests(token_ids, page_size)
    return np.fromiter((digest_to_key(d) for d in digests), dtype=np.uint64, count=len(digests))
