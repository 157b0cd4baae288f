"""JSONL trace lines -> requests of uint64 block keys, a chunk of lines at a time.

Three formats (docs/formats.md, sections 2-4):
- mooncake: {"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [...]},
  512 tokens per block (a trace of another block size, or counting full blocks only, is told from
  its lines: kvset.formats.block_size);
- bailian: {"chat_id", "parent_chat_id", "timestamp": s, "input_length", "output_length", "type",
  "turn", "hash_ids": [...]}, 16 tokens per block;
- tokens: {"timestamp": s, "token_ids" | "prompt_token_ids": [...]}, keys hashed as vLLM does.

Each line is decoded by msgspec straight into a typed record (the validation happens in C);
the per-request arithmetic (tokens per access, key conversion) is done once per chunk with numpy,
so no Python object per access outlives its chunk.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Annotated

import msgspec
import numpy as np

from kvset.formats.block_size import RULES, blocks_of
from kvset.formats.byte_input import TraceError
from kvset.formats.names import FORMATS, HASH_ALGOS
from kvset.formats.parsed_requests import ParsedRequests, split_tokens
from kvset.formats.vllm_hash import block_keys
from kvset.rejects import RejectCounter
from kvset.types import PRINCIPAL_FIELDS, PRINCIPAL_LEVELS, PrincipalNames
from kvset.units import CEIL, DEFAULT_BLOCK_SIZE, DEFAULT_HASH_ALGO, StreamUnits

# Each hash-id format's own block size; token ids are hashed at vLLM's default unless told.
FORMAT_BLOCK_SIZES = {"mooncake": 512, "bailian": 16}
# Units of each format's "timestamp" field per second (divided, so 471 ms is exactly 0.471 s).
TIME_UNITS_PER_SECOND = {"mooncake": 1000.0, "bailian": 1.0, "tokens": 1.0}
UINT64_MAX = (1 << 64) - 1
# Timestamps beyond this many seconds from zero (about 3,000 years) are garbage, not time: they
# would stall the analyzer's time slots.
MAX_TIMESTAMP_SECONDS = 1e11


def _time_out_of_range(timestamp: float | None, units_per_second: float) -> bool:
    return timestamp is not None and not (
        math.isfinite(timestamp) and abs(timestamp / units_per_second) <= MAX_TIMESTAMP_SECONDS
    )


NonNegative = Annotated[int, msgspec.Meta(ge=0)]
# Token counts the arrays can hold (int32 per access); a request of 2^31 tokens is garbage anyway.
MAX_TOKENS = (1 << 31) - 1
TokenCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]
# vLLM and SGLang blocks are at most a few thousand tokens; a line claiming more is garbage.
MAX_BLOCK_SIZE = 1 << 20


class _HashRequest(msgspec.Struct):
    """A mooncake or bailian line; other fields (output_length, chat_id, type, turn...) are not needed."""

    input_length: TokenCount
    hash_ids: list[NonNegative]
    timestamp: float | None = None
    # Written by `kvset record` (live engines use their own block size, not Mooncake's 512):
    block_size: Annotated[int, msgspec.Meta(gt=0, le=MAX_BLOCK_SIZE)] | None = None
    block_tokens: list[TokenCount] | None = None  # tokens of each block, when not the regular split
    # whose request it is (kvset.types.PRINCIPAL_FIELDS): a tenant, a session, a LoRA adapter
    tenant: str | None = None
    session: str | None = None
    lora: str | None = None


class _TokenRequest(msgspec.Struct):
    token_ids: list[NonNegative] | None = None
    prompt_token_ids: list[NonNegative] | None = None
    timestamp: float | None = None
    tenant: str | None = None
    session: str | None = None
    lora: str | None = None


_HASH_DECODER = msgspec.json.Decoder(_HashRequest)
_TOKEN_DECODER = msgspec.json.Decoder(_TokenRequest)
_ANY_DECODER = msgspec.json.Decoder()
_INDEX = re.compile(r"\[\d+\]")


def detect_format(obj: object) -> str | None:
    """The format one decoded line belongs to, or None if it is none of ours."""
    if not isinstance(obj, dict):
        return None
    if "token_ids" in obj or "prompt_token_ids" in obj:
        return "tokens"
    if "hash_ids" in obj:
        # Only Bailian traces carry conversation structure.
        if "chat_id" in obj or "parent_chat_id" in obj or "turn" in obj:
            return "bailian"
        return "mooncake"
    return None


# What decoding a line can raise: msgspec's errors, and RecursionError for a value nested thousands
# of arrays deep (msgspec gives up on the depth, even in a field the schema skips).
UNDECODABLE = (msgspec.DecodeError, RecursionError)


def _classify(error: Exception) -> tuple[str, str]:
    """(reason, detail) for a line msgspec refused. The reason is a category, the detail names the spot."""
    message = str(error)
    if isinstance(error, RecursionError):
        return "nested too deeply", "a value nested deeper than the decoder follows"
    if not isinstance(error, msgspec.ValidationError):
        return "not JSON", f"not JSON ({message.removeprefix('JSON is malformed: ')})"
    where = message.rpartition(" - at ")[2] if " - at " in message else ""
    field = _INDEX.sub("[]", where.removeprefix("`$.").removesuffix("`"))
    if message.startswith("Object missing required field"):
        return f"missing field {message.rpartition(' ')[2]}", message
    if message.startswith("Expected `object`"):
        return "not a JSON object", message
    if ">= 0" in message:
        return f"negative {field or 'value'}", message
    if message.startswith("Number out of range") or "` <= " in message or "` < " in message:
        return f"number out of range ({field})", message
    return f"wrong type ({field})" if field else "wrong type", message


class TraceLineParser:
    """Incremental parser: feed it chunks of raw lines, get their requests as numpy arrays.

    The format is fixed at construction or detected from the first line that is one of ours.
    Rejected lines are counted in `rejects` (with their line numbers); requests kept despite a
    doubtful field (hash_ids count vs input_length) are counted in `warnings`. With strict=True
    either raises TraceError naming the line.

    block_size: the one given (--block-size), else the lines' own (`kvset record`), else the
    format's; a reader that settles another one from the lines calls `settle`. `units` says which.
    """

    def __init__(
        self,
        format: str | None,
        block_size: int | None = None,
        strict: bool = False,
        hash_algo: str = DEFAULT_HASH_ALGO,
        python_hash_seed: str | None = None,
    ) -> None:
        if format is not None and format not in FORMATS:
            raise ValueError(f"unknown trace format {format!r}; expected one of {', '.join(FORMATS)}")
        if block_size is not None and (isinstance(block_size, bool) or block_size <= 0):
            raise ValueError(f"block size must be a positive number of tokens, got {block_size!r}")
        if hash_algo not in HASH_ALGOS:
            raise ValueError(f"unknown hash algorithm {hash_algo!r}; expected one of {', '.join(HASH_ALGOS)}")
        self.format = format
        self.format_given = format is not None
        self.given_block_size = block_size
        self.inferred_block_size: int | None = None  # settled from the lines (kvset.formats.block_size)
        self.convention = CEIL  # how hash ids count a prompt's blocks, until the lines say otherwise
        self.strict = strict
        self.hash_algo = hash_algo
        self.python_hash_seed = python_hash_seed
        self.rejects = RejectCounter()
        self.warnings = RejectCounter()
        self.notes: list[str] = []
        self._looked = False  # whether a line was checked against the given format yet
        self.line_block_size: int | None = None  # block_size written in the lines (`kvset record`)
        self.principal_names = PrincipalNames()
        self._named_principals = False  # whether any line named a tenant, session or adapter

    @property
    def format_settled(self) -> bool:
        """The format is known, and a given one was checked against the first request."""
        return self.format is not None and (self._looked or not self.format_given)

    @property
    def block_size(self) -> int | None:
        """Tokens per full block (None until the format is known)."""
        if self.format is None:
            return None
        return (
            self.inferred_block_size
            or self.given_block_size
            or self.line_block_size
            or FORMAT_BLOCK_SIZES.get(self.format, DEFAULT_BLOCK_SIZE)
        )

    def settle(self, block_size: int, convention: str, inferred: bool) -> None:
        """Read on with this block size and convention (the block size check's answer)."""
        self.convention = convention
        if inferred:
            self.inferred_block_size = block_size

    @property
    def units(self) -> StreamUnits | None:
        """The units of the stream read so far (None until the format is known)."""
        block_size = self.block_size
        if block_size is None:
            return None
        if self.inferred_block_size:
            origin = "inferred"
        elif self.given_block_size:
            origin = "flag"
        elif self.line_block_size or self.format in FORMAT_BLOCK_SIZES:
            origin = "format"
        else:
            origin = "default"
        if self.format == "tokens":
            return StreamUnits(block_size, origin, self.hash_algo, self.python_hash_seed)
        return StreamUnits(block_size, origin, convention=self.convention)

    # -- bad input -------------------------------------------------------------------------

    def _principals_of(self, req: _HashRequest | _TokenRequest) -> tuple[int, ...]:
        """A request's principal id at each level (0 where its line did not say)."""
        names = tuple(getattr(req, PRINCIPAL_FIELDS[level]) for level in PRINCIPAL_LEVELS)
        if any(n is not None for n in names):
            self._named_principals = True
        return tuple(self.principal_names.id(n) for n in names)

    def _principal_array(self, rows: list[tuple[int, ...]]) -> np.ndarray | None:
        if not self._named_principals:
            return None
        return np.asarray(rows, dtype=np.int32).reshape(len(rows), len(PRINCIPAL_LEVELS))

    def _reject(self, reason: str, lineno: int, detail: str) -> None:
        example = f"line {lineno}: {detail}"
        if self.strict:
            raise TraceError(example)
        self.rejects.reject(reason, example, at=lineno)

    def _warn(self, reason: str, lineno: int, detail: str) -> None:
        example = f"line {lineno}: {detail}"
        if self.strict:
            raise TraceError(f"{example} ({reason.partition(';')[0]})")
        self.warnings.reject(reason, example, at=lineno)

    def _mismatch_reason(self, block: int) -> str:
        rule = RULES[self.convention].replace("len(hash_ids) = ", "").replace("block size", str(block))
        return f"hash_ids count is not {rule}; request kept"

    def warn_mismatch(
        self, block: int, lineno: int, ids: int, input_length: int, strict: bool = True
    ) -> None:
        """A request kept although its hash_ids count does not fit input_length and the block size.

        strict=False: counted even in strict mode (a block size inferred afterwards rechecks them)."""
        detail = f"{ids} hash_ids for input_length {input_length}"
        if strict:
            self._warn(self._mismatch_reason(block), lineno, detail)
        else:
            self.warnings.reject(self._mismatch_reason(block), f"line {lineno}: {detail}", at=lineno)

    def count_mismatches(self, block: int, n: int) -> None:
        """n more such requests, past the examples kept (not strict: strict stops at the first)."""
        self.warnings.reject(self._mismatch_reason(block), count=n)

    def _refused(self, line: bytes, lineno: int, error: Exception) -> None:
        if not line.strip():
            return  # blank lines carry nothing
        reason, detail = _classify(error)
        self._reject(reason, lineno, detail)

    # -- format detection ------------------------------------------------------------------

    def _detect(self, line: bytes, lineno: int) -> bool:
        """Look at one line before the format is known; True once it is."""
        try:
            obj = _ANY_DECODER.decode(line)
        except UNDECODABLE as e:
            self._refused(line, lineno, e)
            return False
        found = detect_format(obj)
        if found is None:
            if isinstance(obj, dict):
                self._reject(
                    "unrecognised object (no hash_ids, token_ids or prompt_token_ids)",
                    lineno,
                    "no hash_ids, token_ids or prompt_token_ids",
                )
            else:
                self._reject("not a JSON object", lineno, f"expected an object, got {type(obj).__name__}")
            return False
        self.format = found
        self.notes.append(f"format {found} detected from line {lineno}")
        return True

    def _check_given_format(self, line: bytes) -> None:
        """Say so once when the first object looks like another format than the one given."""
        try:
            found = detect_format(_ANY_DECODER.decode(line))
        except UNDECODABLE:
            return
        if found is None:
            return
        self._looked = True
        if found != self.format:
            self.notes.append(f"the first request looks like {found}, read as {self.format} as requested")

    # -- parsing ---------------------------------------------------------------------------

    def feed_lines(self, lines: list[bytes], first_lineno: int) -> ParsedRequests:
        """Parse consecutive raw lines; line i has number first_lineno + i (1-based)."""
        start = 0
        if self.format is None:
            while start < len(lines):
                found = self._detect(lines[start], first_lineno + start)
                if found:
                    break
                start += 1
            if self.format is None:
                return ParsedRequests.empty()
        elif self.format_given and not self._looked:
            for line in lines[:64]:
                self._check_given_format(line)
                if self._looked:
                    break
        if self.format == "tokens":
            return self._parse_tokens(lines, first_lineno, start)
        return self._parse_hashes(lines, first_lineno, start)

    def _parse_hashes(self, lines: list[bytes], first_lineno: int, start: int) -> ParsedRequests:
        block = self.block_size
        assert block is not None
        decode = _HASH_DECODER.decode
        id_lists: list[list[int]] = []
        input_lengths: list[int] = []
        stamps: list[float] = []
        linenos: list[int] = []
        line_blocks: list[int] = []  # tokens per block of each request (a line may carry its own)
        explicit: dict[int, list[int]] = {}  # request index -> tokens of each block, as written
        implied: list[int] = []  # input_length where the line leaves the block size to us, else -1
        principals: list[tuple[int, ...]] = []
        nan = math.nan
        for lineno, line in enumerate(lines[start:], first_lineno + start):
            try:
                req = decode(line)
            except UNDECODABLE as e:
                self._refused(line, lineno, e)
                continue
            ids = req.hash_ids
            n = len(ids)
            if n == 0:
                self._reject("empty hash_ids", lineno, "empty hash_ids")
                continue
            if _time_out_of_range(req.timestamp, TIME_UNITS_PER_SECOND[self.format or "mooncake"]):
                self._reject("timestamp out of range", lineno, f"timestamp {req.timestamp!r}")
                continue
            b = req.block_size or block
            if req.block_size and self.line_block_size is None:
                self.line_block_size = req.block_size
            if req.block_tokens is not None:
                if len(req.block_tokens) != n:
                    self._reject(
                        "block_tokens and hash_ids differ in length",
                        lineno,
                        f"{len(req.block_tokens)} block_tokens for {n} hash_ids",
                    )
                    continue
                explicit[len(id_lists)] = req.block_tokens
            elif n != blocks_of(req.input_length, b, CEIL if req.block_size else self.convention):
                self.warn_mismatch(b, lineno, n, req.input_length)
            line_blocks.append(b)
            id_lists.append(ids)
            input_lengths.append(req.input_length)
            implied.append(req.input_length if req.block_size is None and req.block_tokens is None else -1)
            stamps.append(nan if req.timestamp is None else req.timestamp)
            linenos.append(lineno)
            principals.append(self._principals_of(req))
        keys = self._hash_ids_to_keys(
            id_lists, input_lengths, stamps, linenos, line_blocks, implied, explicit, principals
        )
        if not id_lists:
            return ParsedRequests.empty()
        counts = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
        starts = np.zeros(len(counts), dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        tokens = split_tokens(np.asarray(input_lengths, dtype=np.int64), counts, np.asarray(line_blocks))
        for i, given in explicit.items():
            tokens[starts[i] : starts[i] + counts[i]] = given
        return ParsedRequests(
            keys=keys,
            tokens=tokens,
            request_starts=starts,
            request_timestamps=np.asarray(stamps, dtype=np.float64)
            / TIME_UNITS_PER_SECOND[self.format or "mooncake"],
            request_lines=np.asarray(linenos, dtype=np.int64),
            request_input_lengths=np.asarray(implied, dtype=np.int64),
            request_principals=self._principal_array(principals),
        )

    def _hash_ids_to_keys(
        self,
        id_lists: list[list[int]],
        input_lengths: list[int],
        stamps: list[float],
        linenos: list[int],
        line_blocks: list[int],
        implied: list[int],
        explicit: dict[int, list[int]],
        principals: list[tuple[int, ...]],
    ) -> np.ndarray:
        """All ids of the chunk as uint64; requests with an id above 2^64-1 are rejected (lists edited)."""
        total = sum(map(len, id_lists))
        try:
            return np.fromiter(itertools.chain.from_iterable(id_lists), dtype=np.uint64, count=total)
        except OverflowError:
            pass
        too_big = [i for i, ids in enumerate(id_lists) if max(ids) > UINT64_MAX]
        for i in too_big:
            self._reject("hash id above 2^64-1", linenos[i], "a hash id does not fit in 64 bits")
        for i in reversed(too_big):
            for column in (id_lists, input_lengths, stamps, linenos, line_blocks, implied, principals):
                del column[i]
        if explicit:  # renumber the explicit token lists past the dropped requests
            kept = [i for i in range(len(id_lists) + len(too_big)) if i not in set(too_big)]
            remap = {old: new for new, old in enumerate(kept)}
            moved = {remap[i]: v for i, v in explicit.items() if i in remap}
            explicit.clear()
            explicit.update(moved)
        total = sum(map(len, id_lists))
        return np.fromiter(itertools.chain.from_iterable(id_lists), dtype=np.uint64, count=total)

    def _parse_tokens(self, lines: list[bytes], first_lineno: int, start: int) -> ParsedRequests:
        block = self.block_size
        assert block is not None
        key_arrays: list[np.ndarray] = []
        stamps: list[float] = []
        linenos: list[int] = []
        lengths: list[int] = []
        principals: list[tuple[int, ...]] = []
        for lineno, line in enumerate(lines[start:], first_lineno + start):
            try:
                req = _TOKEN_DECODER.decode(line)
            except UNDECODABLE as e:
                self._refused(line, lineno, e)
                continue
            token_ids = req.token_ids if req.token_ids is not None else req.prompt_token_ids
            if token_ids is None:
                self._reject("missing field `token_ids`", lineno, "no token_ids or prompt_token_ids")
                continue
            if not token_ids:
                self._reject("empty token_ids", lineno, "empty token list")
                continue
            if _time_out_of_range(req.timestamp, TIME_UNITS_PER_SECOND["tokens"]):
                self._reject("timestamp out of range", lineno, f"timestamp {req.timestamp!r}")
                continue
            if len(token_ids) < block:
                self._reject(
                    f"prompt shorter than one block of {block} tokens (no full block to hash)",
                    lineno,
                    f"{len(token_ids)} tokens",
                )
                continue
            try:
                keys = block_keys(token_ids, block, self.hash_algo, self.python_hash_seed)
            except (OverflowError, ValueError) as e:  # a token id pickle/cbor cannot encode as vLLM would
                self._reject("token id cannot be hashed", lineno, str(e))
                continue
            key_arrays.append(keys)
            stamps.append(math.nan if req.timestamp is None else req.timestamp)
            linenos.append(lineno)
            lengths.append(len(token_ids))
            principals.append(self._principals_of(req))
        if not key_arrays:
            return ParsedRequests.empty()
        counts = np.fromiter(map(len, key_arrays), dtype=np.int64, count=len(key_arrays))
        starts = np.zeros(len(counts), dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        keys = np.concatenate(key_arrays)
        return ParsedRequests(
            keys=keys,
            tokens=np.full(len(keys), block, dtype=np.int32),
            request_starts=starts,
            request_timestamps=np.asarray(stamps, dtype=np.float64) / TIME_UNITS_PER_SECOND["tokens"],
            request_lines=np.asarray(linenos, dtype=np.int64),
            request_input_lengths=np.asarray(lengths, dtype=np.int64),
            request_principals=self._principal_array(principals),
        )
