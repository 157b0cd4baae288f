"""Whom live KV events are for: vLLM 0.33's and SGLang's principal fields, and each request's
principals off its stores (kvset.engine.kv_events.principal_fields, kvset.engine.kv_event_principals)."""

from __future__ import annotations

import msgspec
import numpy as np

from kvset.engine.kv_event_health import kv_event_health
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.engine.kv_events import decode_payload
from kvset.rejects import RejectCounter
from kvset.types import PAST_NAME_CAP, PRINCIPAL_LEVELS, PrincipalNames
from tests.support.kv_values import batch, message, stored
from tests.support.vllm_publisher import _BlockStored

LEVELS = {level: i for i, level in enumerate(PRINCIPAL_LEVELS)}


def vllm_store(hashes, parent=None, lora=None, extra=None, session=None) -> _BlockStored:
    """A BlockStored as vLLM 0.33 encodes it (its field list and order, omit_defaults)."""
    return _BlockStored(
        block_hashes=hashes,
        parent_block_hash=parent,
        token_ids=list(range(16 * len(hashes))),
        block_size=16,
        lora_id=None if lora is None else 1,
        medium="GPU",
        lora_name=lora,
        extra_keys=extra,
        group_idx=0,
        session_id=session,
    )


def decoded(events):
    rejects = RejectCounter()
    out = decode_payload(msgspec.msgpack.encode([1.0, events, 0]), rejects)
    assert out is not None
    return out, rejects


def test_vllm_salt_is_the_first_blocks_extra_key_after_the_lora_name() -> None:
    # vLLM's untagged extra keys: the LoRA name, (mm identifier, offset) pairs, the salt, embeds digests
    first = ["sql-lora", ["img-0", 0], "acme", b"\x01" * 32]
    got, rejects = decoded(
        [vllm_store([11, 12], lora="sql-lora", extra=[first, ["sql-lora"]], session="acme/chat-7")]
    )
    assert not rejects
    assert got.principals == (("acme", "acme/chat-7", "sql-lora"),)


def test_a_continuation_store_carries_no_salt_and_a_batch_that_names_nobody_carries_nothing() -> None:
    got, _ = decoded([vllm_store([13], parent=12, extra=[["acme"]], session="s")])
    assert got.principals == ((None, "s", None),)  # a salted entry past block 0 is not the salt
    assert batch([stored([1, 2])]).principals == ()


def test_sglang_names_the_salt_as_a_field_or_in_metadata() -> None:
    sglang = {**stored([5]), "cache_salt": "globex", "session_id": "g/1", "lora_name": "ad"}
    nested = {**stored([6]), "metadata": {"cache_salt": "initech"}}
    got, rejects = decoded([sglang, nested])
    assert not rejects
    assert got.principals == (("globex", "g/1", "ad"), ("initech", None, None))


def test_the_tagged_array_layout_has_session_id_in_vllms_declaration_order() -> None:
    fields = msgspec.to_builtins(vllm_store([7], session="s-9"))
    order = [name for name in _BlockStored.__struct_fields__]
    array = ["BlockStored", *[fields.get(name) for name in order[: order.index("session_id") + 1]]]
    got, rejects = decoded([array])
    assert not rejects
    assert got.principals == ((None, "s-9", None),)


def test_a_principal_field_of_the_wrong_type_rejects_its_event_and_counts_it() -> None:
    got, rejects = decoded([{**stored([8]), "session_id": 42}, stored([9])])
    assert len(got) == 1
    assert rejects.total == 1 and "session_id is not a string" in rejects.describe()


def feed(t: KvEventTracker, seq: int, *events, ts: float = 1.0) -> None:
    t.published(0, message(seq, [msgspec.to_builtins(e) for e in events], ts), now=0.0, at=100.0)


def names_of(accesses, level: str) -> list[str]:
    names = accesses.principal_names
    return [names.name(int(p)) for p in accesses.principals[:, LEVELS[level]]]


def test_each_request_is_named_by_its_stores_and_a_continuation_inherits_the_tenant() -> None:
    t = KvEventTracker(["tcp://127.0.0.1:5557"], [None], RejectCounter())
    feed(t, 0, vllm_store([1, 2], extra=[["acme"], None], session="acme/1"))
    feed(t, 1, vllm_store([3], parent=2, session="acme/1"), vllm_store([20], session="x/9"))
    feed(t, 2, vllm_store([30, 31]))  # a request that says nothing: unknown, not dropped
    accesses = t.take(at=102.0).accesses
    assert accesses is not None
    by_key = dict(zip(accesses.keys.tolist(), range(len(accesses)), strict=True))
    tenant, session = names_of(accesses, "tenant"), names_of(accesses, "session")
    assert [tenant[by_key[k]] for k in (1, 2, 3)] == ["acme"] * 3
    assert [session[by_key[k]] for k in (1, 2, 3)] == ["acme/1"] * 3
    assert (tenant[by_key[20]], session[by_key[20]]) == ("(unknown)", "x/9")
    assert {tenant[by_key[k]] for k in (30, 31)} == {"(unknown)"}
    assert np.all(accesses.principals[:, LEVELS["adapter"]] == 0)
    assert dict(kv_event_health(t, at=102.0).details)["principals"] == "3 names off the events"


def test_a_stream_that_names_nobody_keeps_no_principals() -> None:
    t = KvEventTracker(["tcp://127.0.0.1:5557"], [None], RejectCounter())
    feed(t, 0, vllm_store([1, 2]))
    accesses = t.take(at=102.0).accesses
    assert accesses is not None and accesses.principals is None and not t.principals.active
    assert "principals" not in dict(kv_event_health(t, at=102.0).details)


def test_names_past_the_cap_are_counted_together_and_said_in_the_health() -> None:
    t = KvEventTracker(["tcp://127.0.0.1:5557"], [None], RejectCounter())
    t.principals.names = PrincipalNames(cap=2)
    feed(t, 0, *(vllm_store([k], session=f"s{k}") for k in (1, 2, 3, 4)))
    accesses = t.take(at=102.0).accesses
    assert accesses is not None
    session = dict(zip(accesses.keys.tolist(), names_of(accesses, "session"), strict=True))
    assert session == {1: "s1", 2: "s2", 3: PAST_NAME_CAP, 4: PAST_NAME_CAP}
    said = dict(kv_event_health(t, at=102.0).details)["principals"]
    assert said == "2 names off the events; the table is full (2 names): 2 lookups of names past it, " + (
        f"counted together as {PAST_NAME_CAP}"
    )
