"""The `kvset-top` command (its entry point `main`): the monitor flags of kvset.cli.flags plus the
display flags, then either the live app or (`--once`) one report printed by kvset.report, without a
terminal.

The full-screen app needs a terminal on both ends: without one (cron, nohup, `< /dev/null`, a
pipe) it would draw escape codes into a file and wait forever for keys, so it refuses and points
to --once. `--once` exits 2, with the reasons on stderr, when every source failed (the report is
still printed), as `kvset analyze` does for an unusable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kvset.api import Snapshot, curve_csv, snapshot_json, snapshot_text
from kvset.cli.flags import (
    add_completion_argument,
    add_exporter_arguments,
    add_monitor_arguments,
)
from kvset.cli.live_monitor import (
    STDIN,
    UsageError,
    build_monitor,
    check_flags,
    once_failures,
    once_give_up,
    once_seconds,
)
from kvset.cli.parser import USAGE_ERROR, CommandParser, add_version_argument
from kvset.cli.serve import check_exporter_flags, exporter_beside_ui
from kvset_tui.keymap import KeymapError, load_keymap
from kvset_tui.theming import ThemeError, available_themes, choose_theme
from kvset_tui.view_state import UNITS, WINDOW_LABELS, ViewState

PROG = "kvset-top"
NO_TERMINAL = f"{PROG}: no terminal: use --once (or run it in a terminal)"


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=PROG,
        description="Live terminal monitor: how much KV cache buys which prefix-cache hit rate "
        "(exact LRU curve, working sets, thrashing, reserve). Press ? in the app for help.",
    )
    add_version_argument(parser)
    add_completion_argument(parser)
    add_monitor_arguments(parser)
    add_exporter_arguments(parser, beside_ui=True)
    ui = parser.add_argument_group("display")
    ui.add_argument(
        "--theme",
        choices=available_themes(),
        default=None,
        help="colour theme from themes/*.toml (default dark; NO_COLOR selects mono)",
    )
    ui.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
    ui.add_argument(
        "--window",
        choices=WINDOW_LABELS,
        default=None,
        help="initial window (w cycles, 1 5 h a pick one; default 5m, all time for a replay at --speed max "
        "and with --opt, and once a replay has finished)",
    )
    ui.add_argument("--units", choices=UNITS, default="blocks", help="initial capacity unit (u cycles)")
    ui.add_argument("--linear", action="store_true", help="start with a linear capacity axis (l toggles)")
    ui.add_argument(
        "--export-dir",
        type=Path,
        default=Path("exports"),
        metavar="DIR",
        help="where e writes the snapshot JSON and SVG screenshot (default ./exports)",
    )
    ui.add_argument(
        "--keymap",
        type=Path,
        metavar="FILE",
        help='TOML file rebinding keys by binding id, e.g. "kvset.pause" = "P"',
    )
    return parser


def initial_window(args: argparse.Namespace) -> str:
    """The window the app opens on: --window, else 5 minutes, or all time with --opt (MIN's curve is of
    the whole trace, so its working sets are in that window only) and for a replay at --speed max (read
    in seconds: its last 5 trace minutes are not what `kvset analyze` of the file reports)."""
    if args.window:
        return str(args.window)
    as_fast_as_possible = getattr(args, "replay", None) is not None and getattr(args, "speed", 1.0) is None
    return "all" if args.opt or as_fast_as_possible else "5m"


def print_once(snapshot: Snapshot, as_json: bool, out=None, as_csv: bool = False) -> None:
    out = out or sys.stdout
    if as_json:
        out.write(json.dumps(snapshot_json(snapshot), indent=1) + "\n")
    elif as_csv:
        out.write(curve_csv(snapshot))
    else:
        out.write(snapshot_text(snapshot).rstrip("\n") + "\n")


def has_terminal(stdin=None, stdout=None) -> bool:
    """Whether the app can run: keys come in and the screen goes out through a terminal."""
    streams = (stdin or sys.stdin, stdout or sys.stdout)
    return all(s is not None and hasattr(s, "isatty") and s.isatty() for s in streams)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # what can be checked without opening anything comes first, terminal or not
        check_flags(args)
        check_exporter_flags(args)
    except UsageError as exc:
        parser.error(str(exc))
    if args.once and args.keymap is not None:
        parser.error("--keymap is for the full-screen app: --once has no keys")
    if not args.once and args.replay == STDIN:
        parser.error("--replay - reads the trace from stdin, which the app needs for its keys: add --once")
    palette = keymap = None
    if not args.once:
        palette, keymap = _display_choices(parser, args)
        if not has_terminal():
            print(NO_TERMINAL, file=sys.stderr)
            return USAGE_ERROR
    try:
        monitor = build_monitor(args)
        exporter = exporter_beside_ui(args, monitor)  # --serve-metrics; None unless asked
    except (UsageError, ValueError) as exc:  # GeometryError and RecordTargetError are ValueErrors too
        parser.error(str(exc))
    if args.once:
        snapshot = monitor.collect(once_seconds(args, monitor), give_up=once_give_up(args))
        try:
            print_once(snapshot, args.json, as_csv=args.csv)
        except BrokenPipeError:  # `kvset-top --once | head`
            return 0
        failures = once_failures(snapshot)
        for reason in failures:
            print(f"{PROG}: no data: {reason}", file=sys.stderr)
        return USAGE_ERROR if failures else 0
    from kvset_tui.app import KvsetTopApp

    view = ViewState(
        window=initial_window(args),
        window_chosen=args.window is not None,
        unit=args.units,
        log_x=not args.linear,
        target_mode=args.target_mode,
    )
    app = KvsetTopApp(monitor, palette=palette, view=view, export_dir=args.export_dir, keymap=keymap)
    try:
        code = app.run(mouse=not args.no_mouse)
    finally:
        if exporter is not None:
            exporter.close()
    return int(code or 0)


def _display_choices(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The theme and key map the app runs with; a usage error when either file is unusable."""
    try:
        palette = choose_theme(args.theme)
    except ThemeError as exc:
        parser.error(str(exc))
    from kvset_tui.app import KvsetTopApp  # here, so that --once does not load the app and its widgets

    keymap = None
    if args.keymap is not None:
        try:
            bindings = [b for b in KvsetTopApp.BINDINGS if not isinstance(b, tuple)]
            keymap = load_keymap(args.keymap, {b.id: b.key for b in bindings if b.id})
        except KeymapError as exc:
            parser.error(str(exc))
    return palette, keymap
