"""A hybrid model's hit length across KV cache groups, against vLLM's rule applied naively per pool size."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.engine_model.free_queue import RELEASE
from kvset.engine_model.kv_groups import GroupCopies, KvGroup, joint_distances, twin_keys, window_max
from kvset.engine_model.records import OpenRequest


def naive_hit_blocks(full: list[int], others: list[tuple[KvGroup, list[int]]], pool: int) -> int:
    """vLLM's hybrid lookup at one pool size: the longest prefix of h blocks whose full-attention blocks
    all fit, and for each other group the blocks its kind needs before h (a window's last
    ceil((W - 1) / block_size), mamba's one state block)."""
    best = 0
    for h in range(1, len(full) + 1):
        if any(d > pool for d in full[:h]):
            break
        ok = True
        for group, d in others:
            if group.kind == "mamba":
                need = d[h - 1 : h]
            elif group.sliding_window:
                k = math.ceil((group.sliding_window - 1) / group.block_size)
                need = d[max(0, h - k) : h]
            else:
                need = d[:h]
            ok = ok and all(x <= pool for x in need)
        if ok:
            best = h
    return best


_DIST = st.lists(st.integers(1, 30), min_size=1, max_size=25)


@settings(max_examples=300, deadline=None)
@given(
    _DIST,
    st.data(),
    st.sampled_from(
        [("sliding_window", 33), ("sliding_window", 17), ("mamba", None), ("full_attention", None)]
    ),
)
def test_each_block_is_a_hit_exactly_from_the_pool_size_vllms_lookup_serves_it(full, data, spec):
    kind, window = spec
    other = KvGroup(1, kind, window, 16)
    d_other = data.draw(st.lists(st.integers(1, 30), min_size=len(full), max_size=len(full)))
    d = joint_distances(np.array(full, np.int64), [(other, np.array(d_other, np.int64))])
    for pool in range(0, 32):
        assert int((d <= pool).sum()) == naive_hit_blocks(full, [(other, d_other)], pool)


def test_a_window_needs_only_its_blocks_before_the_hit_point():
    window = KvGroup(1, "sliding_window", 33, 16)  # ceil(32 / 16) = 2 blocks
    assert window.window_blocks == 2
    full = np.array([1, 1, 1, 1, 1], np.int64)
    behind = np.array([50, 50, 1, 1, 50], np.int64)  # evicted early behind the window, and the last one
    # at a pool of 1 the hit stops at 4 blocks (blocks 2, 3 in the window); with all 5 it needs 50
    assert joint_distances(full, [(window, behind)]).tolist() == [1, 1, 1, 1, 50]
    assert window_max(behind, 2).tolist() == [50, 50, 50, 1, 50]


def test_group_keys_keep_each_groups_copy_of_a_block_apart():
    keys = np.arange(1, 1001, dtype=np.uint64)
    one, two = twin_keys(keys, KvGroup(1, None, None, 16)), twin_keys(keys, KvGroup(2, None, None, 16))
    assert len(set(keys.tolist()) | set(one.tolist()) | set(two.tolist())) == 3000
    assert twin_keys(one, KvGroup(1, None, None, 16)).tolist() == keys.tolist()


def releases_into(released: list[int]):
    """A free-queue runner that only notes the blocks released, in order."""

    def run(ops: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        released.extend(keys[ops == RELEASE].tolist())
        return np.zeros(len(keys), np.int64), np.zeros(len(keys), np.int64)

    return run


def test_a_running_window_holds_the_blocks_vllm_keeps_for_its_next_token():
    """vLLM's SlidingWindowManager frees the blocks before the next token's window as the request runs
    (get_num_skipped_tokens: L - W + 1 of L computed tokens are behind it): what the replay keeps
    pinned of a request that computed whole blocks is the rest, freed last block first."""
    block, window = 16, 64 + 1  # ceil((W - 1) / 16) = 4 blocks
    group = KvGroup(1, "sliding_window", window, block)
    copies = GroupCopies()
    copies.add(group)
    released: list[int] = []
    run = releases_into(released)

    request = OpenRequest(0, np.empty(0, np.uint64), np.empty(0, np.int64), None, 0, 0)
    prompt, output = np.arange(1, 11, dtype=np.uint64), np.arange(11, 14, dtype=np.uint64)
    copies.pin(request, prompt, False, run)  # a prefill of 10 whole blocks, then 3 output blocks
    for key in output:
        copies.step(run, 0)  # (each output block is computed in a later step)
        copies.pin(request, np.array([key]), False, run)
    copies.step(run, 0)
    computed = (len(prompt) + len(output)) * block
    behind = (computed - window + 1) // block  # blocks wholly before the next token's window
    everything = twin_keys(np.concatenate([prompt, output]), group).tolist()
    assert request.twin_held[1] == everything[behind:]
    assert sorted(released) == sorted(everything[:behind])
    assert released[: len(prompt) - 4] == everything[: len(prompt) - 4][::-1]  # the prefill's, last first


def test_blocks_behind_a_window_are_freed_at_the_next_step_after_the_requests_that_finished():
    """vLLM frees a running request's blocks behind its window in its next allocate_slots
    (remove_skipped_blocks at the start of the next step), and a finished request's blocks in
    update_from_output at the end of the step it finished in: so in the free queue the finished
    request's blocks come before (are older than) the window's, and a request that finishes first
    frees its whole table once, last block first."""
    group = KvGroup(1, "sliding_window", 64 + 1, 16)  # 4 blocks
    copies = GroupCopies()
    copies.add(group)
    released: list[int] = []
    run = releases_into(released)

    def request(rid: int) -> OpenRequest:
        return OpenRequest(rid, np.empty(0, np.uint64), np.empty(0, np.int64), None, 0, 0)

    running, finishing = request(0), request(1)
    copies.pin(finishing, np.arange(101, 103, dtype=np.uint64), False, run)
    prompt = np.arange(1, 11, dtype=np.uint64)
    copies.pin(running, prompt, False, run)  # its prefill in this step: 6 blocks fall behind
    assert released == []  # still held in the step that computed them
    copies.release(finishing, run)  # it finished at the end of this step
    copies.step(run, 0)  # the next step starts
    twins = twin_keys(prompt, group).tolist()
    assert released == twin_keys(np.array([102, 101], np.uint64), group).tolist() + twins[:6][::-1]

    released.clear()
    short = request(2)
    copies.pin(short, prompt, False, run)
    copies.release(short, run)  # finished before its next step: its whole table, once
    copies.step(run, 0)
    assert released == twins[::-1]


def test_a_mamba_group_holds_only_the_states_its_stores_name_and_frees_them_as_the_request_runs():
    """vLLM's MambaManager in "align" mode keeps a state only at the blocks its group's BlockStored
    names (a computed chunk's end, each output block). A running request's next step reads the newest
    (copies it on) and the step after frees it (remove_skipped_blocks); a hit's state is read by the
    step that admits it and freed at the next."""
    group = KvGroup(1, "mamba", None, 16)
    copies = GroupCopies()
    copies.add(group)
    released: list[int] = []
    run = releases_into(released)
    request = OpenRequest(0, np.empty(0, np.uint64), np.empty(0, np.int64), None, 0, 0)

    def twins(*keys: int) -> list[int]:
        return twin_keys(np.array(keys, np.uint64), group).tolist()

    prompt = np.arange(1, 9, dtype=np.uint64)
    copies.stored(1, np.array([4, 8], np.uint64), 0)  # states at blocks 4 and 8
    copies.stored(1, np.array([20], np.uint64), 0)  # another request's, in the same batch
    copies.step(run, 0)
    copies.pin(request, prompt, False, run)
    assert request.twin_held[1] == twins(8)
    copies.stored(1, np.array([9], np.uint64), 1)  # an output block, the next step
    copies.step(run, 1)
    assert released == twins(4) and request.twin_held[1] == []  # 8 is read in this step
    assert len(copies.states) == 1  # 20 was named in a batch gone by, its store never replayed: dropped
    copies.pin(request, np.array([9], np.uint64), False, run)
    copies.step(run, 2)
    assert released == twins(4, 8)
    copies.release(request, run)  # it finished: 9, which the next step would have read, goes too
    copies.step(run, 3)
    assert released == twins(4, 8, 9) and len(copies.states) == 0

    released.clear()
    hit = OpenRequest(1, prompt, np.full(8, 16, np.int64), None, 3, 3)
    copies.pin(hit, prompt, True, run)  # the state at the hit's last block only
    copies.pin(hit, np.array([30, 31], np.uint64), False, run)  # its chunk ends inside a block: no state
    copies.step(run, 4)
    assert released == twins(8)
