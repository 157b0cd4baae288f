"""What a worker does with one partition: read its own bytes, parse them, analyse them from an empty
stack, and hand back the partial state (numpy arrays) with what it read. No Dask here: the driver
submits these functions, and the tests call them directly."""

from __future__ import annotations

import contextlib
import resource
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

from kvset.core.partial_stack import PartialStack, PartitionAnalyzer, empty_stack
from kvset.distributed.partitions import Partition, PartitionError, open_partition
from kvset.formats.byte_input import TraceError
from kvset.formats.stream import NeedsWholeTrace, TraceStream
from kvset.rejects import RejectCounter


@dataclass(frozen=True)
class ReadConfig:
    """How every partition is read and analysed: the one-process run's flags, the format and the
    block size settled once for all partitions (on the first one's first requests)."""

    horizon: int
    order: str = "forward"
    format: str | None = None
    block_size: int | None = None
    strict: bool = False
    hash_algo: str = "sha256"
    python_hash_seed: str | None = None
    sample_rate: float | None = None
    seed: int = 0


def _stream(part: Partition, config: ReadConfig, reader) -> TraceStream:
    return TraceStream(
        reader,
        format=config.format,
        block_size=config.block_size,
        strict=config.strict,
        hash_algo=config.hash_algo,
        python_hash_seed=config.python_hash_seed,
        exact=True,
    )


def settle_reading(part: Partition, config: ReadConfig) -> tuple[ReadConfig, list[str]]:
    """The format and block size the one-process stream settles on its first requests, read from the
    first partition's head, so that every partition reads its lines alike; and the notes saying so."""
    reader, _ = open_partition(part)
    with reader:
        stream = _stream(part, config, reader)
        with contextlib.suppress(NeedsWholeTrace, TraceError):  # its own analysis will say what is wrong
            next(iter(stream), None)
        notes = list(stream.parser.notes)
        return replace(config, format=stream.format or config.format, block_size=stream.block_tokens), notes


def _peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _analyzer(config: ReadConfig, block_tokens: int | None) -> Any:
    if config.sample_rate is not None:
        from kvset.core.partial_sample import SamplePartitionAnalyzer

        return SamplePartitionAnalyzer(config.horizon, config.order, config.sample_rate, config.seed)
    return PartitionAnalyzer(config.horizon, config.order, block_tokens)


def analyze_partition(part: Partition, config: ReadConfig) -> Any:
    """The partition's partial state (a PartialStack, or a PartialSample with a sample rate); its
    `extra` says what was read (lines, requests, rejections, notes), in how long, and the worker's
    peak memory."""
    t0, cpu0 = time.perf_counter(), time.thread_time()
    reader, size = open_partition(part)
    with reader:
        stream = _stream(part, config, reader)
        partition = _analyzer(config, config.block_size)
        try:
            for batch in stream:
                partition.feed_batch(batch)
        except NeedsWholeTrace as why:
            raise PartitionError(
                f"{part.describe()}: {why}: this input cannot be analysed in partitions (run without workers)"
            ) from None
        except TraceError as e:
            # a partition without any request is an empty state (the driver refuses input without any)
            if config.strict or stream.requests:
                raise PartitionError(f"{part.describe()}: {e}") from None
        state = partition.state() if stream.requests else _empty(config)
    extra = {
        "partition": part.describe(),
        "bytes": size,
        "lines": stream.lines,
        "requests": stream.requests,
        "rejects": stream.rejects,
        "warnings": stream.warnings if isinstance(stream.warnings, RejectCounter) else RejectCounter(),
        "notes": list(stream.notes),
        "format": stream.format,
        "block_tokens": stream.block_tokens,
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.thread_time() - cpu0,  # this thread's: the read, the parse and the analysis
        "peak_rss_bytes": _peak_rss_bytes(),
        "state_bytes": state.nbytes(),
    }
    return replace(state, extra=extra)


def _empty(config: ReadConfig) -> PartialStack | Any:
    if config.sample_rate is not None:
        from kvset.core.partial_sample import empty_sample

        return empty_sample(config.horizon, config.sample_rate, config.seed)
    return empty_stack(config.horizon)
