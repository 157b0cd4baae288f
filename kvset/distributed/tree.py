"""The ordered tree of merges: one merge with the partitions' extras carried along, and a run of
consecutive partitions analysed in one task and reduced where they were analysed.

A worker given a run of consecutive partitions analyses them one after the other and merges their
states as it goes, like a binary counter: two states of as many partitions merge as soon as both are
there, so the worker's merges form the balanced ordered tree of its run, and it holds at most
log2 k states besides the partition it is analysing. Only the run's state leaves the worker, to the
ordered tree across the runs (kvset.distributed.driver). No Dask here: the tests call these directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kvset.core import partial_stack_merge
from kvset.core.partial_stack import PartialStack
from kvset.distributed.partitions import Partition
from kvset.distributed.worker import ReadConfig, analyze_partition

# told of each step of a run: ("partition", 0) when one is analysed, ("merge", round) when two merge
OnStep = Callable[[str, int], None]


def _merge_core(a: Any, b: Any, root: bool, laps: dict[str, float]) -> Any:
    if isinstance(a, PartialStack):
        return partial_stack_merge.merge(a, b, root=root, laps=laps)
    from kvset.core import partial_sample_merge

    return partial_sample_merge.merge(a, b)


def merge_states(a: Any, b: Any, root: bool = False) -> Any:
    """One merge of the tree: the core merge (root: the tree's last, whose state keeps no stack), the
    partitions' extras carried along (in order) with the time the merge took (CPU seconds by phase
    too) and its round (one more than its deeper input's)."""
    t0, cpu0 = time.perf_counter(), time.thread_time()
    laps: dict[str, float] = {}
    merged = _merge_core(a, b, root, laps)
    level = 1 + max(a.extra.get("round", 0), b.extra.get("round", 0))
    merges = [*a.extra.get("merges", []), *b.extra.get("merges", [])]
    took, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    merges.append(
        {
            "round": level,
            "seconds": took,
            "cpu_seconds": cpu,
            "bytes_in": a.nbytes() + b.nbytes(),
            "phases": laps,
        }
    )
    extra = {"parts": parts_of(a) + parts_of(b), "round": level, "merges": merges}
    return replace(merged, extra=extra)


def parts_of(state: Any) -> list[dict[str, Any]]:
    """The extras of the partitions a state was merged from, in stream order."""
    return state.extra.get("parts", [state.extra])


def run_depth(k: int) -> int:
    """The rounds of the ordered tree over k states (a run's, or the runs')."""
    return max(0, (k - 1).bit_length())


def analyze_run(
    parts: list[Partition], config: ReadConfig, root: bool = False, on_step: OnStep | None = None
) -> Any:
    """The merged state of consecutive partitions, analysed in order and merged as they come (see the
    module); root: the run is the whole input, its last merge the tree's root."""
    pending: list[tuple[int, Any]] = []  # (partitions merged in it, state), oldest first
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        state = analyze_partition(part, config, root and len(parts) == 1)
        if on_step is not None:
            on_step("partition", 0)
        size = 1
        # the last partition's merges are left to the fold below, which knows the root
        while not last and pending and pending[-1][0] == size:
            state = _merged(pending.pop()[1], state, False, on_step)
            size *= 2
        pending.append((size, state))
    state = pending.pop()[1]
    while pending:  # the rest, newest first: an ordered tree of what the counter left
        state = _merged(pending.pop()[1], state, root and not pending, on_step)
    return state


def _merged(a: Any, b: Any, root: bool, on_step: OnStep | None) -> Any:
    merged = merge_states(a, b, root)
    if on_step is not None:
        on_step("merge", merged.extra["round"])
    return merged
