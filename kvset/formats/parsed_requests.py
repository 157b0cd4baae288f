"""Requests decoded from trace lines, held as arrays: one uint64 key and its tokens per access,
request boundaries, timestamps, line numbers and principals per request (kvset.formats.trace_lines
makes them, a chunk of lines at a time)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvset.types import PRINCIPAL_LEVELS


class RequestArrays:
    """What requests held as arrays (keys, request_starts) can say about themselves."""

    keys: np.ndarray
    request_starts: np.ndarray

    @property
    def requests(self) -> int:
        return len(self.request_starts)

    @property
    def accesses(self) -> int:
        return len(self.keys)

    def request_lengths(self) -> np.ndarray:
        """Accesses per request."""
        return np.diff(np.append(self.request_starts, len(self.keys)))


@dataclass(frozen=True, eq=False)
class ParsedRequests(RequestArrays):
    """Requests decoded from some lines, in line order (not sorted by time)."""

    keys: np.ndarray  # uint64, one per access
    tokens: np.ndarray  # int32, tokens each access covers
    request_starts: np.ndarray  # int64 index into keys where each request starts
    request_timestamps: np.ndarray  # float64 seconds; NaN where the line had no timestamp
    request_lines: np.ndarray  # int64, 1-based line number of each request
    # int64 input_length of each request as written (token traces: tokens); -1 where the line gave
    # its blocks' tokens explicitly (block_tokens, or its own block_size), so no block size is implied
    request_input_lengths: np.ndarray
    # int32 (requests, len(PRINCIPAL_LEVELS)): each request's principal id at each level, ids of the
    # parser's PrincipalNames (0: unknown); None: no line of these requests named one
    request_principals: np.ndarray | None = None

    @staticmethod
    def empty() -> ParsedRequests:
        return ParsedRequests(
            np.empty(0, np.uint64),
            np.empty(0, np.int32),
            np.empty(0, np.int64),
            np.empty(0, np.float64),
            np.empty(0, np.int64),
            np.empty(0, np.int64),
        )

    @staticmethod
    def concat(parts: list[ParsedRequests]) -> ParsedRequests:
        parts = [p for p in parts if p.requests]
        if not parts:
            return ParsedRequests.empty()
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [p.accesses for p in parts[:-1]])
        return ParsedRequests(
            keys=np.concatenate([p.keys for p in parts]),
            tokens=np.concatenate([p.tokens for p in parts]),
            request_starts=np.concatenate(
                [p.request_starts + off for p, off in zip(parts, offsets, strict=True)]
            ),
            request_timestamps=np.concatenate([p.request_timestamps for p in parts]),
            request_lines=np.concatenate([p.request_lines for p in parts]),
            request_input_lengths=np.concatenate([p.request_input_lengths for p in parts]),
            request_principals=None
            if all(p.request_principals is None for p in parts)
            else np.concatenate([p.principals_or_unknown() for p in parts]),
        )

    def reordered(self, order: np.ndarray) -> ParsedRequests:
        """The same requests in `order`; keys and tokens move with their request."""
        lengths = self.request_lengths()[order]
        new_starts = np.zeros(len(order), dtype=np.int64)
        np.cumsum(lengths[:-1], out=new_starts[1:])
        # Access i of the new layout comes from old position i - (new start - old start) of its request.
        source = np.arange(self.accesses, dtype=np.int64) + np.repeat(
            self.request_starts[order] - new_starts, lengths
        )
        return ParsedRequests(
            keys=self.keys[source],
            tokens=self.tokens[source],
            request_starts=new_starts,
            request_timestamps=self.request_timestamps[order],
            request_lines=self.request_lines[order],
            request_input_lengths=self.request_input_lengths[order],
            request_principals=None if self.request_principals is None else self.request_principals[order],
        )

    def principals_or_unknown(self) -> np.ndarray:
        """request_principals, all unknown (0) where the lines named none."""
        if self.request_principals is not None:
            return self.request_principals
        return np.zeros((self.requests, len(PRINCIPAL_LEVELS)), dtype=np.int32)

    def access_principals(self) -> np.ndarray | None:
        """Each access's principal ids (its request's), None where no line named one."""
        if self.request_principals is None:
            return None
        return np.repeat(self.request_principals, self.request_lengths(), axis=0)


def split_tokens(input_lengths: np.ndarray, counts: np.ndarray, block: np.ndarray | int) -> np.ndarray:
    """Tokens each access covers: access j of a request covers the tokens of input_length that fall
    in block j; all but the last are full, the last may be partial, the sum is
    min(input_length, n * block). int32, one per access."""
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    total = int(counts.sum())
    position = np.arange(total, dtype=np.int64) - np.repeat(starts, counts)
    per_block = np.repeat(np.asarray(block, dtype=np.int64), counts) if np.ndim(block) else np.int64(block)
    remaining = np.repeat(np.asarray(input_lengths, dtype=np.int64), counts) - position * per_block
    return np.clip(remaining, 0, per_block).astype(np.int32)
