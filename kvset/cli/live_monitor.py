"""The live Monitor the kvset-top flags describe (kvset.cli.flags.add_monitor_arguments): its sources,
its analyzer and its snapshot builder. Shared by `kvset-top` and any other front end; no UI code here.

--block-size goes to every source, which decides its stream's units with it (a trace's block size;
the engine's for KV events that do not carry theirs and for a log's hashing; the demo's): the
analyzer is made from the units the sources decide, never from the flag itself.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvset.cli.figure_flags import check_figure_options, option_values
from kvset.cli.from_flags import (
    events_source_from_args,
    geometry_from_args,
    log_source_from_args,
    metrics_source_from_args,
)
from kvset.figures import principal_window, principals
from kvset.figures.base import TOP, OptionValues
from kvset.types import SourceHealth

# The monitor, its analyzer (numba) and its sources are loaded when one is built, not with the flags
# (`kvset-top --help`, `kvset serve --help`, completion).
if TYPE_CHECKING:
    from kvset.core.principals import LivePrincipals
    from kvset.monitor import Monitor
    from kvset.snapshot import Snapshot
    from kvset.sources.base import Source

ONCE_DEMO_SECONDS = 600.0  # trace seconds of demo traffic behind `--once --demo`


STDIN = "-"  # as a trace file: read standard input


class UsageError(Exception):
    """Flags that do not fit together; front ends print it and exit with code 2."""


def check_file_input(path: str, what: str, must_exist: bool) -> None:
    """A file to read: a folder is never one; a missing file is an error where it must exist now."""
    if path == STDIN:
        return  # read as a stream by the trace reader
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{what} {path} is a folder: give the file itself")
    if must_exist and not p.exists():
        raise UsageError(f"no such {what}: {path}")


DEFAULT_SPEED = 1.0  # --speed when not given: trace seconds per second


def build_sources(args: argparse.Namespace) -> list[Source]:
    from kvset.sources.demo import DemoSource
    from kvset.sources.replay import ReplaySource
    from kvset.workload import WorkloadConfig

    sources: list[Source] = []
    if args.replay:
        check_file_input(args.replay, "trace file", must_exist=not args.follow)
        speed = None if args.once else getattr(args, "speed", DEFAULT_SPEED)
        sources.append(
            ReplaySource(
                args.replay,
                speed=speed,
                format=args.format,
                block_size=args.block_size,
                hash_algo=args.hash_algo,
                python_hash_seed=args.python_hash_seed,
                follow=args.follow,
            )
        )
    if args.events:
        try:
            sources.append(events_source_from_args(args))
        except ValueError as e:
            raise UsageError(str(e)) from None
    if args.log:
        # --once reads a log whole, unless told to listen for --duration seconds
        follow = not args.once or args.duration is not None
        check_file_input(args.log, "log file", must_exist=not follow)
        log = log_source_from_args(args, follow=follow)
        assert log is not None  # args.log is given
        sources.append(log)
    if args.metrics:
        try:
            metrics = metrics_source_from_args(args)
            assert metrics is not None  # args.metrics is given
            sources.append(metrics)
        except ValueError as e:
            raise UsageError(str(e)) from None
    if args.demo or not sources:
        demo: dict[str, Any] = {
            "config": WorkloadConfig(block_size=args.block_size) if args.block_size else None,
            "block_size_given": bool(args.block_size),
        }
        if args.once:
            sources.append(DemoSource(speed=None, duration=ONCE_DEMO_SECONDS, **demo))
        else:
            sources.append(DemoSource(speed=getattr(args, "speed", DEFAULT_SPEED), **demo))
    return sources


def check_flags(args: argparse.Namespace) -> None:
    """Flags that do not fit together, found without opening anything: raises UsageError."""
    if args.json and not args.once:
        raise UsageError("--json needs --once")
    if args.csv and not args.once:
        raise UsageError("--csv needs --once")
    if args.csv and args.json:
        raise UsageError("give --json or --csv, not both")
    if args.force and not args.record:
        raise UsageError("--force needs --record FILE")
    if args.follow and not args.replay:
        raise UsageError("--follow needs --replay TRACE")
    if args.follow and args.replay == STDIN:
        raise UsageError("--follow tails a file that is being written: stdin (--replay -) is read to its end")
    if args.once and hasattr(args, "speed"):
        raise UsageError(
            "--speed does not apply to --once: a replay is read whole and the demo plays 10 minutes of "
            "its traffic, as fast as they can be (leave out --speed, or --once to watch them play)"
        )
    for path, what in ((args.replay, "trace file"), (args.log, "log file")):
        if path and Path(path).is_dir():
            raise UsageError(f"{what} {path} is a folder: give the file itself")
    try:
        check_figure_options(
            option_values(args, getattr(args, "pipeline", TOP)), None if args.model else "--model"
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    check_opt_flags(args)


def check_opt_flags(args: argparse.Namespace) -> None:
    """--opt reads the future of every access: a whole trace file, never a live source."""
    if not args.opt:
        return
    live = [
        flag
        for flag, given in (
            ("--events", args.events),
            ("--log", args.log),
            ("--metrics", args.metrics),
            ("--demo", args.demo),
            ("--follow", args.follow),
        )
        if given
    ]
    if live or not args.replay:
        given = (
            f"{' and '.join(live)} {'is' if len(live) == 1 else 'are'} live" if live else "no trace was given"
        )
        raise UsageError(
            f"--opt needs the whole trace in advance (Belady MIN evicts the block used again farthest "
            f"ahead): {given}; give --replay FILE alone, or kvset analyze FILE --opt"
        )
    if args.sample is not None or args.sample_size is not None:
        raise UsageError("--opt compares MIN with the exact LRU curve: not with --sample or --sample-size")


def build_monitor(args: argparse.Namespace) -> Monitor:
    """The Monitor the flags describe. Raises UsageError (or GeometryError) on flags that do not fit."""
    from kvset.core.stack_distance import Sampling, new_analyzer
    from kvset.formats.record import RecordTargetError, TraceRecorder, check_record_target
    from kvset.monitor import Monitor
    from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig

    check_flags(args)
    command = getattr(args, "pipeline", TOP)  # kvset-top or kvset serve (kvset.cli.flags)
    try:
        values = option_values(args, command)
    except ValueError as e:
        raise UsageError(str(e)) from None
    geometry = geometry_from_args(args.model, args) if args.model else None
    sources = build_sources(args)
    demo = any(s.kind == "demo" for s in sources)
    config = SnapshotConfig(
        options=values,
        command=command,
        geometry=geometry,
        kv_dtype=args.kv_dtype,
        demo=demo,
    )
    # made by the monitor once the sources have said the stream's units
    analyzer = functools.partial(
        new_analyzer,
        horizon=args.horizon,
        order=args.order,
        sampling=Sampling.of(args.sample, args.sample_size, args.seed),
    )
    recorder = None
    if args.record:
        try:
            inputs = [p for p in (args.replay, args.log) if p]
            check_record_target(args.record, inputs, overwrite=args.force)
            recorder = TraceRecorder(args.record, overwrite=args.force)
        except RecordTargetError as e:
            raise UsageError(str(e)) from None
        except OSError as e:
            raise UsageError(f"cannot record to {args.record}: {e.strerror or e}") from None
    return Monitor(
        sources,
        analyzer,
        SnapshotBuilder(config),
        interval=args.interval,
        recorder=recorder,
        opt=args.opt,
        principals=live_principals(values, args),
    )


def live_principals(values: OptionValues, args: argparse.Namespace) -> LivePrincipals | None:
    """--by: the collector of the principals' accesses, the last --by-window of them."""
    from kvset.core.principals import LivePrincipals, PrincipalCollector

    levels = values.get(principals.BY)
    if not levels:
        return None
    if args.sample is not None or args.sample_size is not None:
        raise UsageError(
            "--by needs the exact analyzer's stack distances: not with --sample or --sample-size"
        )
    top, window = values.get(principals.TOP_PRINCIPALS), values.get(principal_window.BY_WINDOW)
    return LivePrincipals(PrincipalCollector(levels, top, window))


def source_failure(health: SourceHealth) -> str | None:
    """Why a source gave nothing a report can use, or None when it delivered something.

    A source failed when it received nothing at all (no trace line, log line, good poll or
    event message) or ended in a failed state: a missing, empty, binary or wrong-shape trace,
    an unreadable log, a refused or non-metrics endpoint, a publisher that never answered.
    """
    if health.kind == "demo":
        return None
    delivered = health.accesses > 0 or health.received > 0
    if delivered and not health.state.startswith("failed"):
        return None
    # `--once` is ending: the state without its promised retry (SourceHealth.status), and a reason
    # the state already says, once
    state = health.state
    reasons = (
        [state] + [r.reason for r in health.rejected[:1] if r.reason not in state] + list(health.notes[:1])
    )
    return f"{health.source}: " + "; ".join(dict.fromkeys(r for r in reasons if r))


def once_failures(snapshot: Snapshot) -> list[str]:
    """The reasons `--once` must exit non-zero: every source failed (see source_failure)."""
    failures = [source_failure(h) for h in snapshot.sources]
    if snapshot.sources and all(f is not None for f in failures):
        return [f for f in failures if f is not None]
    return []


# A state that will not end without someone acting: a refused or unreachable endpoint, a publisher
# that never answered, a trace that failed. "connecting" and "waiting" are not (yet) among them.
_DEAD_STATES = ("down", "failed", "no publisher")


def all_sources_dead(healths: list[SourceHealth]) -> bool:
    """Every source received nothing and is in a state that will not end by itself: `--once` says so
    now instead of listening out its 10 s (a --duration is listened out whatever the health)."""
    return bool(healths) and all(
        h.kind != "demo" and not h.accesses and not h.received and h.state.startswith(_DEAD_STATES)
        for h in healths
    )


def once_give_up(args: argparse.Namespace):
    """What ends `--once` early (see all_sources_dead); None when --duration says how long to listen."""
    return None if args.duration else all_sources_dead


def once_seconds(args: argparse.Namespace, monitor: Monitor) -> float | None:
    """How long `--once` listens: finite sources are read to the end, live ones for --duration (10 s)."""
    if args.duration:
        return args.duration
    if all(s.kind in ("demo", "replay", "log") and not getattr(s, "follow", False) for s in monitor.sources):
        return None
    return 10.0
