"""`kvset record`: save what a live source sees as a trace file, to analyze an incident later."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from kvset.cli import COMMANDS
from kvset.cli.argtypes import seconds
from kvset.cli.flags import (
    add_block_size_argument,
    add_events_arguments,
    add_force_argument,
    add_removed_arguments,
)
from kvset.cli.from_flags import events_source_from_args
from kvset.quantities import plural

_PROGRESS_EVERY_S = 5.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "record",
        help=COMMANDS["record"],
        description="Subscribe to an engine's KV events and write every block access it reports as a "
        "Mooncake-style JSONL trace (with the engine's block size), until --seconds have passed or "
        "Ctrl-C. `kvset analyze` replays the file.",
    )
    add_events_arguments(parser, required=True)
    add_block_size_argument(
        parser, meaning="the engine's tokens per block, for events that do not carry it (default: vLLM's)"
    )
    add_removed_arguments(parser, ("--events-block-size",))
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="the trace to write (.gz: gzip-compressed)"
    )
    add_force_argument(parser, "the --out file")
    parser.add_argument("--seconds", type=seconds, default=None, metavar="N", help="stop after N seconds")
    parser.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    parser.set_defaults(func=run)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    # the recorder (numpy) only for a recording: `kvset completion` builds this parser too
    from kvset.formats.record import CHECKPOINT_SECONDS, RecordTargetError, TraceRecorder, check_record_target

    try:
        check_record_target(args.out, overwrite=args.force)  # before connecting: a wrong path fails at once
        source = events_source_from_args(args)
    except ValueError as exc:  # RecordTargetError included
        _say(f"kvset record: {exc}")
        return 2
    stop = threading.Event()
    restore = None
    if threading.current_thread() is threading.main_thread():
        restore = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    started = time.monotonic()
    deadline = None if args.seconds is None else started + args.seconds
    next_progress = started + _PROGRESS_EVERY_S
    health = None
    try:
        recorder = TraceRecorder(args.out, block_size=args.block_size, overwrite=args.force)
    except RecordTargetError as exc:
        source.close()
        _say(f"kvset record: {exc}")
        return 2
    except OSError as exc:
        source.close()
        _say(f"kvset record: cannot write {args.out}: {exc.strerror or exc}")
        return 2
    if not args.quiet:
        _say(
            f"recording into {recorder.partial_path}, renamed to {args.out} when it ends; if it is killed, "
            f"that file holds all up to {CHECKPOINT_SECONDS:.0f} s before: kvset analyze FILE --allow-partial reads it"
        )
    try:
        for update in source.updates(stop):
            if update.accesses is not None:
                recorder.write(update.accesses, block_size=update.units.block_size if update.units else None)
            if recorder.failure is not None:
                break  # a full disk: nothing more can be kept
            health = update.health or health
            for event in update.events:
                _say(f"{event.kind}: {event.text}")
            now = time.monotonic()
            if not args.quiet and now >= next_progress and health is not None:
                _say(
                    f"{health.status()}: {plural(recorder.requests, 'request')}, "
                    f"{plural(recorder.accesses, 'access', 'accesses')} recorded"
                )
                next_progress = now + _PROGRESS_EVERY_S
            if deadline is not None and now >= deadline:
                stop.set()
    except KeyboardInterrupt:
        pass
    finally:
        recorder.close()
        source.close()
        if restore is not None:
            signal.signal(signal.SIGTERM, restore)
    if recorder.failure is not None:
        kept = "the file that was there is untouched" if args.force else "nothing was written there"
        _say(f"kvset record: {recorder.failure}; the recording is discarded ({kept})")
        return 1
    health = source.health()
    elapsed = time.monotonic() - started
    if recorder.requests == 0:  # one line: the reason; the empty counters after it would only bury it
        _say(f"kvset record: nothing recorded ({health.state}; no {args.medium} BlockStored events arrived)")
        if source.rejects:
            _say("  " + source.rejects.describe().replace("\n", "\n  "))
        return 1
    _say(
        f"recorded {plural(recorder.requests, 'request')}, {plural(recorder.accesses, 'block access', 'block accesses')} "
        f"({plural(recorder.tokens, 'token')}) in {elapsed:.1f} s to {args.out}"
    )
    if recorder.clamped:
        _say(
            f"  {plural(recorder.clamped, 'request')} with an unusable timestamp written at the previous "
            "request's time"
        )
    for key, value in health.details:
        _say(f"  {key}: {value}")
    for note in health.notes:
        _say(f"  note: {note}")
    if source.rejects:
        _say("  " + source.rejects.describe().replace("\n", "\n  "))
    return 0
