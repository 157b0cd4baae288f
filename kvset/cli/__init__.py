"""The `kvset` command line: the entry point `main`, one module per subcommand (analyze, verify,
model, record, serve, completion), every flag in `flags` (with its value types in `argtypes`, the
parser class with one-line usage errors in `parser`), and what the flags describe in `from_flags`
(model, engine sources), `inputs` (what analyze and verify read) and `live_monitor` (the Monitor
behind kvset-top)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from kvset.cli.parser import CommandParser, add_version_argument

# Each subcommand module (kvset.cli.NAME) defines register(subparsers), which sets func on its parser,
# and reads its one-line help here. Only the chosen command's module is imported and its flags built
# (the figures' options, the sources' defaults): `kvset --version` and `kvset --help` need the names
# and these lines only, `kvset analyze` none of the other commands' modules.
COMMANDS: dict[str, str] = {
    "analyze": "hit rate at every capacity and the working sets of a trace",
    "verify": "check the one-pass curve against a naive LRU simulation",
    "model": "KV bytes per token / block and the hybrid reserve of a model",
    "record": "save a live engine's block accesses as a replayable trace",
    "serve": "the live monitor as a Prometheus exporter (/metrics or a node_exporter textfile)",
    "completion": "print a shell completion script: source <(kvset completion bash)",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `kvset` parser: every subcommand whole, or (given the arguments) the one they name whole and
    the others by name and help only. The top parser's own options take no value, so the command is
    the first argument that is not an option."""
    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    parser = CommandParser(
        prog="kvset",
        description="Exact one-pass KV-cache working-set analysis: the LRU hit rate at every capacity.",
    )
    add_version_argument(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_line in COMMANDS.items():
        if chosen is None or name == chosen:
            importlib.import_module(f"kvset.cli.{name}").register(sub)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `kvset analyze ... | head`
        return 0
