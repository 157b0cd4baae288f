"""The one-pass OPT (Belady MIN) curve against MIN replayed per capacity: brute force and a heap."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.prefix_trace import make_prefix_trace
from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_min_curve, naive_min_distances, reverse_within_requests, simulate_min
from kvset.core.opt import opt_histogram
from kvset.core.opt_critical import to_previous_uses
from kvset.core.opt_kernel import DEAD_RUN, allocate, next_uses, opt_kernel
from kvset.formats.traces import read_trace
from tests.support.paths import MOONCAKE_TRACE
from tests.support.prefix_traces import conversations_trace
from tests.support.toy import PUBLISHED, toy_keys


def brute_min_hits(keys, capacity):
    """MIN by its definition, per access: on a miss with a full cache, scan the future of every
    resident block and evict the one used farthest away (never again = farthest)."""
    cache, hits = [], []
    for i, key in enumerate(keys):
        if key in cache:
            hits.append(True)
            continue
        hits.append(False)
        if len(cache) >= capacity:

            def next_use(block, i=i):
                return next((j for j in range(i + 1, len(keys)) if keys[j] == block), len(keys))

            cache.remove(max(cache, key=next_use))
        cache.append(key)
    return hits


@st.composite
def small_traces(draw):
    style = draw(st.sampled_from(["uniform", "one-key", "fresh", "loops", "big-ids"]))
    alphabet = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
    n = draw(st.integers(0, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if style == "uniform":
        keys = rng.integers(0, alphabet, n)
    elif style == "one-key":  # a long run of one key, then a few others
        keys = np.where(rng.random(n) < 0.85, 7, rng.integers(0, alphabet, n))
    elif style == "fresh":  # many blocks never used again: ties in next use
        keys = np.where(rng.random(n) < 0.5, np.arange(100, 100 + n), rng.integers(0, alphabet, n))
    elif style == "loops":  # a cycle longer than small caches: LRU's worst case
        keys = np.arange(n) % (alphabet + 1)
    else:  # arbitrary 64-bit keys, 0 and 2**64 - 1 among them
        pool = rng.integers(0, 2**63, alphabet, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(
            1
        )
        pool[0] = np.uint64(0)
        if alphabet > 1:
            pool[1] = np.uint64(2**64 - 1)
        keys = pool[rng.integers(0, alphabet, n)]
    return np.asarray(keys).astype(np.uint64), rng.integers(0, 600, n)


@given(small_traces())
def test_every_access_hits_exactly_at_the_capacities_min_hits_it(trace):
    keys, tokens = trace
    h = opt_histogram(keys, tokens=tokens, return_distances=True)
    c = h.curve()
    d = h.distances
    listed = keys.tolist()
    assert int(np.sum(d == 0)) == h.first_time == len(set(listed))
    for capacity in range(1, len(set(listed)) + 2):
        brute = np.array(brute_min_hits(listed, capacity), dtype=bool)
        assert ((d >= 1) & (d <= capacity)).tolist() == brute.tolist(), f"C={capacity}"
        assert c.hits(capacity) == int(brute.sum())
        assert c.hits(capacity, unit="tokens") == int(tokens[brute].sum())
    assert c.accesses == len(keys) and c.tokens == int(tokens.sum())


@given(small_traces())
def test_heap_replay_agrees_with_the_brute_force(trace):
    keys, tokens = trace
    listed = keys.tolist()
    for capacity in range(0, len(set(listed)) + 2):
        brute = np.array(brute_min_hits(listed, capacity) if capacity else [False] * len(listed), dtype=bool)
        assert simulate_min(listed, capacity, tokens.tolist()) == (int(brute.sum()), int(tokens[brute].sum()))


@given(small_traces())
def test_the_explicit_priority_stack_gives_every_access_the_distance_min_hits_it_at(trace):
    """naive_min_distances, the reference of the tests below, against MIN by its definition."""
    keys, _ = trace
    listed = keys.tolist()
    d = np.array(naive_min_distances(listed))
    for capacity in range(1, len(set(listed)) + 2):
        assert ((d >= 1) & (d <= capacity)).tolist() == brute_min_hits(listed, capacity), f"C={capacity}"


@st.composite
def longer_traces(draw):
    alphabet = draw(st.sampled_from([5, 30, 200, 1000]))
    n = draw(st.integers(100, 3000))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    keys = rng.integers(0, alphabet, n) if draw(st.booleans()) else np.minimum(rng.zipf(1.2, n), alphabet)
    starts = np.unique(np.concatenate([[0], np.flatnonzero(rng.random(n) < 0.1)]))
    return keys.astype(np.uint64), rng.integers(1, 600, n), starts


@given(longer_traces(), st.sampled_from(["forward", "reverse"]))
def test_one_pass_equals_the_heap_replay_and_never_falls_below_lru(trace, order):
    keys, tokens, starts = trace
    c = opt_histogram(keys, tokens=tokens, request_starts=starts, order=order).curve()
    stream = np.arange(len(keys))
    if order == "reverse":
        stream = np.array(reverse_within_requests(stream.tolist(), starts.tolist()))
    ordered_keys, ordered_tokens = keys[stream].tolist(), tokens[stream].tolist()
    caps = np.unique(np.round(np.geomspace(1, len(set(ordered_keys)) + 1, 8)).astype(int))
    for capacity, (hits, token_hits) in naive_min_curve(ordered_keys, caps, ordered_tokens).items():
        assert c.hits(capacity) == hits, f"C={capacity}"
        assert c.hits(capacity, unit="tokens") == token_hits, f"C={capacity}"
    lru = Analyzer(order=order)
    lru.feed(keys, tokens=tokens, request_starts=starts, timestamps=0.0)
    caps = np.arange(1, len(set(ordered_keys)) + 2)
    assert np.all(c.hit_rates(caps) >= lru.curve().hit_rates(caps))


def test_a_trace_long_enough_to_split_and_repack_the_stack_many_times():
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 2000, 20_000).astype(np.uint64)
    c = opt_histogram(keys, method="priority").curve()
    for capacity, (hits, _) in naive_min_curve(keys.tolist(), [1, 3, 17, 100, 450, 1200, 1999]).items():
        assert c.hits(capacity) == hits, f"C={capacity}"


def test_toy_trace_equals_the_heap_replay_at_every_capacity_and_beats_lru():
    keys = toy_keys()
    tokens = np.random.default_rng(3).integers(1, 17, len(keys))
    c = opt_histogram(np.array(keys, dtype=np.uint64), tokens=tokens).curve()
    for capacity, (hits, token_hits) in naive_min_curve(keys, range(1, 15), tokens.tolist()).items():
        assert (c.hits(capacity), c.hits(capacity, unit="tokens")) == (hits, token_hits)
    rates = [c.hit_rate(capacity) for capacity in range(1, 9)]
    assert all(opt >= lru for opt, lru in zip(rates, PUBLISHED, strict=True))
    assert rates[1] > 0.0 == PUBLISHED[1]  # two blocks already hit under MIN, never under LRU
    assert c.attainable() == pytest.approx(0.74)  # an infinite cache is the same for both


@pytest.fixture(scope="module")
def mooncake():
    trace = read_trace(MOONCAKE_TRACE)
    opt = opt_histogram(trace.keys, tokens=trace.tokens, request_starts=trace.request_starts).curve()
    lru = Analyzer()
    lru.feed(trace.keys, tokens=trace.tokens, request_starts=trace.request_starts, timestamps=0.0)
    return trace, opt, lru.curve()


def test_mooncake_one_pass_equals_the_heap_replay_at_20_log_spaced_capacities(mooncake):
    trace, opt, _ = mooncake
    caps = opt.log_capacities(20)
    assert len(caps) == 20
    naive = naive_min_curve(trace.keys.tolist(), caps, trace.tokens.tolist())
    for capacity, (hits, token_hits) in naive.items():
        assert opt.hits(capacity) == hits, f"C={capacity}"
        assert opt.hits(capacity, unit="tokens") == token_hits, f"C={capacity}"


def test_mooncake_min_is_never_below_lru_and_needs_at_most_its_working_sets(mooncake):
    _, opt, lru = mooncake
    caps = np.arange(1, max(opt.max_distance(), lru.max_distance()) + 2)
    assert np.all(opt.hit_rates(caps) >= lru.hit_rates(caps))
    assert opt.attainable_hits() == lru.attainable_hits()
    for target in (0.5, 0.9, 0.95, 0.99, 0.999):
        assert opt.working_set(target) <= lru.working_set(target)
    assert opt.working_set(0.95) < lru.working_set(0.95)


def test_reverse_order_reports_distances_in_the_order_given():
    keys = np.array([1, 2, 3, 1, 2, 3, 3, 2, 1], dtype=np.uint64)
    starts = np.array([0, 3, 6])
    rev = opt_histogram(keys, request_starts=starts, order="reverse", return_distances=True)
    perm = reverse_within_requests(list(range(len(keys))), starts.tolist())
    fwd = opt_histogram(keys[perm], return_distances=True)
    assert rev.distances[perm].tolist() == fwd.distances.tolist()
    assert rev.blocks.tolist() == fwd.blocks.tolist()


def test_empty_stream_gives_an_empty_curve():
    h = opt_histogram(np.zeros(0, dtype=np.uint64))
    c = h.curve()
    assert (h.accesses, h.first_time, c.accesses) == (0, 0, 0)
    assert c.working_set(0.95) is None and c.hit_rate(10) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tokens": -1}, "negative"),
        ({"tokens": np.array([1, -2, 3])}, "negative"),
        ({"tokens": np.array([1, 2])}, "entries for 3 accesses"),
        ({"order": "sideways"}, "order must be one of"),
        ({"request_starts": [0, 2, 1]}, "strictly increasing"),
        ({"method": "lru"}, "method must be one of"),
    ],
)
def test_bad_arguments_are_refused_with_a_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        opt_histogram(np.array([1, 2, 1], dtype=np.uint64), **kwargs)


@st.composite
def prefix_chained(draw):
    """Conversations re-sent whole turn after turn (chained prefix keys), cut back now and then, with
    stray re-reads of any earlier block that break the runs: the real traces' shape, small."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    conversations = draw(st.integers(1, 4))
    requests = draw(st.integers(1, 25))
    turn_blocks = draw(st.sampled_from([1, 3, 8, 20]))
    stray = draw(st.sampled_from([0.0, 0.02, 0.1]))
    keys, starts = conversations_trace(rng, conversations, requests, turn_blocks, stray, 12)
    ids = keys * np.uint64(0x9E3779B97F4A7C15)  # hash-like keys
    return ids, rng.integers(1, 600, len(ids)), starts


@settings(max_examples=60, deadline=None)
@given(prefix_chained(), st.sampled_from(["forward", "reverse"]))
def test_prefix_chained_traces_equal_the_heap_replay_at_every_capacity(trace, order):
    keys, tokens, starts = trace
    c = opt_histogram(keys, tokens=tokens, request_starts=starts, order=order, method="priority").curve()
    stream = np.arange(len(keys))
    if order == "reverse" and len(starts):
        stream = np.array(reverse_within_requests(stream.tolist(), starts.tolist()))
    ordered_keys, ordered_tokens = keys[stream].tolist(), tokens[stream].tolist()
    caps = range(1, len(set(ordered_keys)) + 2)
    for capacity, (hits, token_hits) in naive_min_curve(ordered_keys, caps, ordered_tokens).items():
        assert (c.hits(capacity), c.hits(capacity, unit="tokens")) == (hits, token_hits), f"C={capacity}"


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_the_benchmarks_real_trace_shape_equals_the_heap_replay(order):
    """benchmarks.prefix_trace's generator, shrunk: long re-read prefixes, four conversations open."""
    trace = make_prefix_trace(
        12_000, seed=7, system_blocks=30, first_context_blocks=60, new_blocks_mean=12.0, turns_mean=8.0
    )
    c = opt_histogram(trace.keys, request_starts=trace.request_starts, order=order).curve()
    stream = np.arange(trace.accesses)
    if order == "reverse":
        stream = np.array(reverse_within_requests(stream.tolist(), trace.request_starts.tolist()))
    ordered = trace.keys[stream].tolist()
    caps = np.unique(np.round(np.geomspace(1, len(set(ordered)) + 1, 24)).astype(int))
    for capacity, (hits, _) in naive_min_curve(ordered, caps).items():
        assert c.hits(capacity) == hits, f"C={capacity}"


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 3),
    st.sampled_from([40, 90, 150]),
    st.sampled_from([0.0, 0.005, 0.03]),
)
def test_long_re_read_prefixes_give_every_access_the_explicit_stacks_distance(
    seed, conversations, turn, stray
):
    """Contexts of hundreds of blocks re-read in order: runs that cross many chunks of the stack
    (64 keys each), taken with the top alone or the top and the depth above the block as records,
    ended by stray re-reads, cut-back contexts and the other conversations' turns."""
    rng = np.random.default_rng(seed)
    keys, _ = conversations_trace(rng, conversations, 8, turn, stray, 80)
    h = opt_histogram(keys, return_distances=True, method="priority")
    assert h.distances.tolist() == naive_min_distances(keys.tolist())


def test_prefixes_buried_under_other_conversations_give_every_access_the_explicit_stacks_distance():
    """Two conversations and stray re-reads: a request's prefix lies under the other conversation's
    blocks, so its accesses find the top and one long run of records above them, a depth further
    each time (shifted runs, kvset.core.opt_runs), started, continued from both kinds of depth
    and ended by a stray re-read or the end of the prefix."""
    for seed in range(10):
        keys, _ = conversations_trace(np.random.default_rng(seed), 2, 8, 90, 0.005, 80)
        h = opt_histogram(keys, return_distances=True, method="priority")
        assert h.distances.tolist() == naive_min_distances(keys.tolist()), seed


def priority_stack_distances(keys):
    """Every access's distance from the priority stack's kernel, and the accesses each way took."""
    nxt, distinct = next_uses(keys)
    state = allocate(distinct)
    out = np.empty(len(keys), np.int64)
    assert opt_kernel(nxt, np.ones(1, np.int64), out, *state) >= 0
    return out.tolist(), state.taken


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(2, 4),
    st.sampled_from([10, 40, 150]),
    st.sampled_from([2.0, 6.0]),
    st.sampled_from([0.0, 0.1, 0.3]),
    st.sampled_from(["forward", "reverse"]),
)
def test_blocks_read_for_the_last_time_among_re_read_prefixes_give_the_explicit_stacks_distances(
    seed, concurrency, context, turns, cut, order
):
    """Conversations that close and contexts cut back leave blocks read for the last time (key n,
    never) among the prefixes re-read after them, single or gathered, with live keys between:
    the accesses below them go as dead runs (kvset.core.opt_runs), started, carried past live keys
    and across chunks, and ended by a live key above the top's, a dead top or another prefix."""
    trace = make_prefix_trace(
        2_500,
        seed=seed,
        concurrency=concurrency,
        system_blocks=context // 2,
        first_context_blocks=context,
        new_blocks_mean=context / 5,
        turns_mean=turns,
        cut_probability=cut,
    )
    keys = trace.keys
    if order == "reverse":  # each request last block first, as Analyzer(order="reverse") reads it
        keys = keys[reverse_within_requests(list(range(len(keys))), trace.request_starts.tolist())]
    distances, _ = priority_stack_distances(keys)
    assert distances == naive_min_distances(keys.tolist())


def test_dead_runs_are_taken_on_closing_conversations_and_give_the_explicit_stacks_distances():
    """The trace shape above, fixed: the dead runs are taken (hundreds of accesses), not passed by."""
    taken = 0
    for seed in range(6):
        trace = make_prefix_trace(
            3_000, seed=seed, concurrency=3, system_blocks=20, first_context_blocks=90, turns_mean=4.0
        )
        distances, ways = priority_stack_distances(trace.keys)
        assert distances == naive_min_distances(trace.keys.tolist()), seed
        taken += ways[DEAD_RUN]
    assert taken > 500


# -- the stack of critical times (kvset.core.opt_critical) ----------------------------------------
@given(small_traces())
def test_both_stacks_give_every_access_the_explicit_stacks_distance(trace):
    keys, tokens = trace
    reference = naive_min_distances(keys.tolist())
    priority = opt_histogram(keys, tokens=tokens, return_distances=True, method="priority")
    critical = opt_histogram(keys, tokens=tokens, return_distances=True, method="critical")
    assert critical.distances.tolist() == reference == priority.distances.tolist()
    assert critical.tokens.tolist() == priority.tokens.tolist()


@settings(max_examples=30, deadline=None)
@given(prefix_chained(), st.sampled_from(["forward", "reverse"]))
def test_the_critical_stack_on_prefix_chained_traces_gives_the_explicit_stacks_distances(trace, order):
    keys, tokens, starts = trace
    h = opt_histogram(
        keys, tokens=tokens, request_starts=starts, order=order, return_distances=True, method="critical"
    )
    stream = np.arange(len(keys))
    if order == "reverse" and len(starts):
        stream = np.array(reverse_within_requests(stream.tolist(), starts.tolist()))
    assert h.distances[stream].tolist() == naive_min_distances(keys[stream].tolist())


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["uniform", "hot-and-cold", "loop", "chained"]))
def test_stacks_thousands_deep_give_the_priority_stacks_distances(seed, style):
    """Deeper than a group of bounds (4,096 depths), so the walk and the search skip whole blocks
    and groups on stale and on exact bounds; the priority stack is checked against the explicit
    one above."""
    rng = np.random.default_rng(seed)
    n = 30_000
    if style == "uniform":
        keys = rng.integers(0, 9_000, n)
    elif style == "hot-and-cold":
        keys = np.where(rng.random(n) < 0.3, rng.integers(0, 300, n), rng.integers(300, 7_000, n))
    elif style == "loop":  # every depth a record: the longest walks
        keys = np.arange(n) % 7_000
    else:  # re-read prefixes with stray re-reads
        keys, _ = conversations_trace(rng, 2, 6, 900, 0.01, 2_000)
    keys = np.asarray(keys).astype(np.uint64)
    tokens = rng.integers(1, 600, len(keys))
    priority = opt_histogram(keys, tokens=tokens, return_distances=True, method="priority")
    critical = opt_histogram(keys, tokens=tokens, return_distances=True, method="critical")
    assert np.array_equal(critical.distances, priority.distances)
    assert np.array_equal(critical.tokens, priority.tokens)
    assert priority.max_distance() > 4_096 or style == "chained"


@given(st.lists(st.integers(0, 5), max_size=40))
def test_next_uses_turn_into_previous_uses_in_place(keys):
    uses, _ = next_uses(np.array(keys, dtype=np.uint64))
    to_previous_uses(uses)
    last: dict[int, int] = {}
    expected = []
    for i, key in enumerate(keys):
        expected.append(last.get(key, -1))
        last[key] = i
    assert uses.tolist() == expected
