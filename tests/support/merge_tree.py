"""Partial states merged in a random bracketing: every tree shape an ordered reduction might take."""

from collections.abc import Callable
from typing import TypeVar

import numpy as np

S = TypeVar("S")


def merge_in_random_tree(
    states: list[S],
    merge: Callable[[S, S], S],
    rng: np.random.Generator,
    last: Callable[[S, S], S] | None = None,
) -> S:
    """Neighbours merged in a random order until one state is left (the order of the states kept);
    last: the merge of the last two (the tree's root), `merge` by default."""
    states = list(states)
    while len(states) > 1:
        i = int(rng.integers(0, len(states) - 1))
        both = last if last is not None and len(states) == 2 else merge
        states[i : i + 2] = [both(states[i], states[i + 1])]
    return states[0]
