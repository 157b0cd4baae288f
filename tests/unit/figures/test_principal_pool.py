"""Cache held, who displaces whom and the eviction age (kvset.figures.principal_pool) == a naive LRU.

The reference is its own: an OrderedDict LRU of the pool's size, which after every access counts
each resident block once for the principal that touched it last (the block-steps held, summed per
principal), notes which principal's access pushed each block out, and counts (that principal, the
principal whose access then misses the block) when the block comes back.
"""

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.figures.principal_pool import compute_pool, read_capacity
from kvset.offline import InputSummary, analyze_batches
from kvset.types import OTHER_PRINCIPALS, PRINCIPAL_LEVELS, UNKNOWN_PRINCIPAL, AccessBatch, PrincipalNames
from kvset.units import StreamUnits

UNITS = StreamUnits(16, "flag")


def naive_pool(keys, owners, times, capacity):
    """({owner: block-steps held}, {(evicting owner, missing owner): blocks}, [eviction ages])."""
    cache: OrderedDict[int, tuple[str, float]] = OrderedDict()  # key -> (who touched it last, when)
    held: dict[str, int] = {}
    pushed_out_by: dict[int, str] = {}
    displaced: dict[tuple[str, str], int] = {}
    ages = []
    for key, owner, t in zip(keys, owners, times, strict=True):
        if key in cache:
            cache.move_to_end(key)
        else:
            if key in pushed_out_by:
                pair = (pushed_out_by.pop(key), owner)
                displaced[pair] = displaced.get(pair, 0) + 1
            if len(cache) >= capacity:
                gone, (_, last_use) = cache.popitem(last=False)
                pushed_out_by[gone] = owner
                ages.append(t - last_use)
        cache[key] = (owner, t)
        for who, _ in cache.values():
            held[who] = held.get(who, 0) + 1
    return held, displaced, ages


@st.composite
def streams(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_requests = draw(st.integers(1, 40))
    n_tenants = draw(st.integers(1, 5))
    alphabet = draw(st.sampled_from([4, 12, 40]))
    requests = []
    t = 0.0
    for _ in range(n_requests):
        tenant = int(rng.integers(0, n_tenants + 1))  # 0: the line names no tenant
        length = int(rng.integers(1, 7))
        t += float(rng.integers(1, 5))
        requests.append((tenant, [int(k) for k in rng.integers(0, alphabet, length)], t))
    top = draw(st.integers(1, 4))
    order = draw(st.sampled_from(["forward", "reverse"]))
    capacity = draw(st.integers(1, 12))
    return requests, top, order, capacity


def batch_of(requests):
    names = PrincipalNames()
    keys, starts, ids, stamps = [], [], [], []
    for tenant, k, t in requests:
        starts.append(len(keys))
        keys += k
        stamps += [t] * len(k)
        ids += [[names.id(f"t{tenant}" if tenant else None), 0, 0]] * len(k)
    return AccessBatch(
        keys=np.asarray(keys, dtype=np.uint64),
        request_starts=np.asarray(starts, dtype=np.int64),
        timestamps=np.asarray(stamps),
        block_size=16,
        principals=np.asarray(ids, dtype=np.int32).reshape(len(keys), len(PRINCIPAL_LEVELS)),
        principal_names=names,
    )


@settings(max_examples=60, deadline=None)
@given(streams())
def test_cache_held_and_displacement_equal_a_naive_lru(stream):
    requests, top, order, capacity = stream
    step = -1 if order == "reverse" else 1  # the analyzer's order, as the reference takes it
    keys = [k for _, ks, _ in requests for k in ks[::step]]
    owners = [f"t{tenant}" if tenant else UNKNOWN_PRINCIPAL for tenant, ks, _ in requests for _ in ks]
    times = [t for _, ks, t in requests for _ in ks]
    result = analyze_batches(
        [batch_of(requests)],
        InputSummary("toy", "toy", UNITS),
        order=order,
        by=("tenant",),
        top_principals=top,
    )
    pool = compute_pool(result.principal_pool, result.principals, capacity, "chosen")
    rows = result.principals["tenant"]
    names = [r.name for r in rows]
    group = {o: (o if o in names else OTHER_PRINCIPALS) for o in owners}

    held, displaced, ages = naive_pool(keys, owners, times, capacity)
    total = sum(held.values())
    for i, name in enumerate(names):
        mine = sum(v for o, v in held.items() if group[o] == name)
        assert pool.shares["tenant"][i] == pytest.approx(mine / total)
        assert pool.mean_blocks["tenant"][i] == pytest.approx(mine / len(keys))
    (matrix,) = pool.displacement
    assert matrix.names == tuple(names)
    for i, evictor in enumerate(names):
        for j, victim in enumerate(names):
            want = sum(n for (a, b), n in displaced.items() if group[a] == evictor and group[b] == victim)
            assert matrix.blocks[i][j] == want, (evictor, victim)
    others = {e: sum(n for (a, b), n in displaced.items() if group[a] == e and group[b] != e) for e in names}
    accesses = {e: sum(1 for o in owners if group[o] == e) for e in names}
    # the named principals with 5 % of the accesses or more that displaced another, ranked per access
    eligible = [e for e in names if e != OTHER_PRINCIPALS and others[e] and accesses[e] >= 0.05 * len(keys)]
    if not eligible:
        assert matrix.top_displacer is None
    else:
        rate = {e: others[e] / accesses[e] for e in eligible}
        assert rate[matrix.top_displacer] == pytest.approx(max(rate.values()))
    for i, e in enumerate(names):
        assert matrix.others_per_access[i] == pytest.approx(others[e] / max(accesses[e], 1))
    assert pool.eviction_age_seconds == (pytest.approx(float(np.median(ages))) if ages else None)


def test_a_flood_is_named_as_the_displacer_and_holds_more_than_it_earns():
    # two small tenants re-read their own few blocks; a flood streams new blocks through the pool
    requests, t = [], 0.0
    rng = np.random.default_rng(3)
    for i in range(600):
        t += 1.0
        if i % 2:
            requests.append((1, [10_000 + i * 4 + j for j in range(4)], t))  # never re-read
        else:
            tenant = 2 + (i // 2) % 2
            requests.append((tenant, [tenant * 100 + int(k) for k in rng.integers(0, 20, 3)], t))
    result = analyze_batches(
        [batch_of(requests)], InputSummary("toy", "toy", UNITS), by=("tenant",), top_principals=5
    )
    pool = compute_pool(result.principal_pool, result.principals, 30, "chosen")
    (matrix,) = pool.displacement
    assert matrix.top_displacer == "t1"
    flood = matrix.names.index("t1")
    assert pool.shares["tenant"][flood] > 0.5


def test_the_displacer_is_ranked_per_access_not_by_its_size():
    # "big" re-reads a working set larger than the pool, with most of the traffic: in all it costs the
    # others the most misses; "flood" streams new blocks with 5.5 % of the accesses and costs the others
    # ten times more for each access it makes; "small" re-reads a few blocks of its own
    requests, t = [], 0.0
    rng = np.random.default_rng(7)
    for i in range(2000):
        t += 1.0
        if i % 10 == 0:
            requests.append((1, [50_000 + i * 4 + j for j in range(2)], t))  # flood: never re-read
        elif i % 10 in (1, 5):
            requests.append((3, [300 + int(k) for k in rng.integers(0, 10, 3)], t))  # small
        else:
            requests.append((2, [1_000 + int(k) for k in rng.integers(0, 140, 4)], t))  # big
    result = analyze_batches(
        [batch_of(requests)], InputSummary("toy", "toy", UNITS), by=("tenant",), top_principals=5
    )
    pool = compute_pool(result.principal_pool, result.principals, 40, "chosen")
    (matrix,) = pool.displacement
    big, flood = matrix.names.index("t2"), matrix.names.index("t1")
    others = [sum(row) - row[i] for i, row in enumerate(matrix.blocks)]
    assert others[big] > others[flood]  # the big tenant costs the others more misses in all
    assert matrix.others_per_access[flood] > 5 * matrix.others_per_access[big]
    assert matrix.top_displacer == "t1"


def test_sessions_next_turn_against_the_eviction_age():
    # session s-fast comes back every 2 s, s-slow every 50 s; a filler streams one new block a second
    names = PrincipalNames()
    keys, starts, ids, stamps = [], [], [], []
    for t in range(200):
        requests = [(None, [1_000_000 + t])]
        if t % 2 == 0:
            requests.append(("s-fast", [1, 2]))
        if t % 50 == 0:
            requests.append(("s-slow", [7, 8]))
        for session, k in requests:
            starts.append(len(keys))
            keys += k
            stamps += [float(t)] * len(k)
            ids += [[0, names.id(session), 0]] * len(k)
    batch = AccessBatch(
        keys=np.asarray(keys, dtype=np.uint64),
        request_starts=np.asarray(starts),
        timestamps=np.asarray(stamps),
        block_size=16,
        principals=np.asarray(ids, dtype=np.int32),
        principal_names=names,
    )
    result = analyze_batches([batch], InputSummary("toy", "toy", UNITS), by=("session",))
    pool = compute_pool(result.principal_pool, result.principals, 12, "chosen")
    # a pool of 12 blocks: the filler's blocks leave about 10 s after their use
    assert 5 < pool.eviction_age_seconds < 20
    assert pool.sessions_with_turns == 2
    assert pool.sessions_next_turn_in_time == 0.5
    assert pool.session_gaps == {"s-fast": 2.0, "s-slow": 50.0}


def test_a_trace_is_read_at_the_knee_it_was_first_read_at():
    # live, the knee moves with every access while one collector's read (a trace and its streams)
    # stands for 10 s: its cache shares are those of the knee it was read at, not replayed per snapshot
    requests = [(1 + i % 3, [i % 11, i % 7 + 20], float(i)) for i in range(60)]
    result = analyze_batches([batch_of(requests)], InputSummary("t", "t", UNITS), by=("tenant",))
    trace, streams = result.principal_pool, result.principals
    first = compute_pool(trace, streams, read_capacity(trace, 5, "knee"), "knee")
    assert read_capacity(trace, 9, "knee") == 5
    assert compute_pool(trace, streams, read_capacity(trace, 9, "knee"), "knee") is first
    assert read_capacity(trace, 9, "engine") == 9  # a pool the engine or the flags give stands as given
    again = analyze_batches([batch_of(requests)], InputSummary("t", "t", UNITS), by=("tenant",))
    assert read_capacity(again.principal_pool, 9, "knee") == 9  # the next read: the knee as it is then
