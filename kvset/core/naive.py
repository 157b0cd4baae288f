"""The independent references: plain LRU and MIN caches simulated once per capacity.

Deliberately simple and slow (an OrderedDict, or a heap, per replay). `kvset verify` and the
tests compare the one-pass analyzers against them at every capacity they check.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence


def simulate_lru(keys: Sequence[int], capacity: int, tokens: Sequence[int] | None = None) -> tuple[int, int]:
    """Replay `keys` through an LRU cache of `capacity` blocks; return (block hits, token hits)."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits = token_hits = 0
    for i, key in enumerate(keys):
        key = int(key)
        if key in cache:
            cache.move_to_end(key)
            hits += 1
            token_hits += int(tokens[i]) if tokens is not None else 1
        else:
            if capacity <= 0:
                continue
            if len(cache) >= capacity:
                cache.popitem(last=False)
            cache[key] = None
    return hits, token_hits


def naive_curve(
    keys: Sequence[int], capacities: Iterable[int], tokens: Sequence[int] | None = None
) -> dict[int, tuple[int, int]]:
    """{capacity: (block hits, token hits)}, one full replay per capacity."""
    return _per_capacity(simulate_lru, keys, capacities, tokens)


def _per_capacity(
    simulate: Callable[[Sequence[int], int, Sequence[int] | None], tuple[int, int]],
    keys: Sequence[int],
    capacities: Iterable[int],
    tokens: Sequence[int] | None,
) -> dict[int, tuple[int, int]]:
    as_ints = [int(k) for k in keys]
    toks = [int(t) for t in tokens] if tokens is not None else None
    return {int(c): simulate(as_ints, int(c), toks) for c in capacities}


def simulate_min(keys: Sequence[int], capacity: int, tokens: Sequence[int] | None = None) -> tuple[int, int]:
    """Replay `keys` through Belady's MIN with `capacity` blocks; return (block hits, token hits).

    On a miss with a full cache the resident block whose next use is farthest away is evicted
    (never used again counts as farthest); the missed block is always inserted. A max-heap of
    next uses finds the victim; entries made stale by a hit are skipped when popped, and the heap
    is rebuilt from the residents when stale entries outnumber them, so a replay is O(N log C).
    """
    keys = [int(k) for k in keys]
    next_use = _next_uses(keys)
    resident: dict[int, int] = {}  # block -> its next use
    heap: list[tuple[int, int]] = []  # (-next use, block)
    hits = token_hits = 0
    for i, key in enumerate(keys):
        if key in resident:
            hits += 1
            token_hits += int(tokens[i]) if tokens is not None else 1
        elif capacity <= 0:
            continue
        elif len(resident) >= capacity:
            while True:
                negative, victim = heapq.heappop(heap)
                if resident.get(victim) == -negative:
                    del resident[victim]
                    break
        resident[key] = next_use[i]
        heapq.heappush(heap, (-next_use[i], key))
        if len(heap) > 2 * len(resident) + 16:
            heap = [(-use, block) for block, use in resident.items()]
            heapq.heapify(heap)
    return hits, token_hits


def _next_uses(keys: list[int]) -> list[int]:
    """The index of each access's next access to its block; len(keys) (later than all) if none."""
    n = len(keys)
    next_use = [n] * n
    upcoming: dict[int, int] = {}
    for i in range(n - 1, -1, -1):
        next_use[i] = upcoming.get(keys[i], n)
        upcoming[keys[i]] = i
    return next_use


def naive_min_distances(keys: Sequence[int]) -> list[int]:
    """MIN's stack distance of every access (0 = first access) by walking Mattson's priority stack
    as a list: the accessed block goes on top, and the block taken off the top is carried down,
    at each depth above the block's old one trading places with the block there when that one is
    used later, until it takes the old depth (the bottom for a first access)."""
    keys = [int(k) for k in keys]
    next_use = _next_uses(keys)
    stack: list[list[int]] = []  # [next use, block], top first
    out = []
    for i, key in enumerate(keys):
        depth = next((j for j, (_, block) in enumerate(stack) if block == key), len(stack))
        out.append(depth + 1 if depth < len(stack) else 0)
        if depth == len(stack):
            stack.append([next_use[i], key])
        carried, stack[0] = stack[0], [next_use[i], key]
        for j in range(1, depth):
            if stack[j][0] > carried[0]:
                stack[j], carried = carried, stack[j]
        if depth > 0:
            stack[depth] = carried
    return out


def naive_min_curve(
    keys: Sequence[int], capacities: Iterable[int], tokens: Sequence[int] | None = None
) -> dict[int, tuple[int, int]]:
    """{capacity: (block hits, token hits)} of MIN, one full replay per capacity."""
    return _per_capacity(simulate_min, keys, capacities, tokens)


def naive_stack_distances(keys: Sequence[int]) -> list[int]:
    """Stack distance of every access by walking an explicit LRU stack (0 = first access)."""
    stack: list[int] = []  # most recent last
    out = []
    for key in keys:
        key = int(key)
        try:
            pos = len(stack) - stack.index(key)
        except ValueError:
            out.append(0)
            stack.append(key)
            continue
        out.append(pos)
        stack.remove(key)
        stack.append(key)
    return out


def reverse_within_requests(keys: Sequence[int], request_starts: Sequence[int]) -> list[int]:
    """Each request's accesses last to first (accesses before the first start form a segment)."""
    keys = list(keys)
    bounds = sorted(set([0, *request_starts]))
    out: list[int] = []
    for a, b in zip(bounds, [*bounds[1:], len(keys)], strict=True):
        out.extend(reversed(keys[a:b]))
    return out


def simulate_tiers(
    keys: Sequence[int], capacities: Sequence[int], mode: str, tokens: Sequence[int] | None = None
) -> list[tuple[int, int]]:
    """Replay `keys` through cache tiers of `capacities` blocks, fastest first; return (block hits,
    token hits) served by each tier.

    exclusive: a block lives in one tier; a new or re-used block enters tier 1, and each tier that
    overflows demotes its least recently used block to the top of the next (the last one drops it).
    inclusive: every tier is an LRU cache of its own size that sees every access; an access is
    served by the fastest tier holding the block.
    """
    tiers: list[OrderedDict[int, None]] = [OrderedDict() for _ in capacities]
    served = [[0, 0] for _ in capacities]
    for i, key in enumerate(keys):
        key = int(key)
        weight = int(tokens[i]) if tokens is not None else 1
        where = next((k for k, t in enumerate(tiers) if key in t), None)
        if where is not None:
            served[where][0] += 1
            served[where][1] += weight
        if mode == "exclusive":
            if where is not None:
                del tiers[where][key]
            tiers[0][key] = None
            for k, t in enumerate(tiers):
                while len(t) > capacities[k]:
                    demoted, _ = t.popitem(last=False)
                    if k + 1 < len(tiers):
                        tiers[k + 1][demoted] = None
        elif mode == "inclusive":
            for k, t in enumerate(tiers):
                if key in t:
                    t.move_to_end(key)
                elif capacities[k] > 0:
                    if len(t) >= capacities[k]:
                        t.popitem(last=False)
                    t[key] = None
        else:
            raise ValueError(f"unknown tier mode {mode!r}")
    return [(b, t) for b, t in served]
