"""The `kvset` command. Each subcommand lives in its own module with a `register(subparsers)`."""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that add a subcommand; each defines register(subparsers) and sets func on its parser.
SUBCOMMAND_MODULES: list[str] = ["kvset.commands.analyze", "kvset.commands.verify", "kvset.commands.model", "kvset.commands.record"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvset",
        description="Exact one-pass KV-cache working-set analysis: the LRU hit rate at every capacity.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
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
