"""The live collector's window (--by-window): the principals' figures of the last N accesses equal a
naive LRU's over those same accesses, and the memory kept stops growing at N.

The references are the naive ones of the per-principal tests: a shared OrderedDict LRU over the whole
stream counting the hits of the window's accesses (the shared-cache curve), an LRU of each
principal's window accesses alone (the isolated curve), and the naive pool replay over the window.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.core.analyzer import Analyzer
from kvset.core.principals import PrincipalCollector
from kvset.core.principals_window import AccessWindow
from kvset.figures.principal_pool import compute_pool
from kvset.types import OTHER_PRINCIPALS, UNKNOWN_PRINCIPAL
from kvset.units import StreamUnits
from tests.unit.core.test_principals import batches_of, check_rows_at, naive_hits_by_owner, rank_owners
from tests.unit.figures.test_principal_pool import naive_pool

UNITS = StreamUnits(16, "flag")


@st.composite
def windowed_streams(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    requests = []
    for _ in range(draw(st.integers(1, 30))):
        tenant = int(rng.integers(0, draw(st.integers(1, 5)) + 1))  # 0: names no tenant
        length = int(rng.integers(1, 7))
        keys = [int(k) for k in rng.integers(0, draw(st.sampled_from([4, 12, 40])), length)]
        requests.append((tenant, keys, [int(t) for t in rng.integers(1, 17, length)]))
    total = sum(len(k) for _, k, _ in requests)
    window = draw(st.integers(1, total + 3))
    order = draw(st.sampled_from(["forward", "reverse"]))
    return requests, window, draw(st.integers(1, 3)), draw(st.integers(1, 8)), order


@settings(max_examples=60, deadline=None)
@given(windowed_streams())
def test_the_windows_figures_equal_a_naive_lru_over_the_same_accesses_at_every_capacity(stream):
    requests, window, top, per_batch, order = stream
    step = -1 if order == "reverse" else 1  # the analyzer's order: so the reference's
    # a batch's time is its first request's index (batches_of)
    flat = [
        (k, t, f"t{tenant}" if tenant else UNKNOWN_PRINCIPAL, float(r - r % per_batch), j == 0)
        for r, (tenant, ks, ts) in enumerate(requests)
        for j, (k, t) in enumerate(zip(ks[::step], ts[::step], strict=True))
    ]
    keys, tokens, owners = ([f[i] for f in flat] for i in range(3))
    start = max(len(flat) - window, 0)
    w_keys, w_tokens, w_owners = keys[start:], tokens[start:], owners[start:]

    analyzer = Analyzer(units=UNITS, order=order)
    collector = PrincipalCollector(("tenant",), top, window=window)
    for batch in batches_of(requests, per_batch):
        collector.feed(analyzer, batch)
    rows = collector.streams(analyzer)["tenant"]
    trace = collector.pool_trace()

    ranked, group = rank_owners(w_owners, top)
    assert [r.name for r in rows] == ranked[:top] + ([OTHER_PRINCIPALS] if len(ranked) > top else [])
    span = rows[0].span
    assert (span.accesses, span.seen, span.capacity) == (len(w_keys), len(keys), window)
    assert span.whole_stream == (start == 0)
    assert sum(r.accesses for r in rows) == len(w_keys)
    in_window = [o if i >= start else None for i, o in enumerate(owners)]  # hits counted in it only
    for capacity in range(1, len(set(keys)) + 2):
        shared = naive_hits_by_owner(keys, tokens, in_window, capacity)
        check_rows_at(capacity, rows, ranked, group, shared, w_keys, w_tokens, w_owners)

    # the pool replay reads the window: its blocks, and each access's request time (a request cut
    # by the window's start begins at its first access in it)
    times = [f[3] for f in flat[start:]]
    assert np.array_equal(trace.blocks, np.unique(w_keys, return_inverse=True)[1].reshape(-1))
    assert np.array_equal(trace.times_of(np.arange(len(w_keys))), times)
    begins = [0] + [i - start for i in range(start + 1, len(flat)) if flat[i][4]]
    assert trace.request_starts.tolist() == begins
    capacity = 1 + len(set(w_keys)) // 2
    pool = compute_pool(trace, {"tenant": rows}, capacity, "chosen")
    held, displaced, _ = naive_pool(w_keys, [group[o] for o in w_owners], times, capacity)
    total = sum(held.values())
    for r, share in zip(rows, pool.shares["tenant"], strict=True):
        assert abs(share - held.get(r.name, 0) / total) < 1e-9, r.name
    (matrix,) = pool.displacement
    names = [r.name for r in rows]
    for i, row in enumerate(matrix.blocks):
        for j, v in enumerate(row):
            assert v == displaced.get((names[i], names[j]), 0), (names[i], names[j])


def test_the_window_holds_its_capacity_and_its_memory_never_grows_past_it():
    capacity, chunk = 50, 8
    window = AccessWindow(levels=2, capacity=capacity, horizon=1 << 20, chunk=chunk)
    rng = np.random.default_rng(7)
    fed = 0
    for size in [*rng.integers(1, 30, 40), 3 * capacity, *rng.integers(1, 30, 40)]:  # and one past it
        n = int(size)
        starts = np.unique(np.concatenate([[0], rng.integers(0, n, 3)]))
        window.add(
            np.arange(fed, fed + n, dtype=np.uint64),
            np.ones(n, dtype=np.int32),
            np.zeros(n, dtype=np.int64),
            np.zeros((n, 2), dtype=np.int32),
            starts,
            np.full(len(starts), float(fed)),
        )
        fed += n
        assert len(window) == min(fed, capacity)
        # held: the capacity and the chunk being filled; one chunk dropped is kept to be refilled
        assert window.nbytes <= (capacity + 2 * chunk) * (8 + 4 + 4 + 8) + (capacity + 3 * chunk) * 16
        kept = np.concatenate([p["keys"] for p in window.parts()])
        assert kept.tolist() == list(range(fed - len(window), fed))  # the last ones, in order
        starts, _ = window.requests()
        assert starts[0] == 0 and len(starts) <= len(window)


def test_a_file_analysis_keeps_the_whole_stream_and_says_no_window():
    analyzer = Analyzer(units=UNITS)
    collector = PrincipalCollector(("tenant",))
    requests = [(1, [k % 7], [16]) for k in range(500)]
    for batch in batches_of(requests, 9):
        collector.feed(analyzer, batch)
    (row,) = collector.streams(analyzer)["tenant"]
    assert (row.accesses, row.span.capacity, row.span.whole_stream) == (500, None, True)
