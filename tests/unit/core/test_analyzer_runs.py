"""Runs of re-read blocks taken at once: the same figures as the naive replay and the per-block kernel.

Prefix-chained traces (conversations re-sent whole, cut back now and then, with stray re-reads
that split runs) are what the run path is for; the random traces of test_analyzer_property are
what it must not change.
"""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kvset.core import kernel_layout as KL
from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_curve, naive_stack_distances
from tests.support.prefix_traces import conversations_trace
from tests.unit.core.test_analyzer_property import traces


@st.composite
def prefix_chained(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    conversations = draw(st.integers(1, 4))
    requests = draw(st.integers(1, 30))
    turn_blocks = draw(st.sampled_from([1, 5, 30, 140]))  # long turns cross words and superblocks
    stray = draw(st.sampled_from([0.0, 0.01, 0.1]))  # a re-read of any earlier block, mid-request
    big_ids = draw(st.booleans())
    ids, starts = conversations_trace(rng, conversations, requests, turn_blocks, stray, 40)
    if big_ids:  # hash-like keys, 0 and 2**64-1 among them
        ids = ids * np.uint64(0x9E3779B97F4A7C15)
        ids[ids == ids[0]] = np.uint64(2**64 - 1)
    n = len(ids)
    tokens = rng.integers(1, 600, n)
    # per-access stamps: mostly forward in steps across 1 s slots, sometimes late (before the slot)
    steps = rng.choice([0.0, 0.0, 0.0, 0.004, 0.3, 1.7], n)
    stamps = 1000.0 + np.cumsum(steps) - np.where(rng.random(n) < 0.02, 3.0, 0.0)
    cuts = sorted({int(s) for s in starts if rng.random() < 0.3})
    return ids, tokens, np.asarray(starts, dtype=np.int64), stamps, cuts


def _feed(a, keys, tokens, starts, stamps, cuts):
    """Feed in batches cut at request starts; every access's distance, in order."""
    bounds = [0, *[c for c in cuts if 0 < c < len(keys)], len(keys)]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        rel = starts[(starts >= lo) & (starts < hi)] - lo
        d = a.feed(
            keys[lo:hi],
            tokens=tokens[lo:hi],
            request_starts=rel,
            timestamps=stamps[lo:hi],
            return_distances=True,
        )
        out.extend(d.tolist())
    return out


def _same_figures(runs: Analyzer, blocks: Analyzer) -> None:
    """Everything either analyzer reports, bit for bit."""
    r, b = runs.curve(), blocks.curve()
    assert np.array_equal(r.capacities, b.capacities)
    assert np.array_equal(r.block_hits, b.block_hits)
    assert np.array_equal(r.token_hits, b.token_hits)
    assert (r.accesses, r.tokens, r.beyond_horizon_blocks, r.beyond_horizon_tokens) == (
        b.accesses,
        b.tokens,
        b.beyond_horizon_blocks,
        b.beyond_horizon_tokens,
    )
    assert np.array_equal(runs.counts, blocks.counts)
    assert (runs.first_time, runs.late_accesses, runs.requests) == (
        blocks.first_time,
        blocks.late_accesses,
        blocks.requests,
    )
    assert runs.stack_keys().tolist() == blocks.stack_keys().tolist()
    for window in (1.0, 5.0, 60.0, 3600.0):
        rw, bw = runs.curve(window=window), blocks.curve(window=window)
        assert np.array_equal(rw.block_hits, bw.block_hits), window
        assert np.array_equal(rw.token_hits, bw.token_hits), window
        assert rw.accesses == bw.accesses
    for coarse in (False, True):
        rs, bs = runs.slot_series(360.0, coarse=coarse), blocks.slot_series(360.0, coarse=coarse)
        assert rs.end_slot == bs.end_slot
        for name in ("counts", "requests", "blocks", "tokens"):
            assert np.array_equal(getattr(rs, name), getattr(bs, name)), name


@given(
    prefix_chained(),
    st.sampled_from([3, 17, 64, 1 << 20]),
    st.sampled_from(["forward", "reverse"]),
    st.integers(1, 64),
)
def test_runs_equal_the_per_block_kernel_on_prefix_chained_traces(trace, horizon, order, initial):
    keys, tokens, starts, stamps, cuts = trace
    runs = Analyzer(horizon=horizon, order=order, initial_tracked=initial)
    blocks = Analyzer(horizon=horizon, order=order, initial_tracked=initial, runs=False)
    assert _feed(runs, keys, tokens, starts, stamps, cuts) == _feed(
        blocks, keys, tokens, starts, stamps, cuts
    )
    _same_figures(runs, blocks)


@given(traces(), st.sampled_from([2, 9, 1 << 20]), st.integers(1, 16))
def test_runs_equal_the_per_block_kernel_on_random_traces(trace, horizon, initial):
    keys, tokens, starts, cuts = trace
    stamps = np.arange(len(keys), dtype=np.float64) * 0.37
    runs = Analyzer(horizon=horizon, initial_tracked=initial)
    blocks = Analyzer(horizon=horizon, initial_tracked=initial, runs=False)
    assert _feed(runs, keys, tokens, starts, stamps, cuts) == _feed(
        blocks, keys, tokens, starts, stamps, cuts
    )
    _same_figures(runs, blocks)


@given(prefix_chained(), st.integers(1, 48), st.integers(1, 64))
def test_runs_equal_the_naive_replay_at_every_capacity(trace, horizon, initial):
    keys, tokens, starts, stamps, cuts = trace
    a = Analyzer(horizon=horizon, initial_tracked=initial)
    _feed(a, keys, tokens, starts, stamps, cuts)
    c = a.curve()
    naive = naive_curve(keys.tolist(), range(1, horizon + 1), tokens.tolist())
    for capacity, (block_hits, token_hits) in naive.items():
        assert c.hits(capacity) == block_hits, capacity
        assert c.hits(capacity, unit="tokens") == token_hits, capacity


@given(prefix_chained(), st.integers(1, 64))
def test_run_distances_equal_an_explicit_stack(trace, initial):
    keys, tokens, starts, stamps, cuts = trace
    a = Analyzer(horizon=1 << 20, initial_tracked=initial)
    assert _feed(a, keys, tokens, starts, stamps, cuts) == naive_stack_distances(keys.tolist())


def test_a_re_sent_conversation_is_taken_as_runs_and_split_where_a_block_was_read_since():
    context = np.arange(1000, 1700, dtype=np.uint64)
    stray = np.array([1350], dtype=np.uint64)  # read again between the two sends: splits the run
    keys = np.concatenate([context, stray, context])
    a = Analyzer(horizon=1 << 20, initial_tracked=4)
    d = a.feed(keys, timestamps=0.0, return_distances=True)
    assert d.tolist() == naive_stack_distances(keys.tolist())
    resent = d[len(context) + 1 :]
    assert set(resent[:350].tolist()) == {700}  # the 699 other blocks of the conversation in between
    assert resent[350] == 351  # block 1350: read since, so not part of the run
    assert set(resent[351:].tolist()) == {700}
    runs, run_accesses = a.runs_taken
    assert runs == 2  # the send before block 1350 and the one after
    # all but block 1350 itself and the two accesses each run starts from (1000, 1001; 1351, 1352)
    assert run_accesses == len(context) - 1 - 4


def test_runs_stay_exact_while_the_slots_are_compacted_under_them():
    rng = np.random.default_rng(23)
    contexts = [list(range(c * 100_000, c * 100_000 + 300)) for c in range(3)]
    keys: list[int] = []
    for turn in range(60):
        c = int(rng.integers(3))
        contexts[c] = contexts[c] + list(
            range(10**6 + 100 * turn, 10**6 + 100 * turn + int(rng.integers(1, 60)))
        )
        keys += contexts[c]
    keys_array = np.asarray(keys, dtype=np.uint64)
    stamps = np.arange(len(keys), dtype=np.float64) * 0.001
    runs, blocks = Analyzer(horizon=1 << 20), Analyzer(horizon=1 << 20, runs=False)
    d = runs.feed(keys_array, timestamps=stamps, return_distances=True)
    assert d.tolist() == blocks.feed(keys_array, timestamps=stamps, return_distances=True).tolist()
    assert d.tolist() == naive_stack_distances(keys)
    _same_figures(runs, blocks)
    assert runs.runs_taken[1] > 0.9 * len(keys)
    assert runs._t.meta[KL.M_COMPACTIONS] > 5
