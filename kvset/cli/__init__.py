"""The `kvset` command line: the entry point `main`, one module per subcommand (analyze, verify,
model, record, serve, completion), every flag in `flags` (with its value types in `argtypes`, the
parser class with one-line usage errors in `parser`), and what the flags describe in `from_flags`
(model, engine sources), `inputs` (what analyze and verify read) and `live_monitor` (the Monitor
behind kvset-top)."""

from __future__ import annotations

import argparse
import importlib
import sys

from kvset.cli.flags import add_version_argument
from kvset.cli.parser import CommandParser

# Each subcommand module defines register(subparsers), which sets func on its parser. They are
# imported when the parser is built, so importing a flag module does not load every command.
SUBCOMMANDS: tuple[str, ...] = ("analyze", "verify", "model", "record", "serve", "completion")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="kvset",
        description="Exact one-pass KV-cache working-set analysis: the LRU hit rate at every capacity.",
    )
    add_version_argument(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"kvset.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `kvset analyze ... | head`
        return 0
