"""What a worker does with one partition: read its own bytes, parse them, analyse them from an empty
stack, and hand back the partial state (numpy arrays) with what it read. No Dask here: the driver
submits these functions, and the tests call them directly."""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

from kvset.core.partial_stack import PartialStack, PartitionAnalyzer, empty_stack
from kvset.core.partial_stack_merge import as_root
from kvset.distributed.partitions import Partition, PartitionError, open_partition
from kvset.formats.byte_input import TraceError
from kvset.formats.stream import NeedsWholeTrace, TraceStream
from kvset.rejects import RejectCounter
from kvset.units import StreamUnits


@dataclass(frozen=True)
class ReadConfig:
    """How every partition is read and analysed: the one-process run's flags. Each partition settles
    its format and units on its first requests; the driver checks that they all agree."""

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


def _peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _analyzer(config: ReadConfig, units: StreamUnits) -> Any:
    if config.sample_rate is not None:
        from kvset.core.partial_sample import SamplePartitionAnalyzer

        return SamplePartitionAnalyzer(
            config.horizon, config.order, config.sample_rate, config.seed, units=units
        )
    return PartitionAnalyzer(config.horizon, config.order, units)


def analyze_partition(part: Partition, config: ReadConfig, root: bool = False) -> Any:
    """The partition's partial state (a PartialStack, or a PartialSample with a sample rate); its
    `extra` says what was read (lines, requests, rejections, notes, the format and units it settled on
    its first requests, as one process settles them on the file's), in how long (this thread's CPU
    seconds in all, in the analyzer, and making the state: the rest is reading and parsing), and the
    worker's peak memory. The analyzer is made with the first batch: the stream's units are settled by
    then. root: the only partition, read as the whole analysis (no stack kept: partial_stack_merge)."""
    t0, cpu0 = time.perf_counter(), time.thread_time()
    reader, size = open_partition(part)
    partition = None
    analyse = 0.0
    with reader:
        stream = _stream(part, config, reader)
        try:
            for batch in stream:
                started = time.thread_time()
                if partition is None:
                    assert stream.units is not None
                    partition = _analyzer(config, stream.units)
                partition.feed_batch(batch)
                analyse += time.thread_time() - started
        except NeedsWholeTrace as why:
            raise PartitionError(
                f"{part.describe()}: {why}: this input cannot be analysed in partitions (run without workers)"
            ) from None
        except TraceError as e:
            # a partition without any request is an empty state (the driver refuses input without any)
            if config.strict or stream.requests:
                raise PartitionError(f"{part.describe()}: {e}") from None
        started = time.thread_time()
        state = partition.state() if partition is not None else _empty(config)
        if root and isinstance(state, PartialStack):
            state = as_root(state)
        made = time.thread_time() - started
    extra = {
        "partition": part.describe(),
        "bytes": size,
        "lines": stream.lines,
        "requests": stream.requests,
        "rejects": stream.rejects,
        "warnings": stream.warnings if isinstance(stream.warnings, RejectCounter) else RejectCounter(),
        "notes": list(stream.notes),
        "format": stream.format,
        "units": stream.units if stream.requests else None,
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.thread_time() - cpu0,  # this thread's: the read, the parse and the analysis
        "analyse_cpu_seconds": analyse,
        "state_cpu_seconds": made,
        "peak_rss_bytes": _peak_rss_bytes(),
        "state_bytes": state.nbytes(),
    }
    return replace(state, extra=extra)


def _empty(config: ReadConfig) -> PartialStack | Any:
    if config.sample_rate is not None:
        from kvset.core.partial_sample import empty_sample

        return empty_sample(config.horizon, config.sample_rate, config.seed)
    return empty_stack(config.horizon)
