"""Command-line flags of the live monitor (sources, targets, model) and the Monitor they describe.

Shared by `kvset-top` (which adds its UI flags) and any other front end; no UI code here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kvset.argtypes import non_negative_int, positive_float, positive_int
from kvset.core.analyzer import DEFAULT_HORIZON, ORDERS, Analyzer
from kvset.formats import FORMATS
from kvset.formats.record import TraceRecorder
from kvset.formats.vllm_hash import HASH_ALGOS
from kvset.geometry.arguments import add_override_arguments, dtype_name, geometry_from_args
from kvset.geometry.dtypes import AUTO
from kvset.monitor import Monitor
from kvset.report import parse_fractions
from kvset.snapshot import DEFAULT_ABSOLUTE_TARGETS, DEFAULT_COVERAGE_TARGETS
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.base import Source
from kvset.sources.demo import DemoSource
from kvset.sources.engine_cli import (
    add_events_arguments,
    add_log_arguments,
    add_metrics_arguments,
    events_source_from_args,
    log_source_from_args,
    metrics_source_from_args,
)
from kvset.sources.replay import ReplaySource

ONCE_DEMO_SECONDS = 600.0  # trace seconds of demo traffic behind `--once --demo`


class UsageError(Exception):
    """Flags that do not fit together; front ends print it and exit with code 2."""


def _speed(text: str) -> float | None:
    if text.lower() in ("max", "0", "inf"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed must be a number or 'max', got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("speed must be positive (or 'max')")
    return value


def _fractions(text: str) -> tuple[float, ...]:
    try:
        return parse_fractions(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_monitor_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("sources (default: --demo)")
    src.add_argument("--demo", action="store_true", help="the built-in agentic workload, played live (default)")
    src.add_argument("--replay", metavar="TRACE", help="replay a trace file (mooncake, bailian or token-id JSONL)")
    src.add_argument("--follow", action="store_true",
                     help="with --replay: tail the growing file like tail -F (rotation and truncation handled)")  # fmt: skip
    src.add_argument("--record", metavar="FILE",
                     help="also save every access the sources deliver as a trace file (.gz ok) to replay later")  # fmt: skip
    src.add_argument("--speed", type=_speed, default=1.0, metavar="X",
                     help="replay/demo speed: trace seconds per second, or 'max' (default 1)")  # fmt: skip
    src.add_argument("--format", choices=FORMATS, help="trace format for --replay (default: detected)")
    src.add_argument("--block-size", type=positive_int, metavar="TOKENS",
                     help="tokens per block of the trace or engine (default: the format's)")  # fmt: skip
    src.add_argument("--hash-algo", choices=HASH_ALGOS, default="sha256", help="vLLM block hash for token ids")
    src.add_argument("--python-hash-seed", metavar="SEED", help="the engine's PYTHONHASHSEED, if it had one")

    add_events_arguments(p)
    add_log_arguments(p)
    add_metrics_arguments(p)

    ana = p.add_argument_group("analysis")
    ana.add_argument("--horizon", type=positive_int, default=DEFAULT_HORIZON, metavar="BLOCKS",
                     help=f"most blocks tracked; curves are exact up to it (default {DEFAULT_HORIZON:,})")  # fmt: skip
    ana.add_argument("--order", choices=ORDERS, default="forward", help="order of a request's blocks")
    ana.add_argument("--targets", type=_fractions, default=DEFAULT_COVERAGE_TARGETS, metavar="T1,T2,..",
                     help="coverage targets (share of the attainable hit rate; default 0.95,0.99,0.999)")  # fmt: skip
    ana.add_argument("--absolute-targets", type=_fractions, default=DEFAULT_ABSOLUTE_TARGETS, metavar="T1,T2,..",
                     help="absolute hit-rate targets (default 0.5,0.7,0.9)")  # fmt: skip
    ana.add_argument("--target-mode", choices=("coverage", "absolute"), default="coverage",
                     help="which targets come first (t cycles them in the app)")  # fmt: skip
    ana.add_argument("--capacity", type=positive_int, metavar="BLOCKS",
                     help="capacity for the thrashing and churn panels when the engine reports none")  # fmt: skip
    ana.add_argument("--interval", type=positive_float, default=1.0, metavar="SECONDS",
                     help="refresh interval (default 1)")  # fmt: skip

    mod = p.add_argument_group("model (capacities in GiB and the hybrid reserve)")
    mod.add_argument("--model", metavar="NAME|config.json", help="model preset or local config.json")
    mod.add_argument("--kv-dtype", type=dtype_name, default=AUTO, metavar="DTYPE",
                     help="KV cache dtype: auto, bf16, fp16, fp8, fp32")  # fmt: skip
    mod.add_argument("--concurrency", type=non_negative_int, metavar="N",
                     help="running requests, when the engine does not report it")  # fmt: skip
    mod.add_argument("--context", type=non_negative_int, metavar="TOKENS", help="context tokens per running request")
    add_override_arguments(p)

    once = p.add_argument_group("one-shot report")
    once.add_argument("--once", action="store_true", help="print one report and exit (no UI, no terminal needed)")
    once.add_argument("--json", action="store_true", help="with --once: the snapshot as JSON")
    once.add_argument("--duration", type=positive_float, metavar="SECONDS",
                      help="with --once: how long to listen to live sources (default 10 s; files and the "
                           "demo are read to the end)")  # fmt: skip


def build_sources(args: argparse.Namespace) -> list[Source]:
    sources: list[Source] = []
    if args.follow and not args.replay:
        raise UsageError("--follow needs --replay TRACE")
    if args.replay:
        if not args.follow and not Path(args.replay).exists():
            raise UsageError(f"no such trace file: {args.replay}")
        speed = None if args.once else args.speed
        sources.append(ReplaySource(args.replay, speed=speed, format=args.format, block_size=args.block_size,
                                    hash_algo=args.hash_algo, python_hash_seed=args.python_hash_seed,
                                    follow=args.follow))  # fmt: skip
    if args.events:
        try:
            sources.append(events_source_from_args(args))
        except ValueError as e:
            raise UsageError(str(e)) from None
    if args.log:
        # --once reads a log whole, unless told to listen for --duration seconds
        follow = not args.once or args.duration is not None
        if not follow and not Path(args.log).exists():
            raise UsageError(f"no such log file: {args.log}")
        sources.append(log_source_from_args(args, follow=follow))
    if args.metrics:
        sources.append(metrics_source_from_args(args))
    if args.demo or not sources:
        if args.once:
            sources.append(DemoSource(speed=None, duration=ONCE_DEMO_SECONDS))
        else:
            sources.append(DemoSource(speed=args.speed))
    return sources


def build_monitor(args: argparse.Namespace) -> Monitor:
    """The Monitor the flags describe. Raises UsageError (or GeometryError) on flags that do not fit."""
    if args.json and not args.once:
        raise UsageError("--json needs --once")
    geometry = geometry_from_args(args.model, args) if args.model else None
    sources = build_sources(args)
    demo = any(s.kind == "demo" for s in sources)
    config = SnapshotConfig(
        coverage_targets=tuple(args.targets),
        absolute_targets=tuple(args.absolute_targets),
        main_mode=args.target_mode,
        capacity_blocks=args.capacity,
        geometry=geometry,
        kv_dtype=args.kv_dtype,
        concurrency=args.concurrency,
        context_tokens=args.context,
        demo=demo,
    )
    analyzer = Analyzer(horizon=args.horizon, order=args.order, block_tokens=args.block_size)
    recorder = TraceRecorder(args.record) if args.record else None
    return Monitor(sources, analyzer, SnapshotBuilder(config), interval=args.interval, recorder=recorder)


def once_seconds(args: argparse.Namespace, monitor: Monitor) -> float | None:
    """How long `--once` listens: finite sources are read to the end, live ones for --duration (10 s)."""
    if args.duration:
        return args.duration
    if all(s.kind in ("demo", "replay", "log") and not getattr(s, "follow", False) for s in monitor.sources):
        return None
    return 10.0
