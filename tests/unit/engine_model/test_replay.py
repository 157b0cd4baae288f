"""KV events grouped into requests, the dedupe of hit re-reports, and the block-pool replay, on plain values."""

from __future__ import annotations

import numpy as np
import pytest

from kvset.engine_model.kv_groups import KvGroup
from kvset.engine_model.records import CAUSE_FIRST_TIME, INFINITE
from kvset.engine_model.replay import RequestReplay
from tests.support.vllm_engine_sim import SimEngine, agentic_requests

K = np.uint64


class Engine:
    """Feeds a RequestReplay as the tracker does: batches of BlockStored, with the engine's resident set."""

    def __init__(self, block: int = 16, **kwargs) -> None:
        self.replay = RequestReplay(**kwargs)
        self.block = block  # tokens of a full block
        self.resident: set[int] = set()
        self.ts = 0.0

    def batch(self, *stores, dt: float = 0.001) -> None:
        """stores: (keys, parent) pairs, a parentless store of resident keys a hit report; or (keys,
        parent, states): its twin in a Mamba group 1 names the blocks of `states`."""
        self.ts += dt
        self.replay.begin_batch(self.ts)
        for keys, parent, *states in stores:
            arr = np.array(keys, dtype=K)
            cached = all(k in self.resident for k in keys)
            self.resident.update(keys)
            self.replay.stored(arr, np.full(len(keys), self.block, dtype=np.int64), parent, cached)
            for named in states:
                self.replay.group_stored(1, np.array(named, dtype=K), False)

    def idle(self, n: int) -> None:
        for _ in range(n):
            self.batch()

    def requests(self) -> list[tuple[list[int], list[int]]]:
        self.replay.flush()
        return [(k.tolist(), t.tolist()) for k, t, _ in self.replay.take_accesses()]


def test_a_lookup_reported_again_counts_once_and_a_request_is_one_request():
    e = Engine()
    e.batch(([1, 2, 3], None))  # a first request computes the prefix
    e.idle(40)
    e.batch(([1, 2, 3], None))  # a waiting request's lookup, reported ...
    e.batch(([1, 2, 3], None))  # ... again next step: it was not admitted
    e.batch(([1, 2, 3], None), ([4, 5], 3))  # admitted: its computed blocks chain onto the reported prefix
    e.batch(([6], 5), dt=0.016)  # an output block, 16 steps on
    out = e.requests()
    assert out[-1] == ([1, 2, 3, 4, 5, 6], [16, 16, 16, 16, 16, 0])  # output blocks are not queries
    c = e.replay.counts
    assert (c.reports, c.admitted, c.not_admitted, c.not_admitted_blocks) == (3, 1, 2, 6)
    assert c.requests == 2 and c.decode_blocks == 1


def test_two_requests_with_one_cached_prefix_in_one_step_are_both_admitted():
    e = Engine()
    e.batch(([1, 2], None))
    e.idle(40)
    e.batch(([1, 2], None), ([3], 2), ([1, 2], None), ([4], 2))
    out = e.requests()
    assert out[1:] == [([1, 2, 3], [16] * 3), ([1, 2, 4], [16] * 3)]
    assert e.replay.counts.not_admitted == 0 and e.replay.counts.admitted == 2


def test_a_waiting_requests_prefix_that_shrank_supersedes_its_earlier_report():
    e = Engine()
    e.batch(([1, 2, 3], None))
    e.idle(40)
    e.batch(([1, 2, 3], None))
    e.batch(([1, 2], None))  # block 3 was evicted meanwhile: the same request, looked up again
    e.batch(([1, 2], None), ([3, 9], 2))
    assert e.requests()[1] == ([1, 2, 3, 9], [16] * 4)
    c = e.replay.counts
    assert (c.superseded, c.not_admitted, c.admitted) == (1, 2, 1)


def test_a_report_never_confirmed_nor_superseded_is_an_admission_that_stored_nothing():
    e = Engine(pending_batches=10)
    e.batch(([1, 2], None))
    e.idle(40)
    e.batch(([1, 2], None))  # its prompt was cached but a partial block, and its answer filled none
    e.idle(20)
    assert e.replay.counts.admitted_without_store == 1
    assert e.requests()[1] == ([1, 2], [16, 16])


def test_a_readmission_after_a_preemption_is_kept_out_of_the_queries():
    e = Engine()
    e.batch(([1, 2, 3], None))
    e.batch()
    e.batch(([4], 3), dt=0.016)  # an output block: the request is decoding
    e.batch()
    e.batch(([1, 2, 3, 4], None))  # preempted: looked up again, all its blocks still cached
    e.batch()
    e.batch(([5], 4), dt=0.016)  # readmitted: its next output block confirms the lookup
    out = e.requests()
    assert out == [([1, 2, 3, 4], [16, 16, 16, 0]), ([1, 2, 3, 4, 5], [0] * 5)]
    c = e.replay.counts
    assert c.readmissions == 1 and c.finished_by_evidence == 1  # the preempted one ended at the lookup
    model = e.replay.take_model()
    assert len(model) == 1 and model[0][3].tolist() == [16, 16, 16]  # the first admission's prompt only


def test_a_shared_prefix_the_request_computed_first_does_not_end_it():
    e = Engine()
    e.batch(([1, 2, 3, 4], None))  # the first request computes the system prompt 1, 2 and its own 3, 4
    e.batch(([1, 2], None), ([7], 2))  # another request, sharing only the system prompt
    e.batch()
    e.batch(([5], 4), dt=0.016)  # the first one is still answering
    out = e.requests()
    assert ([1, 2, 3, 4, 5], [16] * 4 + [0]) in out
    assert e.replay.counts.finished_by_evidence == 0


def test_the_next_turn_holding_a_requests_answer_ends_it_first():
    e = Engine()
    e.batch(([1, 2], None))
    e.batch()
    e.batch(([3], 2), dt=0.016)  # its answer
    e.batch(([1, 2, 3], None), ([8, 9], 3))  # the agent's next turn re-sends the answer
    e.idle(40)
    out = e.requests()
    assert out == [([1, 2, 3], [16, 16, 0]), ([1, 2, 3, 8, 9], [16] * 5)]
    assert e.replay.counts.finished_by_evidence == 1


@pytest.mark.parametrize(("block", "gap"), [(16, 16), (16, 8), (32, 32)])
def test_finished_requests_stay_pinned_the_mean_of_vllms_stay_not_a_rounding_of_it(block, gap):
    """The mean stay, (B - 1) / 2 steps after the last stored block, is rarely a whole number of
    batches (7.5 for blocks of 16): over many requests the batches held after their last store
    average that mean, not the one whole number every request would be rounded to."""
    e = Engine(block=block)
    n, outputs = 32, 40  # requests running side by side, each with enough output blocks for the gap
    e.batch(*[([1000 * r + 1, 1000 * r + 2], None) for r in range(n)])
    running = len(e.replay._running)  # requests the replay holds, summed over batches
    for i in range(outputs):
        for _ in range(gap - 1):
            e.batch()
            running += len(e.replay._running)
        e.batch(*[([1000 * r + 10 + i], 1000 * r + (2 if i == 0 else 9 + i)) for r in range(n)])
        running += len(e.replay._running)
    last_store = e.replay._batch
    for _ in range(3 * gap + 2 * e.replay.delay):
        e.batch()
        running += len(e.replay._running)
    held = running / n - last_store  # (as in the test above, per request)
    expected = np.mean([(end % block) * gap / block for end in range(block)])
    assert abs(held - expected) <= 0.1


def test_distances_give_the_pool_sizes_that_hit():
    e = Engine()
    e.batch(([1, 2], None))
    e.idle(40)  # finished: 2 then 1 go to the free queue
    e.batch(([3, 4, 5], None))
    e.idle(40)  # 5, 4, 3 freed after them
    e.batch(([1, 2], None), ([6], 2))  # 1 and 2 hit in a pool that holds them behind 3, 4, 5
    e.idle(40)
    e.replay.flush()
    (d0, _, c0, t0, _), (d1, _, _, _, _), (d2, dq2, c2, t2, _) = e.replay.take_model()
    assert d0.tolist() == [INFINITE, INFINITE] and c0.tolist() == [CAUSE_FIRST_TIME] * 2
    # block 1: the newest releases were 3, 4, 5 (after 2, 1): 4th from the newest, 5th with block 2;
    # each running request's unfilled block comes on top (the one running now)
    assert d2[:2].tolist() == [4 + 1, 5 + 1]
    assert dq2[:2].tolist() == [4, 4]  # if running requests held nothing: the releases after it only
    assert d2[2] == INFINITE and c2[2] == CAUSE_FIRST_TIME  # 6 is new: and so no pool hits it


@pytest.mark.parametrize("usable", [150, 250, 400])
def test_the_replay_predicts_a_fake_engines_own_hit_rate(usable):
    engine = SimEngine(usable)
    batches = engine.run(agentic_requests(8, 10, sessions=4, seed=2))
    e = Engine()
    for step, events in batches:
        e.ts = step / 1000 - 0.001
        e.batch(*[(ev[1], ev[2]) for ev in events if ev[0] == "stored"])
        for ev in events:
            if ev[0] == "removed":
                e.resident.difference_update(ev[1])
    e.replay.flush()
    parts = e.replay.take_model()
    d = np.concatenate([p[0] for p in parts])
    t = np.concatenate([p[3] for p in parts])
    predicted = t[d <= usable].sum() / (t.sum() + 7.5 * len(parts))
    assert predicted == pytest.approx(engine.measured_token_hit_rate, abs=0.02)
    # readmissions told apart from new requests (one preempted again before it stored a block looks
    # like a waiting one: none of its tokens counts either way)
    assert abs(e.replay.counts.readmissions - engine.readmissions) <= max(1, engine.readmissions // 10)


def _prefix_distances_after(waited: bool) -> np.ndarray:
    """A later lookup's distances of a shared prefix whose window copies a request W freed a step after
    its admission, while another request A was answering; `waited`: W's lookup was reported a step
    before its admission too (vLLM did not admit it then)."""
    e = Engine()
    e.replay.add_group(KvGroup(1, "sliding_window", 33, 16))  # 2 blocks before the hit point
    e.batch(([1, 2], None))  # the shared prefix, computed once
    e.idle(40)
    e.batch(([10, 11], None))  # A's prompt ...
    e.batch(([12], 11), dt=0.016)  # ... and its answer: A stays up to 15 steps more
    if waited:
        e.batch(([1, 2], None))  # W looked up, not admitted
    else:
        e.batch()
    e.batch(([1, 2], None), ([3, 4, 5], 2))  # W admitted: its window leaves 1, 2, 3 behind
    e.idle(40)
    e.batch(([1, 2], None), ([6], 2))  # Z looks the prefix up again
    e.idle(40)
    e.replay.flush()
    z = e.replay.take_model()[-1][0]
    assert z[2] == INFINITE  # (6 is new)
    return z[:2]


def test_a_waiting_request_admitted_means_a_running_one_finished_in_the_step_before():
    """vLLM's scheduler admits a request that waited only once room is made, and a request that
    finishes makes it at the end of the step before (update_from_output). So the answering A ended
    before the waiting W's admission: A's blocks are older in the free queue than W's window copies
    of the shared prefix (freed a step after W's admission, remove_skipped_blocks), and a later
    lookup finds those 5 releases nearer the newest end (A's 3 blocks, and the 2 copies its window
    still held: the first fell behind it at A's answer) than when nothing says that A ended (W
    admitted at its first lookup: A stays its estimated time)."""
    assert (_prefix_distances_after(False) - _prefix_distances_after(True)).tolist() == [5, 5]


@pytest.mark.parametrize("reported", [True, False])
def test_a_mamba_group_hits_only_up_to_a_state_its_stores_named(reported):
    """vLLM's hybrid lookup with a Mamba group ("align" mode): every block of the prefix in full
    attention and a state at its last block, and a state is only where the group's stores named one.
    `reported`: full mode's hit reports; without them (the default mode) the hit is read off the chain."""
    e = Engine()
    e.replay.add_group(KvGroup(1, "mamba", None, 16))
    e.batch(([1, 2, 3, 4], None, [4]))  # A's prompt in one chunk: a state at its end only
    e.batch()
    e.batch(([5], 4, [5]), dt=0.016)  # A's output block
    e.idle(40)
    e.batch(([1, 2, 3, 6, 7], None, [7]))  # B shares A's first 3 blocks, which hold no state: no hit
    e.idle(40)
    hit = [([1, 2, 3, 4, 5], None)] if reported else []
    e.batch(*hit, ([8, 9], 5, [9]))  # C, A's next turn: hits A's 5 blocks, to its last state
    e.idle(40)
    e.replay.flush()
    _, b, c = (part[0] for part in e.replay.take_model())
    assert b.tolist() == [INFINITE] * 5  # (its blocks 1-3 were cached in full attention)
    assert (c[:5] < INFINITE).all() and c[5:].tolist() == [INFINITE] * 2


def test_a_store_reads_its_blocks_owners_once_while_making_them_its_own():
    """A store's blocks were looked up in the owners' table three times (who held them: the evidence
    of a finish; who held the first: a readmission; then made this request's). Now once, by the swap
    that makes them its own, and its parent once; the evidence it gives is the same."""
    e = Engine()
    e.batch(([1, 2, 3], None))
    e.batch(([4, 5], 3))  # the same request's next chunk
    table = e.replay._owner
    read: list[int] = []
    for name in ("get", "put", "swap"):
        method = getattr(table, name, None)
        if method is None:
            continue

        def counted(keys, *args, method=method, **kwargs):
            read.append(len(keys))
            return method(keys, *args, **kwargs)

        setattr(table, name, counted)
    e.batch(([6, 7, 8, 9], 5))  # four new blocks chained onto the request
    assert sum(read) == 4 + 1  # the blocks and the parent, once each
    e.idle(3)
    e.batch(([10], 9), dt=0.016)  # its output block: the prompt's last block's owner is still it
    assert e.replay.counts.finished_by_evidence == 0
    out = e.requests()
    assert out == [([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [16] * 9 + [0])]
