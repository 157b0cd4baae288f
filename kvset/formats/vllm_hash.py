"""Block keys from token ids, exactly as vLLM's prefix cache hashes them.

Only full blocks are hashed. Block i's hash chains on its parent:
    h_i = H((h_{i-1} or NONE_HASH, tuple(tokens of block i), extra_keys or None))
with H = sha256 over pickle.dumps(obj, HIGHEST_PROTOCOL) (vLLM's default "sha256") or sha256
over canonical CBOR ("sha256_cbor"). NONE_HASH = H("vllm-none-hash"), or H(seed) when the
engine ran with PYTHONHASHSEED=seed. KV events carry int.from_bytes(digest[-8:], "big").

pickle is used only to *serialize* our own tuples (to reproduce vLLM's bytes); nothing is
ever unpickled.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from kvset.formats.names import HASH_ALGOS
from kvset.formats.sglang_hash import SGLANG_HASH_ALGO, page_keys
from kvset.units import DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO


def _pickled(obj: object) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _cbor(obj: object) -> bytes:
    import cbor2

    return cbor2.dumps(obj, canonical=True)


# vLLM's prefix_caching_hash_algo names -> how the object is serialized before sha256
_SERIALIZERS = {"sha256": _pickled, "sha256_cbor": _cbor}
# the names --hash-algo accepts: vLLM's, and "sglang" for SGLang's page hash (kvset.formats.sglang_hash)
assert (*_SERIALIZERS, SGLANG_HASH_ALGO) == HASH_ALGOS and DEFAULT_HASH_ALGO in HASH_ALGOS


def _serialize(obj: object, algo: str) -> bytes:
    serialize = _SERIALIZERS.get(algo)
    if serialize is None:
        raise ValueError(f"unknown hash algorithm {algo!r}; expected one of {', '.join(HASH_ALGOS)}")
    return serialize(obj)


def hash_object(obj: object, algo: str = DEFAULT_HASH_ALGO) -> bytes:
    return hashlib.sha256(_serialize(obj, algo)).digest()


@lru_cache(maxsize=16)
def none_hash(algo: str = DEFAULT_HASH_ALGO, python_hash_seed: str | None = None) -> bytes:
    """The root parent of every chain."""
    return hash_object("vllm-none-hash" if python_hash_seed is None else python_hash_seed, algo)


def digest_to_key(digest: bytes) -> int:
    """The 64-bit external form vLLM publishes in KV events."""
    return int.from_bytes(digest[-8:], "big")


def block_digests(
    token_ids: Sequence[int],
    block_size: int = DEFAULT_BLOCK_SIZE,
    algo: str = DEFAULT_HASH_ALGO,
    extra_keys: tuple | None = None,
    python_hash_seed: str | None = None,
    parent: bytes | None = None,
) -> list[bytes]:
    """Full-block digests of one prompt, in order (a trailing partial block is not hashed)."""
    if block_size <= 0:
        raise ValueError("block size must be positive")
    prev = parent if parent is not None else none_hash(algo, python_hash_seed)
    out: list[bytes] = []
    tokens = list(token_ids)
    for start in range(0, len(tokens) - block_size + 1, block_size):
        prev = hash_object((prev, tuple(tokens[start : start + block_size]), extra_keys), algo)
        out.append(prev)
    return out


def block_keys(
    token_ids: Sequence[int],
    block_size: int = DEFAULT_BLOCK_SIZE,
    algo: str = DEFAULT_HASH_ALGO,
    python_hash_seed: str | None = None,
) -> np.ndarray:
    """uint64 block keys of one prompt, identical to the hashes in vLLM's KV events (or in SGLang's, with
    algo "sglang", which has no hash seed)."""
    if algo == SGLANG_HASH_ALGO:
        return page_keys(token_ids, block_size)
    digests = block_digests(token_ids, block_size, algo, python_hash_seed=python_hash_seed)
    return np.fromiter((digest_to_key(d) for d in digests), dtype=np.uint64, count=len(digests))
