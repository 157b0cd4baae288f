"""The `kvset-top` command (its entry point `main`): the monitor flags of kvset.cli.flags plus the
display flags, then either the live app or (`--once`) one report printed by kvset.report, without a
terminal."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kvset.cli.flags import add_exporter_arguments, add_monitor_arguments
from kvset.cli.live_monitor import UsageError, build_monitor, once_seconds
from kvset.cli.serve import exporter_beside_ui
from kvset.report import snapshot_json, snapshot_text
from kvset.snapshot import Snapshot
from kvset_tui.theming import ThemeError, available_themes, choose_theme
from kvset_tui.view_state import UNITS, WINDOW_LABELS, ViewState


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvset-top",
        description="Live terminal monitor: how much KV cache buys which prefix-cache hit rate "
        "(exact LRU curve, working sets, thrashing, reserve). Press ? in the app for help.",
    )
    add_monitor_arguments(parser)
    add_exporter_arguments(parser, beside_ui=True)
    ui = parser.add_argument_group("display")
    ui.add_argument("--theme", choices=available_themes(), default=None,
                    help="colour theme from themes/*.toml (default dark; NO_COLOR selects mono)")  # fmt: skip
    ui.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
    ui.add_argument("--window", choices=WINDOW_LABELS, default="5m", help="initial window (w cycles)")
    ui.add_argument("--units", choices=UNITS, default="blocks", help="initial capacity unit (u cycles)")
    ui.add_argument("--linear", action="store_true", help="start with a linear capacity axis (l toggles)")
    ui.add_argument("--export-dir", type=Path, default=Path("exports"), metavar="DIR",
                    help="where e writes the snapshot JSON and SVG screenshot (default ./exports)")  # fmt: skip
    return parser


def print_once(snapshot: Snapshot, as_json: bool, out=None) -> None:
    out = out or sys.stdout
    if as_json:
        out.write(json.dumps(snapshot_json(snapshot), indent=1) + "\n")
    else:
        out.write(snapshot_text(snapshot).rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        monitor = build_monitor(args)
        exporter = exporter_beside_ui(args, monitor)  # --serve-metrics; None unless asked
    except (UsageError, ValueError) as exc:  # GeometryError is a ValueError too
        parser.error(str(exc))
    if args.once:
        try:
            print_once(monitor.collect(once_seconds(args, monitor)), args.json)
        except BrokenPipeError:  # `kvset-top --once | head`
            return 0
        return 0
    try:
        palette = choose_theme(args.theme)
    except ThemeError as exc:
        parser.error(str(exc))
    from kvset_tui.app import KvsetTopApp  # here, so that --once does not load the app and its widgets

    view = ViewState(window=args.window, unit=args.units, log_x=not args.linear, target_mode=args.target_mode)
    app = KvsetTopApp(
        monitor, palette=palette, view=view, export_dir=args.export_dir, main_mode=args.target_mode
    )
    try:
        code = app.run(mouse=not args.no_mouse)
    finally:
        if exporter is not None:
            exporter.close()
    return int(code or 0)
