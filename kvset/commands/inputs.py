"""Where `kvset analyze` and `kvset verify` get their accesses: a trace file or the built-in demo."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from kvset.formats import FORMATS, read_trace
from kvset.formats.stream import TraceStream
from kvset.formats.vllm_hash import HASH_ALGOS
from kvset.offline import InputSummary
from kvset.sources.engine_cli import add_log_arguments, log_source_from_args
from kvset.types import AccessBatch
from kvset.workload import WorkloadConfig, generate

DEMO_ACCESSES = 2_000_000


class InputError(Exception):
    """Unusable input: the command prints it and exits with code 2."""


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", nargs="?", help="trace file (JSONL, .gz ok) or - for stdin")
    p.add_argument("--demo", action="store_true", help="analyze the built-in agentic workload instead")
    p.add_argument("--demo-accesses", type=int, default=DEMO_ACCESSES, metavar="N",
                   help=f"size of the demo workload (default {DEMO_ACCESSES:,})")  # fmt: skip
    p.add_argument("--format", choices=FORMATS, help="trace format (default: detected)")
    p.add_argument("--block-size", type=int, metavar="N",
                   help="tokens per block (default: 512 mooncake, 16 bailian and tokens)")  # fmt: skip
    p.add_argument("--hash-algo", choices=HASH_ALGOS, default="sha256", help="vLLM block hash for token-id traces")
    p.add_argument("--python-hash-seed", metavar="SEED", help="the engine's PYTHONHASHSEED, if it had one")
    p.add_argument("--strict", action="store_true", help="stop at the first malformed line")
    add_log_arguments(p)


def load_input(args: argparse.Namespace, stream: bool = False) -> tuple[Callable[[], Iterable[AccessBatch]], InputSummary]:
    """A factory of access batches (callable again for a second pass) and what was read.

    stream: a trace file is read as a stream (kvset.formats.stream), once; the summary is
    filled in when the analysis has read it all."""
    if args.demo:
        if args.trace:
            raise InputError("give a trace or --demo, not both")
        t0 = time.perf_counter()
        cfg = WorkloadConfig(block_tokens=args.block_size or 16)
        batch = generate(args.demo_accesses, cfg)
        summary = InputSummary(
            name="built-in agentic demo workload",
            format="demo",
            block_tokens=cfg.block_tokens,
            requests=len(batch.request_starts),
            read_seconds=time.perf_counter() - t0,
        )
        return (lambda: [batch]), summary
    if args.log:
        if args.trace:
            raise InputError("give a trace or --log, not both")
        return _load_log(args)
    if not args.trace:
        raise InputError("no trace given: kvset analyze TRACE (or --demo, or --log PATH)")
    if args.trace != "-" and not Path(args.trace).exists():
        raise InputError(f"no such file: {args.trace}")
    if stream and args.trace != "-":
        reader = TraceStream(args.trace, format=args.format, block_size=args.block_size, strict=args.strict,
                             hash_algo=args.hash_algo, python_hash_seed=args.python_hash_seed)  # fmt: skip
        return (lambda: reader), InputSummary(name=args.trace, format=args.format or "", block_tokens=args.block_size)
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
        block_tokens=trace.block_tokens,
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
    t0 = time.perf_counter()
    source = log_source_from_args(args, follow=False)
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
        block_tokens=args.log_block_size,
        requests=sum(len(b.request_starts) for b in batches if b.request_starts is not None),
        lines=source.lines,
        rejects=source.rejects,
        notes=list(health.notes) if health is not None else [],
        read_seconds=time.perf_counter() - t0,
    )
    if not batches:
        if source.read_error:
            raise InputError(f"{args.log}: could not be read: {source.read_error}")
        raise InputError(f"{args.log}: no prompt with token ids in the log "
                         f"({source.lines:,} lines; vLLM logs them at DEBUG (>= 0.12) or INFO (<= 0.11))")  # fmt: skip
    return (lambda: batches), summary
