"""The cached prefix a request hit, read off the resident blocks' parent links: against a naive model,
and the replay of a fake engine that reports misses only (vLLM's default mode)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.engine_model.prefix_chain import PrefixChain
from kvset.engine_model.replay import RequestReplay
from tests.support.vllm_engine_sim import SimEngine, agentic_requests

# A store hangs a run of new blocks on an existing block (or on nothing); a removal evicts one block.
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("store"), st.integers(0, 40), st.integers(1, 4)),
        st.tuples(st.just("remove"), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("walk"), st.integers(0, 40), st.just(0)),
    ),
    max_size=120,
)


@settings(max_examples=200, deadline=None)
@given(_OPS)
def test_a_walk_is_the_chain_of_ancestors_removed_or_not(ops):
    chain = PrefixChain()
    parent_of: dict[int, int | None] = {}  # every block ever stored: hashes are chained, parents fixed
    resident: set[int] = set()
    next_key = 1000
    for op, pick, n in ops:
        known = sorted(parent_of)
        target = known[pick % len(known)] if known else None
        if op == "store":
            parent = target if target in resident and pick % 3 else None  # a root a third of the time
            keys = list(range(next_key, next_key + n))
            next_key += n
            previous = parent
            for k in keys:
                parent_of[k] = previous
                previous = k
            resident.update(keys)
            chain.stored(np.array(keys, dtype=np.uint64), parent)
        elif op == "remove" and target is not None:
            resident.discard(target)
            chain.removed([target])
        elif op == "walk" and target is not None:
            # a hash's parent is fixed: the chain is the same whether its blocks are still resident
            naive: list[int] = []
            k: int | None = target
            while k is not None:
                naive.append(k)
                k = parent_of[k]
            got = chain.walk(target)
            assert got is not None and got.tolist() == naive[::-1]
            assert (target in chain) == (target in resident)


class Replayed:
    """A fake engine's batches fed to a RequestReplay as the tracker does, removals included."""

    def __init__(self, engine: SimEngine, requests) -> None:
        self.replay = RequestReplay()
        resident: set[int] = set()
        for step, events in engine.run(requests):
            self.replay.begin_batch(step / 1000)
            for ev in events:
                if ev[0] == "removed":
                    resident.difference_update(ev[1])
                    self.replay.removed(np.array(ev[1], dtype=np.uint64))
                    continue
                keys = np.array(ev[1], dtype=np.uint64)
                cached = all(k in resident for k in ev[1])
                resident.update(ev[1])
                self.replay.stored(keys, np.full(len(keys), 16, np.int64), ev[2], cached)
        self.replay.flush()
        self.accesses = self.replay.take_accesses()
        self.model = self.replay.take_model()

    def predicted(self, usable: int) -> float:
        d = np.concatenate([p[0] for p in self.model])
        t = np.concatenate([p[3] for p in self.model])
        return float(t[d <= usable].sum() / (t.sum() + 7.5 * len(self.model)))


@pytest.mark.parametrize("usable", [150, 250, 400])
def test_without_hit_reports_the_hits_are_reconstructed_and_the_engine_predicted(usable):
    requests = agentic_requests(8, 10, sessions=4, seed=2)
    full_engine = SimEngine(usable, report_hits=True)
    full = Replayed(full_engine, agentic_requests(8, 10, sessions=4, seed=2))
    engine = SimEngine(usable, report_hits=False)
    incremental = Replayed(engine, requests)
    c = incremental.replay.counts
    assert c.reports == 0 and c.reconstructed > 0 and c.unknown_prefix == 0
    # the same schedule (reports change nothing in the engine): every request reconstructed is one the
    # hit reports showed, hits included; missing are those that stored no block (their prompt was
    # cached but a partial block, their answer filled none; readmissions among them)
    assert engine.measured_token_hit_rate == full_engine.measured_token_hit_rate
    seen_full = Counter(tuple(k.tolist()) for k, _, _ in full.accesses)
    seen = Counter(tuple(k.tolist()) for k, _, _ in incremental.accesses)
    assert not seen - seen_full
    assert sum((seen_full - seen).values()) <= 0.06 * len(full.accesses)
    assert incremental.predicted(usable) == pytest.approx(engine.measured_token_hit_rate, abs=0.02)


def test_a_parent_never_stored_is_counted_not_guessed_and_a_removed_link_still_walks():
    replay = RequestReplay()
    replay.begin_batch(0.0)
    replay.stored(np.array([1, 2, 3], np.uint64), np.full(3, 16, np.int64), None, False)
    for _ in range(40):
        replay.begin_batch(replay._ts[replay._batch] + 0.001)
    replay.removed(np.array([1], np.uint64))  # one copy of the root's hash removed: its link is kept
    replay.stored(np.array([9], np.uint64), np.full(1, 16, np.int64), 3, False)
    assert replay.counts.reconstructed == 1 and replay.chain.through_removed == 1
    replay.begin_batch(1.0)
    replay.stored(
        np.array([7], np.uint64), np.full(1, 16, np.int64), 55, False
    )  # stored before kvset listened
    assert replay.counts.unknown_prefix == 1
    replay.flush()
    assert [k.tolist() for k, _, _ in replay.take_accesses()][-2:] == [[1, 2, 3, 9], [7]]
