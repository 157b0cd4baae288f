"""Which block size a hash-id trace was made with, told from its own lines.

A Mooncake or Bailian line says how many blocks its prompt has (len(hash_ids)) and how many
tokens (input_length); with blocks of b tokens, len(hash_ids) = ceil(input_length / b). Read with
the wrong b, every token count is wrong (a 64-token trace read as 512 tokens per block gives 99.9 %
instead of 96 % token hit rate), so the reader checks the rule on every line and, when most lines
break it, finds the block size they keep.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Engines use powers of two; 1 (SGLang's page size) to 16k tokens.
CANDIDATES = tuple(1 << k for k in range(15))
FITS_WELL = 0.9  # a block size that fits this share of requests is the trace's
FITS_BADLY = 0.5  # the block size in use fits fewer: it is wrong
MIN_REQUESTS = 50  # fewer say too little to read a trace with another block size than it was given


@dataclass(frozen=True)
class BlockSizeCheck:
    block_tokens: int  # the block size in use
    fit: float  # share of the checked requests that keep the rule with it
    best: int  # the candidate that fits most requests
    best_fit: float
    checked: int  # requests whose line leaves the block size to the reader

    @property
    def wrong(self) -> bool:
        return self.checked >= MIN_REQUESTS and self.fit < FITS_BADLY

    @property
    def better_known(self) -> bool:
        """A block size is wrong and another one clearly fits."""
        return self.wrong and self.best != self.block_tokens and self.best_fit >= FITS_WELL

    def describe(self) -> str:
        return (
            f"{self.block_tokens} tokens per block fits {self.fit:.1%} of {self.checked:,} requests "
            f"(len(hash_ids) = ceil(input_length / block size)); {self.best} fits {self.best_fit:.1%}"
        )


def fit_share(input_lengths: np.ndarray, counts: np.ndarray, block: int) -> float:
    if not len(counts):
        return 1.0
    return float(np.mean(-(-input_lengths // block) == counts))


def check_block_size(input_lengths: np.ndarray, counts: np.ndarray, block_tokens: int) -> BlockSizeCheck:
    """input_lengths: per request, -1 where the line set its own block size (not checked)."""
    checked = input_lengths >= 0
    lengths, blocks = input_lengths[checked], counts[checked]
    fit = fit_share(lengths, blocks, block_tokens)
    shares = [fit_share(lengths, blocks, c) for c in CANDIDATES]
    i = int(np.argmax(shares))  # ties: the smallest candidate
    return BlockSizeCheck(block_tokens, fit, CANDIDATES[i], shares[i], int(checked.sum()))
