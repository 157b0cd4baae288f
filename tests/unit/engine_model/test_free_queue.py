"""FreeQueue against a naive copy of vLLM's block pool, run once per pool size on the same schedule."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kvset.engine_model.free_queue import ABSENT, PIN, PINNED, QUERY, RELEASE, FreeQueue
from tests.support.block_pool import NaiveBlockPool


def random_schedule(seed: int, n_requests: int = 60):
    """Requests over a few shared documents: (admit | finish, request id, its block hashes)."""
    rng = random.Random(seed)
    docs = [[(d, i) for i in range(rng.randint(2, 12))] for d in range(rng.randint(1, 6))]
    chains, running, schedule = [], [], []
    for rid in range(n_requests):
        doc = rng.choice(docs)
        prefix = doc[: rng.randint(0, len(doc))]
        chain = prefix + [("own", rid, i) for i in range(rng.randint(1, 6))]
        chains.append(chain)
        schedule.append(("admit", rid))
        running.append(rid)
        while running and (len(running) > rng.randint(1, 4) or rng.random() < 0.3):
            schedule.append(("finish", running.pop(rng.randrange(len(running)))))
    schedule += [("finish", rid) for rid in running]
    return schedule, chains


def naive_hits(schedule, chains, usable: int):
    """Per admitted block, whether a pool of `usable` blocks had it cached; None if it could not run."""
    pool = NaiveBlockPool(usable)
    held, hits = {}, []
    for what, rid in schedule:
        if what == "finish":
            pool.free_blocks(held.pop(rid))
            continue
        chain = chains[rid]
        cached = [pool.cached(h) for h in chain]
        if not pool.can_admit([h for h, c in zip(chain, cached, strict=True) if c], cached.count(False)):
            return None
        held[rid] = [pool.touch(h) if c else pool.allocate(h) for h, c in zip(chain, cached, strict=True)]
        hits += cached
    return hits


def free_queue_positions(schedule, chains, horizon: int = 1 << 20):
    ops, keys = [], []
    key = {}
    for what, rid in schedule:
        chain = [key.setdefault(h, len(key) + 1) for h in chains[rid]]
        if what == "admit":
            for k in chain:
                ops += [QUERY, PIN]
                keys += [k, k]
        else:
            ops += [RELEASE] * len(chain)
            keys += chain[::-1]
    fq = FreeQueue(horizon)
    pos, pinned, forgot = fq.run(np.array(ops), np.array(keys, dtype=np.uint64))
    query = np.array(ops) == QUERY
    return pos[query], pinned[query], forgot, fq


@pytest.mark.parametrize("seed", range(120))
def test_positions_give_every_pool_size_at_once(seed):
    schedule, chains = random_schedule(seed)
    pos, pinned, _, fq = free_queue_positions(schedule, chains)
    compared = 0
    for usable in range(1, 80):
        expected = naive_hits(schedule, chains, usable)
        if expected is None:
            continue  # the schedule does not fit a pool this small
        got = (pos == PINNED) | ((pos > 0) & (pinned + pos <= usable))
        assert got.tolist() == expected, usable
        compared += 1
    assert compared > 10
    assert fq.pinned == 0  # everything finished


def test_forgets_the_oldest_release_beyond_the_horizon():
    schedule, chains = random_schedule(7)
    pos, pinned, forgot, fq = free_queue_positions(schedule, chains, horizon=5)
    assert fq.queued == 5
    assert len(forgot) > 0  # (a forgotten block stored again may be forgotten again)
    # a forgotten block reads as absent, like a new one; nothing beyond the horizon is ever reported
    assert pos.max() <= 5
    full, _, _, _ = free_queue_positions(schedule, chains)
    assert ((pos == ABSENT) >= (full == ABSENT)).all()
    assert (pos[full > 5] == ABSENT).all()


def test_growth_and_compaction_keep_the_positions():
    # many releases of many distinct blocks: the slot array compacts, the table grows
    ops, keys = [], []
    for r in range(3000):
        chain = list(range(r * 3, r * 3 + 3)) + [10**9]  # one block shared by all
        ops += [PIN] * 4 + [RELEASE] * 4
        keys += chain + chain[::-1]
    fq = FreeQueue()
    fq.run(np.array(ops), np.array(keys, dtype=np.uint64))
    pos, pinned, _ = fq.run(np.array([QUERY] * 3), np.array([10**9, 2, 3 * 2999 + 2], dtype=np.uint64))
    # a chain is freed last block first: the last request freed 10**9, 8999, 8998, 8997 in that order
    assert pinned.tolist() == [0, 0, 0]
    assert pos[2] == 3  # 8999: after it came 8998 and 8997
    assert pos[0] == 4  # the shared block
    assert pos[1] == 9001  # request 0's block 2: then its 1 and 0, 8,997 blocks of later requests, and 10**9


def test_a_full_horizon_with_pinned_blocks_on_top_keeps_its_table_size():
    """A horizon of 2^k queued blocks and the pinned ones on top fit a table of 2^(k+1) cells (up to
    3/4 full): the table of a flood's 524,288 queued and 90,000 pinned blocks is 21 MiB, not 42."""
    horizon, pins = 1 << 12, 700
    fq = FreeQueue(horizon=horizon)
    released = np.arange(horizon, dtype=np.uint64)
    fq.run(np.full(horizon, PIN, np.int8), released)
    fq.run(np.full(horizon, RELEASE, np.int8), released)
    table = len(fq._tkeys)
    held = np.arange(horizon, horizon + pins, dtype=np.uint64)
    fq.run(np.full(pins, PIN, np.int8), held)
    assert (fq.queued, fq.pinned) == (horizon, pins)
    assert len(fq._tkeys) == table == 2 * horizon
    pos, pinned, _ = fq.run(np.full(2, QUERY, np.int8), np.array([horizon - 1, horizon], dtype=np.uint64))
    assert pos.tolist() == [1, PINNED] and pinned.tolist() == [pins, pins]


def test_a_full_horizon_takes_under_sixty_bytes_a_queued_block() -> None:
    """Slot numbers and Fenwick counts in int32: a flood's queue of 524,288 blocks is 29 MiB, not 37
    (issue 25's RSS). The positions stay right past the int16 range of slots."""
    horizon = 1 << 16
    fq = FreeQueue(horizon=horizon)
    released = np.arange(horizon, dtype=np.uint64)
    fq.run(np.full(horizon, PIN, np.int8), released)
    fq.run(np.full(horizon, RELEASE, np.int8), released)
    assert fq.nbytes < 60 * horizon
    pos, _, _ = fq.run(np.full(2, QUERY, np.int8), np.array([horizon - 1, 0], dtype=np.uint64))
    assert pos.tolist() == [1, horizon]  # the newest release first, the oldest last
