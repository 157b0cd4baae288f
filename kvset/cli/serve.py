"""`kvset serve`: the live monitor without a UI, its figures as Prometheus metrics on /metrics
(--listen) or in a file for node_exporter's textfile collector (--textfile); and the same exporter
beside kvset-top's app (--serve-metrics, `exporter_beside_ui`)."""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvset.cli import COMMANDS
from kvset.cli.flags import add_exporter_arguments, add_monitor_arguments
from kvset.cli.live_monitor import UsageError, build_monitor
from kvset.quantities import parse_capacities

# The exporter and the monitor are loaded when one runs, not to build the parsers (`--help`).
if TYPE_CHECKING:
    from kvset.exporter import Exporter
    from kvset.monitor import Monitor

SOURCE_FLAGS = ("replay", "events", "log", "metrics", "demo")

# glibc's malloc keeps what the decoding and pipeline threads free in their arenas: its mmap threshold
# climbs to the largest block freed (up to 32 MiB), after which every temporary array of a flood's
# 10,000-block batches comes from an arena and its pages stay there when freed (70 to 90 MiB of a
# `make bench-flood` run). A fixed threshold sends the large ones back to the system when freed (the
# fresh pages cost decoding about 6 % more CPU), and a trim after a snapshot now and then returns
# the arenas' free pages (a few ms; 0.1 ms when little is free).
M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD_BYTES = 256 * 1024
TRIM_EVERY_S = 2.0


def glibc_malloc() -> Any | None:
    """The C library when it is glibc (mallopt and malloc_trim), else None: nothing to tune."""
    name = ctypes.util.find_library("c") if sys.platform.startswith("linux") else None
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


class HeapTrim:
    """A snapshot listener that hands the arenas' free pages back at most every TRIM_EVERY_S; made,
    it fixes the mmap threshold (see above)."""

    def __init__(self, libc: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.libc, self.clock = libc, clock
        self.libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        self.last = clock()
        self.trims = 0

    def __call__(self, _snapshot: object) -> None:
        now = self.clock()
        if now - self.last >= TRIM_EVERY_S:
            self.libc.malloc_trim(0)
            self.last = now
            self.trims += 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help=COMMANDS["serve"],
        description="Follow an engine (or replay a trace) as kvset-top does and export the curve, the working "
        "sets, the engine's operating point, source health and tiers as Prometheus metrics. Nothing listens "
        "unless --listen is given; HOST defaults to 127.0.0.1. Runs until Ctrl-C or SIGTERM.",
    )
    add_monitor_arguments(p, service=True)
    add_exporter_arguments(p)
    p.set_defaults(func=run)


def _capacities(args: argparse.Namespace) -> tuple[int, ...]:
    try:
        return parse_capacities(args.capacities) if args.capacities else ()
    except ValueError as e:
        raise UsageError(f"--capacities: {e}") from None


def _cannot_listen(flag: str, address: tuple[str, int], exc: OSError) -> UsageError:
    host, port = address
    return UsageError(f"{flag} {host}:{port}: cannot listen there: {exc.strerror or exc}")


def run(args: argparse.Namespace) -> int:
    try:
        if not (args.listen or args.textfile):
            raise UsageError("give --listen [HOST:]PORT or --textfile PATH (nothing listens unless asked)")
        if not any(getattr(args, flag) for flag in SOURCE_FLAGS):
            raise UsageError("give a source: --events, --log, --metrics, --replay TRACE (or --demo)")
        capacities = _capacities(args)
        monitor = build_monitor(args)
        from kvset.exporter import Exporter

        try:
            exporter = Exporter(
                capacities, listen=args.listen, textfile=Path(args.textfile) if args.textfile else None
            )
        except OSError as exc:
            raise _cannot_listen("--listen", args.listen, exc) from None
    except (UsageError, ValueError) as e:  # GeometryError is a ValueError too
        print(f"kvset serve: {e}", file=sys.stderr)
        return 2
    if exporter.server is not None:
        print(f"kvset serve: metrics on {exporter.server.url}", file=sys.stderr, flush=True)
        warn_exposure("kvset serve", exporter)
    if args.textfile:
        print(f"kvset serve: writing {args.textfile} every refresh", file=sys.stderr, flush=True)
    libc = glibc_malloc()
    if libc is not None:
        monitor.add_listener(HeapTrim(libc))
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        monitor.run(stop, exporter.publish)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        exporter.close()
    return 0


def check_exporter_flags(args: argparse.Namespace) -> None:
    """kvset-top's exporter flags that do not fit together, found without opening anything."""
    if not args.serve_metrics:
        if args.capacities:
            raise UsageError("--capacities (the exported hit rates) needs --serve-metrics")
        return
    if args.once:
        raise UsageError(
            "--serve-metrics serves beside the app, and --once exits after one report; "
            "`kvset serve` exports without the app"
        )
    if args.serve_metrics[1] == 0:
        raise UsageError("--serve-metrics needs a port: the app cannot print the one port 0 would pick")
    _capacities(args)


def exporter_beside_ui(args: argparse.Namespace, monitor: Monitor) -> Exporter | None:
    """kvset-top --serve-metrics: the exporter fed by the monitor the app runs (None when not asked).
    Not with --once, which exits after one report: a scraper would find nothing there."""
    check_exporter_flags(args)
    if not args.serve_metrics:
        return None
    capacities = _capacities(args)
    from kvset.exporter import Exporter

    try:
        exporter = Exporter(capacities, listen=args.serve_metrics)
    except OSError as exc:
        raise _cannot_listen("--serve-metrics", args.serve_metrics, exc) from None
    monitor.add_listener(exporter.publish)
    warn_exposure("kvset-top", exporter)
    return exporter


def warn_exposure(prog: str, exporter: Exporter) -> None:
    """Say so when the endpoint can be reached from other machines (every interface, however written)."""
    if exporter.server is not None and exporter.server.exposure:
        print(f"{prog}: warning: {exporter.server.exposure}", file=sys.stderr, flush=True)
