"""Where `kvset analyze` and `kvset verify` get their accesses: a trace file, a whole engine log or the
built-in demo (the flags: kvset.cli.flags.add_input_arguments)."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from kvset.cli.from_flags import log_source_from_args
from kvset.formats import read_trace
from kvset.formats.stream import TraceStream
from kvset.offline import InputSummary
from kvset.quantities import plural
from kvset.types import AccessBatch
from kvset.units import DEFAULT_BLOCK_SIZE, StreamUnits
from kvset.workload import WorkloadConfig, generate


class InputError(Exception):
    """Unusable input: the command prints it and exits with code 2."""


# `kvset analyze` and `kvset verify` exit with it when the input ended before its end (a truncated or
# corrupt .gz): the figures would be of a part only, so without --allow-partial none are printed.
EXIT_PARTIAL = 3


def partial_read(summary: InputSummary, command: str, allowed: bool) -> str | None:
    """The stderr line for an input that ended early (None: it was read whole): a refusal, or with
    --allow-partial the warning printed beside the figures."""
    where = summary.ended_early
    if where is None:
        return None
    read = f"{plural(summary.requests, 'request')} read before it"
    if allowed:
        return f"kvset {command}: partial input: {where}; the figures are of the {read} (--allow-partial)"
    return (
        f"kvset {command}: the input ends early: {where}; {read}. No figures printed "
        f"(exit code {EXIT_PARTIAL}): give --allow-partial for those of the part read"
    )


def load_input(
    args: argparse.Namespace, stream: bool = False
) -> tuple[Callable[[], Iterable[AccessBatch]], InputSummary]:
    """A factory of access batches (callable again for a second pass) and what was read.

    stream: a trace file is read as a stream (kvset.formats.stream), once; the summary is
    filled in when the analysis has read it all."""
    if args.demo:
        if args.trace:
            raise InputError("give a trace or --demo, not both")
        t0 = time.perf_counter()
        cfg = WorkloadConfig(block_size=args.block_size or DEFAULT_BLOCK_SIZE)
        batch = generate(args.demo_accesses, cfg)
        summary = InputSummary(
            name="built-in agentic demo workload",
            format="demo",
            units=StreamUnits(cfg.block_size, "flag" if args.block_size else "default"),
            requests=0 if batch.request_starts is None else len(batch.request_starts),
            read_seconds=time.perf_counter() - t0,
        )
        return (lambda: [batch]), summary
    if args.log:
        if args.trace:
            raise InputError("give a trace or --log, not both")
        return _load_log(args)
    if not args.trace:
        raise InputError(
            f"no trace given: kvset {getattr(args, 'command', None) or 'analyze'} TRACE (or --demo, or --log PATH)"
        )
    if args.trace != "-" and not Path(args.trace).exists():
        raise InputError(f"no such file: {args.trace}")
    if Path(args.trace).is_dir():
        raise InputError(f"{args.trace} is a folder: give the trace file itself")
    if stream and args.trace != "-":
        reader = TraceStream(
            args.trace,
            format=args.format,
            block_size=args.block_size,
            strict=args.strict,
            hash_algo=args.hash_algo,
            python_hash_seed=args.python_hash_seed,
        )
        return (lambda: reader), InputSummary(name=args.trace, format=args.format or "", units=None)
    t0 = time.perf_counter()
    trace = read_trace(
        args.trace,
        format=args.format,
        block_size=args.block_size,
        strict=args.strict,
        hash_algo=args.hash_algo,
        python_hash_seed=args.python_hash_seed,
    )
    summary = InputSummary(
        name=args.trace if args.trace != "-" else "<stdin>",
        format=trace.format,
        units=trace.units,
        requests=trace.requests,
        lines=trace.lines,
        rejects=trace.rejects,
        warnings=trace.warnings,
        notes=list(trace.notes),
        read_seconds=time.perf_counter() - t0,
    )
    return (lambda: trace.batches()), summary


def _load_log(args: argparse.Namespace) -> tuple[Callable[[], Iterable[AccessBatch]], InputSummary]:
    """A whole vLLM/SGLang log, read once: the prompts it logged become the access stream."""
    if args.log != "-" and not Path(args.log).exists():
        raise InputError(f"no such file: {args.log}")
    if Path(args.log).is_dir():
        raise InputError(f"{args.log} is a folder: give the log file itself")
    t0 = time.perf_counter()
    source = log_source_from_args(args, follow=False)
    assert source is not None  # args.log is given
    batches: list[AccessBatch] = []
    health = None
    try:
        for update in source.updates(threading.Event()):
            if update.accesses is not None and len(update.accesses):
                batches.append(update.accesses)
            health = update.health or health
    finally:
        source.close()
    summary = InputSummary(
        name=args.log,
        format=f"{'/'.join(sorted(source.engines_seen)) or args.log_engine} log",
        units=source.units,
        requests=sum(len(b.request_starts) for b in batches if b.request_starts is not None),
        lines=source.lines,
        rejects=source.rejects,
        notes=list(health.notes) if health is not None else [],
        read_seconds=time.perf_counter() - t0,
    )
    if not batches:
        if source.read_error:
            raise InputError(f"{args.log}: could not be read: {source.read_error}")
        raise InputError(
            f"{args.log}: no prompt with token ids in the log "
            f"({plural(source.lines, 'line')}; vLLM logs them at DEBUG (>= 0.12) or INFO (<= 0.11))"
        )
    return (lambda: batches), summary
