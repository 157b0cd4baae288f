"""The live Monitor the kvset-top flags describe (kvset.cli.flags.add_monitor_arguments): its sources,
its analyzer and its snapshot builder. Shared by `kvset-top` and any other front end; no UI code here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kvset.cli.from_flags import (
    events_source_from_args,
    geometry_from_args,
    log_source_from_args,
    metrics_source_from_args,
)
from kvset.cli.tier_flags import tier_request_from_args
from kvset.core.analyzer import Analyzer
from kvset.formats.record import TraceRecorder
from kvset.monitor import Monitor
from kvset.quantities import parse_fractions
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.base import Source
from kvset.sources.demo import DemoSource
from kvset.sources.replay import ReplaySource

ONCE_DEMO_SECONDS = 600.0  # trace seconds of demo traffic behind `--once --demo`


class UsageError(Exception):
    """Flags that do not fit together; front ends print it and exit with code 2."""


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
    try:
        coverage_targets = parse_fractions(args.targets, "target")
        absolute_targets = parse_fractions(args.absolute_targets, "absolute target")
        tiers = tier_request_from_args(args, bytes_known=bool(args.model))
    except ValueError as e:
        raise UsageError(str(e)) from None
    geometry = geometry_from_args(args.model, args) if args.model else None
    sources = build_sources(args)
    demo = any(s.kind == "demo" for s in sources)
    config = SnapshotConfig(
        coverage_targets=coverage_targets,
        absolute_targets=absolute_targets,
        main_mode=args.target_mode,
        capacity_blocks=args.capacity,
        geometry=geometry,
        kv_dtype=args.kv_dtype,
        concurrency=args.concurrency,
        context_tokens=args.context,
        demo=demo,
        **(tiers.snapshot_config() if tiers is not None else {}),
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
