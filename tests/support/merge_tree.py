"""Partial states merged in a random bracketing: every tree shape an ordered reduction might take."""

from collections.abc import Callable
from typing import TypeVar

import numpy as np

S = TypeVar("S")


def merge_in_random_tree(states: list[S], merge: Callable[[S, S], S], rng: np.random.Generator) -> S:
    """Neighbours merged in a random order until one state is left (the order of the states kept)."""
    states = list(states)
    while len(states) > 1:
        i = int(rng.integers(0, len(states) - 1))
        states[i : i + 2] = [merge(states[i], states[i + 1])]
    return states[0]
