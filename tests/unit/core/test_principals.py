"""Per-principal curves (kvset.core.principals) == a naive LRU at every capacity.

The reference here is its own: one OrderedDict LRU replay per capacity of the whole stream, counting
each access's hit for the principal that made it (the shared-cache curve), and one replay per
principal of its accesses alone (the isolated curve).
"""

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.core.principals import PrincipalCollector
from kvset.offline import InputSummary, analyze_batches
from kvset.types import (
    OTHER_PRINCIPALS,
    PAST_NAME_CAP,
    PRINCIPAL_LEVELS,
    UNKNOWN_PRINCIPAL,
    AccessBatch,
    PrincipalNames,
)
from kvset.units import StreamUnits

UNITS = StreamUnits(16, "flag")


def naive_hits_by_owner(keys, tokens, owners, capacity):
    """{owner: (block hits, token hits)} of one shared LRU cache of `capacity` blocks."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits: dict[object, list[int]] = {}
    for key, tok, owner in zip(keys, tokens, owners, strict=True):
        h = hits.setdefault(owner, [0, 0])
        if key in cache:
            cache.move_to_end(key)
            h[0] += 1
            h[1] += tok
        else:
            if len(cache) >= capacity:
                cache.popitem(last=False)
            cache[key] = None
    return {o: tuple(v) for o, v in hits.items()}


@st.composite
def streams(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_requests = draw(st.integers(1, 40))
    n_tenants = draw(st.integers(1, 6))
    alphabet = draw(st.sampled_from([3, 8, 25, 80]))
    requests = []
    for _ in range(n_requests):
        tenant = int(rng.integers(0, n_tenants + 1))  # 0: the line names no tenant
        length = int(rng.integers(1, 8))
        shared = rng.random() < 0.5  # a shared prefix: the same low keys for everyone
        keys = list(range(length)) if shared else [int(k) for k in rng.integers(0, alphabet, length)]
        tokens = [int(t) for t in rng.integers(1, 17, length)]
        requests.append((tenant, keys, tokens))
    top = draw(st.integers(1, 4))
    batch_requests = draw(st.integers(1, 10))
    order = draw(st.sampled_from(["forward", "reverse"]))
    return requests, top, batch_requests, order


def batches_of(requests, batch_requests):
    names = PrincipalNames()
    out = []
    for i in range(0, len(requests), batch_requests):
        part = requests[i : i + batch_requests]
        keys, tokens, starts, ids = [], [], [], []
        for tenant, k, t in part:
            starts.append(len(keys))
            keys += k
            tokens += t
            tenant_id = names.id(f"t{tenant}" if tenant else None)
            ids += [[tenant_id, 0, 0]] * len(k)
        out.append(
            AccessBatch(
                keys=np.asarray(keys, dtype=np.uint64),
                tokens=np.asarray(tokens, dtype=np.int32),
                request_starts=np.asarray(starts, dtype=np.int64),
                timestamps=float(i),
                block_size=16,
                principals=np.asarray(ids, dtype=np.int32).reshape(len(keys), len(PRINCIPAL_LEVELS)),
                principal_names=names,
            )
        )
    return out


@settings(max_examples=60, deadline=None)
@given(streams())
def test_shared_and_isolated_curves_equal_a_naive_lru_at_every_capacity(stream):
    requests, top, batch_requests, order = stream
    # in reverse order the analyzer takes each request's blocks last to first: so does the reference
    step = -1 if order == "reverse" else 1
    keys = [k for _, ks, _ in requests for k in ks[::step]]
    tokens = [t for _, _, ts in requests for t in ts[::step]]
    owners = [f"t{tenant}" if tenant else UNKNOWN_PRINCIPAL for tenant, ks, _ in requests for _ in ks]
    result = analyze_batches(
        batches_of(requests, batch_requests),
        InputSummary("toy", "toy", UNITS),
        order=order,
        by=("tenant",),
        top_principals=top,
    )
    rows = result.principals["tenant"]
    ranked, group = rank_owners(owners, top)
    assert [r.name for r in rows] == ranked[:top] + ([OTHER_PRINCIPALS] if len(ranked) > top else [])
    assert sum(r.accesses for r in rows) == len(keys)  # nobody dropped, unknown included
    for capacity in range(1, len(set(keys)) + 2):
        shared = naive_hits_by_owner(keys, tokens, owners, capacity)
        check_rows_at(capacity, rows, ranked, group, shared, keys, tokens, owners)
        for r in rows:
            mine = [i for i, o in enumerate(owners) if group[o] == r.name]
            assert r.curve.accesses == len(mine)
            assert r.curve.tokens == sum(tokens[i] for i in mine)
            if r.name == OTHER_PRINCIPALS:
                assert r.isolated_curve is None and r.members == len(ranked) - top
            else:
                assert r.isolated_curve.accesses == len(mine)


def rank_owners(owners, top):
    """The owners by accesses (most first, ties by name), and each one's row: its own, or (other)."""
    counts: dict[str, int] = {}
    for o in owners:
        counts[o] = counts.get(o, 0) + 1
    ranked = sorted(counts, key=lambda o: (-counts[o], o))
    return ranked, {o: (o if o in ranked[:top] else OTHER_PRINCIPALS) for o in ranked}


def check_rows_at(capacity, rows, ranked, group, shared, keys, tokens, owners):
    """Each row's hits at `capacity` in the shared cache are its members' in `shared` (a naive shared
    LRU's, by owner), and alone those of a naive LRU of its own accesses among keys/tokens/owners."""
    for r in rows:
        members = [o for o in ranked if group[o] == r.name]
        want = tuple(sum(shared[o][u] for o in members) for u in (0, 1))
        assert (r.curve.hits(capacity), r.curve.hits(capacity, "tokens")) == want, (r.name, capacity)
        if r.isolated_curve is None:
            continue
        mine = [i for i, o in enumerate(owners) if o == r.name]
        alone = naive_hits_by_owner(
            [keys[i] for i in mine], [tokens[i] for i in mine], [r.name] * len(mine), capacity
        )[r.name]
        got = (r.isolated_curve.hits(capacity), r.isolated_curve.hits(capacity, "tokens"))
        assert got == alone, (r.name, capacity)


def test_a_stream_without_principals_is_one_unknown_principal():
    batch = AccessBatch(keys=np.asarray([1, 2, 1, 2], dtype=np.uint64), block_size=16)
    result = analyze_batches([batch], InputSummary("toy", "toy", UNITS), by=("session", "adapter"))
    for level in ("session", "adapter"):
        (only,) = result.principals[level]
        assert (only.name, only.accesses, only.curve.hits(2)) == (UNKNOWN_PRINCIPAL, 4, 2)


def test_principals_refuse_a_sampled_analyzer_and_an_unknown_level():
    from kvset.core.stack_distance import Sampling

    batch = AccessBatch(keys=np.asarray([1], dtype=np.uint64), block_size=16)
    with pytest.raises(ValueError, match="--by"):
        analyze_batches([batch], InputSummary("t", "t", UNITS), by=("tenant",), sampling=Sampling(rate=0.5))
    with pytest.raises(ValueError, match="unknown principal level"):
        PrincipalCollector(("customer",))


def test_the_live_monitor_reads_the_principals_at_most_every_few_seconds_and_at_the_end():
    from kvset.core.analyzer import Analyzer
    from kvset.core.principals import LivePrincipals

    analyzer = Analyzer(units=UNITS)
    live = LivePrincipals(PrincipalCollector(("tenant",)), every=10.0)
    batch = AccessBatch(keys=np.asarray([1, 2, 1], dtype=np.uint64), timestamps=1.0, block_size=16)
    live.feed(analyzer, batch)
    first, _ = live.read(analyzer, now=100.0)
    live.feed(analyzer, batch)
    assert live.read(analyzer, now=105.0)[0] is first  # not due yet: the last read stands
    assert live.read(analyzer, now=110.0)[0]["tenant"][0].accesses == 6
    live.feed(analyzer, batch)
    streams, trace = live.read(analyzer, now=111.0, final=True)  # the stream ended: read it whole
    assert streams["tenant"][0].accesses == 9 and len(trace) == 9


def test_names_past_the_cap_share_one_principal_reported_after_the_top_ones():
    names = PrincipalNames(cap=3)
    sessions = ["a", "b", "c", "d", "a", "e", "b", "a"]  # d and e come once the table is full
    ids = [names.id(s) for s in sessions]
    assert ids[:3] == [1, 2, 3] and ids[4] == ids[7] == 1  # a held name keeps its id
    assert ids[3] == ids[5] == names.past_cap_id
    assert (names.held, names.past_cap, names.name(ids[3])) == (3, 2, PAST_NAME_CAP)
    # request i: its own block twice, so every session has 2 accesses a request
    keys = np.repeat(np.arange(len(sessions), dtype=np.uint64), 2)
    principals = np.zeros((len(keys), len(PRINCIPAL_LEVELS)), dtype=np.int32)
    principals[:, PRINCIPAL_LEVELS.index("session")] = np.repeat(ids, 2)
    batch = AccessBatch(
        keys=keys,
        request_starts=np.arange(0, len(keys), 2, dtype=np.int64),
        block_size=16,
        principals=principals,
        principal_names=names,
    )
    rows = analyze_batches([batch], InputSummary("toy", "toy", UNITS), by=("session",), top_principals=1)
    got = {r.name: r.accesses for r in rows.principals["session"]}
    # "a" leads (6 accesses); the past-cap principal (4) is not hidden in (other) with b and c (6)
    assert got == {"a": 6, PAST_NAME_CAP: 4, OTHER_PRINCIPALS: 6}
    with pytest.raises(ValueError, match="cap"):
        PrincipalNames(cap=0)
