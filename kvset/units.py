"""The units of one access stream, with their one owner: the source that reads the stream.

A block of a stream covers `block_size` tokens (vLLM's name for it; SGLang calls it the page size).
Every figure in tokens or bytes multiplies by it, and every engine pool in engine blocks is turned
into the stream's blocks with it, so it is decided once, by the source, before the analyzer sees a
single access, and handed to the analyzer when it is built. It is never learned from a batch.

`block_size_from` says who decided it, so a report can say why it believes the number:

- "flag": the user gave `--block-size`;
- "event": the engine's KV events carry it (vLLM's `BlockStored.block_size`);
- "metrics": the engine's `/metrics` says it (vLLM's `cache_config_info{block_size}`);
- "format": the trace format's own convention (Mooncake 512, Bailian 16);
- "inferred": read off the trace's own lines (`len(hash_ids)` against `input_length`);
- "default": nothing said it; vLLM's default is assumed (and the reports say so).

Streams whose block keys are hashed by kvset from token ids (a token-id trace, an engine log) also
carry the hash: vLLM's `prefix_caching_hash_algo` and the engine's PYTHONHASHSEED, if it had one.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_BLOCK_SIZE = 16  # vLLM's default block size (tokens per block), assumed only where nothing says
DEFAULT_HASH_ALGO = "sha256"  # vLLM's default prefix_caching_hash_algo

BLOCK_SIZE_ORIGINS = ("flag", "event", "metrics", "format", "inferred", "default")

# How a hash-id trace counts a prompt's blocks (see kvset.formats.block_size):
CEIL = "ceil"  # a hash for a trailing partial block too: len(hash_ids) == ceil(input_length / b)
FLOOR = "floor"  # full blocks only: len(hash_ids) == input_length // b (WEKA's traces)


@dataclass(frozen=True)
class StreamUnits:
    block_size: int  # tokens per block
    block_size_from: str  # one of BLOCK_SIZE_ORIGINS
    hash_algo: str | None = None  # for keys kvset hashes from token ids; None: the stream brings its keys
    hash_seed: str | None = None  # the engine's PYTHONHASHSEED (None: not set)
    convention: str | None = None  # hash-id traces: CEIL or FLOOR, as found or given

    def __post_init__(self) -> None:
        if int(self.block_size) < 1:
            raise ValueError(f"a block holds at least one token, not {self.block_size!r}")
        if self.block_size_from not in BLOCK_SIZE_ORIGINS:
            raise ValueError(f"unknown origin of a block size: {self.block_size_from!r}")
        if self.convention not in (None, CEIL, FLOOR):
            raise ValueError(f"unknown block-count convention: {self.convention!r}")

    def describe(self) -> str:
        """'16 tokens per block (from the KV events)', for the reports' header lines."""
        origin = {
            "flag": "--block-size",
            "event": "from the KV events",
            "metrics": "from the engine's /metrics",
            "format": "the trace format's",
            "inferred": "inferred from the trace",
            "default": "assumed: vLLM's default",
        }[self.block_size_from]
        text = f"{self.block_size:,} tokens per block ({origin}"
        if self.convention == FLOOR:
            text += "; full blocks only"
        return text + ")"


# The units of a stream nothing said anything about: vLLM's default block size, assumed.
DEFAULT_UNITS = StreamUnits(DEFAULT_BLOCK_SIZE, "default")

# vLLM's block pool keeps one block as its null block: counted in num_gpu_blocks, never cached.
NULL_BLOCKS_VLLM = 1


@dataclass(frozen=True)
class EnginePool:
    """One engine's KV block pool (one data-parallel rank's), as that engine counts it.

    vLLM's names: `num_gpu_blocks` blocks of `block_size` tokens each. `null_blocks` of them never
    hold a cached prefix (vLLM: its null block). `engine` is the engine's label where the engine
    gives one (vLLM's `engine` label, the data-parallel rank), "" where there is one engine.
    """

    num_gpu_blocks: int
    block_size: int
    null_blocks: int = 0
    engine: str = ""

    def __post_init__(self) -> None:
        if int(self.block_size) < 1 or int(self.num_gpu_blocks) < 0 or int(self.null_blocks) < 0:
            raise ValueError(
                f"not a block pool: {self.num_gpu_blocks!r} blocks of {self.block_size!r} tokens"
            )

    @property
    def tokens(self) -> int:
        """The tokens the whole pool holds, the null block included (what the engine reports)."""
        return self.num_gpu_blocks * self.block_size

    def in_stream_blocks(self, units: StreamUnits) -> int:
        """The pool as a cache of the stream's blocks: the blocks that can hold a cached prefix, in
        tokens, over the stream's block size. The one place a pool changes units."""
        usable = max(0, self.num_gpu_blocks - self.null_blocks)
        return usable * self.block_size // units.block_size
