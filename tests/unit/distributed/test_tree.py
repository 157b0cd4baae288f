"""A run of consecutive partitions analysed in one task and merged where it was analysed gives the
state of its partitions merged one by one; runs cut the partitions in order, by bytes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvset.core.partial_stack_merge import merge
from kvset.distributed.partitions import Partition, group_runs, plan_partitions
from kvset.distributed.tree import analyze_run, merge_states, parts_of, run_depth
from kvset.distributed.worker import ReadConfig, analyze_partition
from tests.support.paths import MOONCAKE_TRACE


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=1, max_size=40), st.integers(1, 9))
def test_runs_are_consecutive_partitions_of_about_equal_bytes(sizes, runs):
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    parts = [Partition(k, "t", int(bounds[k]), int(bounds[k + 1])) for k in range(len(sizes))]
    got = group_runs(parts, runs)
    assert [p for run in got for p in run] == parts and all(got) and len(got) <= runs
    total = sum(sizes)
    if total:
        # a partition joins the run its middle byte falls in: a run holds at most a share of the
        # bytes plus the partition that straddles its end
        share = total / runs
        assert all(sum(p.end - p.start for p in run) <= share + max(sizes) for run in got)


@pytest.mark.parametrize("cuts", [[1, 6], [7], [2, 2, 3]])
def test_runs_merged_where_they_were_analysed_are_the_partitions_merged(cuts):
    parts, _ = plan_partitions([str(MOONCAKE_TRACE)], sum(cuts))
    config = ReadConfig(horizon=1 << 22)
    alone = [analyze_partition(p, config) for p in parts]
    expected = alone[0]
    for s in alone[1:]:
        expected = merge(expected, s)
    steps: list[tuple[str, int]] = []
    runs, at = [], 0
    for n in cuts:
        one = len(cuts) == 1
        runs.append(analyze_run(parts[at : at + n], config, root=one, on_step=lambda *s: steps.append(s)))
        at += n
    state = runs[0]
    for k, run in enumerate(runs[1:]):
        state = merge_states(state, run, root=k == len(runs) - 2)
    got, want = state.curve(), expected.curve()
    assert np.array_equal(got.block_hits, want.block_hits) and np.array_equal(got.token_hits, want.token_hits)
    assert state.root_sizes == (len(expected.stack), len(expected.firsts)) and len(state.stack) == 0
    assert [p["partition"] for p in parts_of(state)] == [p.describe() for p in parts]
    assert [s for s in steps if s[0] == "partition"] == [("partition", 0)] * len(parts)
    local = [level for kind, level in steps if kind == "merge"]
    assert len(local) == len(parts) - len(cuts)  # a run of n partitions merges n - 1 times
    assert max(local, default=0) == max(run_depth(n) for n in cuts)  # a balanced tree each
    assert len(state.extra["merges"]) == len(parts) - 1
