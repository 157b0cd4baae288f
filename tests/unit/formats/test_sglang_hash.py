"""SGLang's page hash, against the hashes SGLang 0.5.23's own radix cache published
(tests/fixtures/sglang_kv_events: each BlockStored carries its pages' token ids)."""

from __future__ import annotations

import hashlib
import struct

import msgspec
import numpy as np
import pytest

from kvset.engine.kv_events import hashes_to_keys
from kvset.formats.sglang_hash import SGLANG_HASH_ALGO, digest_to_event_hash, page_digests, page_keys
from kvset.formats.vllm_hash import HASH_ALGOS, block_keys
from tests.support.sglang_fixtures import messages


def test_page_digests_chained_from_the_parent_equal_every_hash_sglang_published():
    digest_of: dict[int, bytes] = {}  # event hash -> its page's digest, as the chains are followed
    checked = negative = roots = 0
    for _, frames in messages("coalesced"):
        for event in msgspec.msgpack.decode(frames[2])[1]:
            if event["type"] != "BlockStored":
                continue
            parent = event.get("parent_block_hash")
            if parent is not None and parent not in digest_of:
                continue  # chained onto a page stored before the recording began (none here)
            size, tokens = event["block_size"], event["token_ids"]
            digests = page_digests(tokens, size, None if parent is None else digest_of[parent])
            assert [digest_to_event_hash(d) for d in digests] == event["block_hashes"]
            digest_of.update(zip(event["block_hashes"], digests, strict=True))
            if parent is None:  # a chain from the root: what a token-id trace hashes
                roots += 1
                keys = page_keys(tokens, size).tolist()
                assert keys == hashes_to_keys(event["block_hashes"]).tolist()  # kvset's key of the wire hash
                assert block_keys(tokens, size, SGLANG_HASH_ALGO).tolist() == keys
            checked += len(digests)
            negative += sum(h < 0 for h in event["block_hashes"])
    assert roots >= 1 and checked >= 4000
    assert negative > 0  # SGLang's hashes are signed


def test_the_chain_by_hand():
    # sha256(previous digest + the page's ids as little-endian uint32), first 8 bytes big-endian
    tokens = [7, 300000, 2**32 - 1, 0, 5, 6, 7, 8, 9]
    first = hashlib.sha256(struct.pack("<4I", *tokens[:4])).digest()
    second = hashlib.sha256(first + struct.pack("<4I", *tokens[4:8])).digest()
    assert page_digests(tokens, 4) == [first, second]  # the partial last page is not hashed
    assert page_keys(tokens, 4).tolist() == [
        int.from_bytes(first[:8], "big"),
        int.from_bytes(second[:8], "big"),
    ]
    assert SGLANG_HASH_ALGO in HASH_ALGOS


def test_ids_outside_uint32_are_refused():
    with pytest.raises(ValueError):
        page_keys(np.array([1, 2**32]), 1)
    with pytest.raises(ValueError):
        page_keys([1, 2], 0)
