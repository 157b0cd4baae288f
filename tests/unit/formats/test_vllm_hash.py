import json

import pytest

from kvset.formats.vllm_hash import block_digests, block_keys, none_hash
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "vllm_kv_events" / "vllm0330_tcp_capture.json"


@pytest.fixture(scope="module")
def capture():
    return json.loads(FIXTURE.read_text())


def test_none_hash_matches_vllm(capture):
    assert none_hash("sha256").hex() == capture["none_hash_sha256_hex"]


def test_token_ids_1000_to_1031_give_vllms_block_keys(capture):
    tokens = list(range(1000, 1032))
    assert [d.hex() for d in block_digests(tokens, 16)] == capture["prompt_a_block_hashes_full_hex"]
    assert block_keys(tokens, 16).tolist() == capture["prompt_a_block_hashes_external_int"]


def test_partial_last_block_is_not_hashed():
    assert len(block_keys(list(range(47)), 16)) == 2
    assert len(block_keys(list(range(15)), 16)) == 0


def test_chain_depends_on_prefix_and_algorithm():
    a = block_keys(list(range(32)), 16)
    b = block_keys([1] + list(range(1, 32)), 16)
    assert a[1] != b[1]  # second block identical tokens, different parent
    assert block_keys(list(range(32)), 16, algo="sha256_cbor").tolist() != a.tolist()
    assert block_keys(list(range(32)), 16, python_hash_seed="0").tolist() != a.tolist()
