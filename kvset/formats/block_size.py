"""Which block size a hash-id trace was made with, and how it counts a prompt's blocks, told from its lines.

A Mooncake or Bailian line says how many blocks its prompt has (n = len(hash_ids)) and how many
tokens (L = input_length). Traces count the blocks of b tokens in one of two ways (kvset.units):

- CEIL, a hash for a trailing partial block too: n = ceil(L / b) (Mooncake, Bailian, `kvset record`);
- FLOOR, full blocks only: n = floor(L / b), the tokens past the last full block have no hash
  (WEKA's Claude Code traces, 64 tokens per block).

Read with the wrong b, every token count is wrong (a 64-token trace read as 512 tokens per block
gives 99.9 % instead of 96 % token hit rate, and its GiB are 8 times too many), so the reader
checks every line against both rules at every candidate size, and settles on the size and the
convention most lines keep (`settle`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvset.formats.byte_input import TraceError
from kvset.units import CEIL, FLOOR

# Engines use powers of two; 1 (SGLang's page size) to 16k tokens.
CANDIDATES = tuple(1 << k for k in range(15))
CONVENTIONS = (CEIL, FLOOR)  # ties go to the first: the formats' own convention
FITS_WELL = 0.9  # a block size that fits this share of requests is the trace's
FITS_BADLY = 0.5  # the block size in use fits fewer: it is wrong
MIN_REQUESTS = 50  # fewer say too little to read a trace with another block size than it was given

RULES = {
    CEIL: "len(hash_ids) = ceil(input_length / block size)",
    FLOOR: "len(hash_ids) = input_length // block size",
}


def blocks_of(input_lengths: np.ndarray | int, block_size: np.ndarray | int, convention: str) -> Any:
    """How many hash ids a prompt of each length has at `block_size` under `convention` (an int for
    ints, an array where either is one)."""
    if convention == FLOOR:
        return input_lengths // block_size
    return -(-input_lengths // block_size)


def fits(input_lengths: np.ndarray, counts: np.ndarray, block_size: int, convention: str) -> np.ndarray:
    """Per request: whether its hash-id count keeps the rule."""
    return blocks_of(input_lengths, block_size, convention) == counts


class FitCounts:
    """How many requests keep each rule at each candidate size (and at the size in use), added up a
    chunk at a time, so that a stream is judged on every request as a whole file would be."""

    def __init__(self, block_size: int) -> None:
        self.sizes = np.array([*CANDIDATES, block_size], dtype=np.int64)
        self.kept = np.zeros((len(CONVENTIONS), len(self.sizes)), dtype=np.int64)
        self.checked = 0

    def add(self, input_lengths: np.ndarray, counts: np.ndarray) -> None:
        """input_lengths: per request, -1 where the line set its own block size (not checked)."""
        implied = input_lengths >= 0
        lengths, blocks = input_lengths[implied], counts[implied]
        self.checked += len(lengths)
        if len(lengths):
            for c, convention in enumerate(CONVENTIONS):
                n = blocks_of(lengths[None, :], self.sizes[:, None], convention)
                self.kept[c] += (n == blocks[None, :]).sum(axis=1)

    def check(self) -> BlockSizeCheck:
        shares = self.kept / self.checked if self.checked else np.ones(self.kept.shape)
        in_use = shares[:, -1]
        # the convention the lines keep best at the size in use (ties: CEIL); too few requests keep CEIL
        c = int(np.argmax(in_use)) if self.checked >= MIN_REQUESTS else 0
        # the best (size, convention): most requests; ties: the smaller size, then CEIL
        flat = int(np.argmax(shares[:, :-1].T.ravel()))
        best, best_c = divmod(flat, len(CONVENTIONS))
        return BlockSizeCheck(
            block_size=int(self.sizes[-1]),
            convention=CONVENTIONS[c],
            fit=float(in_use[c]),
            best=CANDIDATES[best],
            best_convention=CONVENTIONS[best_c],
            best_fit=float(shares[best_c, best]),
            checked=self.checked,
        )


def check_block_size(input_lengths: np.ndarray, counts: np.ndarray, block_size: int) -> BlockSizeCheck:
    """input_lengths: per request, -1 where the line set its own block size (not checked)."""
    fit_counts = FitCounts(block_size)
    fit_counts.add(input_lengths, counts)
    return fit_counts.check()


@dataclass(frozen=True)
class BlockSizeCheck:
    block_size: int  # the block size in use
    convention: str  # the convention the lines keep best at it
    fit: float  # share of the checked requests that keep that rule with it
    best: int  # the candidate that fits most requests, under
    best_convention: str
    best_fit: float
    checked: int  # requests whose line leaves the block size to the reader

    @property
    def wrong(self) -> bool:
        return self.checked >= MIN_REQUESTS and self.fit < FITS_BADLY

    @property
    def better_known(self) -> bool:
        """The block size in use is wrong and another one clearly fits."""
        return self.wrong and self.best_fit >= FITS_WELL

    def describe(self) -> str:
        return (
            f"{self.block_size} tokens per block fits {self.fit:.1%} of {self.checked:,} requests "
            f"({RULES[self.convention]}); {self.best} fits {self.best_fit:.1%} ({RULES[self.best_convention]})"
        )


@dataclass(frozen=True)
class Settled:
    """What the reader reads a trace with, and what it says about it."""

    block_size: int
    convention: str
    inferred: bool  # read with another size than the one it started with
    note: str | None


class NoBlockSizeFits(TraceError):
    """No block size explains the lines: reading on would make every token count up."""


def settle(check: BlockSizeCheck, given: bool) -> Settled:
    """The block size and convention to read with, or an error with the fix.

    - the size in use fits (or too few requests to tell): it stays, with the convention its lines keep;
    - it does not, and another size fits well: that one, unless the size was given (--block-size),
      which is refused naming the size that fits;
    - no size fits well: refused, asking for the size the trace was made with; a size the user gave
      is kept with a note saying how badly it fits (the user has said what the trace is).
    """
    if not check.wrong:
        return Settled(check.block_size, check.convention, False, None)
    if check.better_known:
        if given:
            raise NoBlockSizeFits(
                f"--block-size {check.block_size} does not fit this trace: {check.describe()}: "
                f"give --block-size {check.best}"
            )
        note = (
            f"block size inferred from the lines: {check.describe()}; read with {check.best}"
            f"{'; full blocks only' if check.best_convention == FLOOR else ''} (give --block-size to override)"
        )
        return Settled(check.best, check.best_convention, True, note)
    if given:
        note = f"block size doubtful: {check.describe()}; read with --block-size {check.block_size} as given"
        return Settled(check.block_size, check.convention, False, note)
    raise NoBlockSizeFits(
        f"no block size fits this trace: {check.describe()}; give --block-size N, the tokens per block "
        "it was made with"
    )
