"""The argument parser of `kvset` and `kvset-top`: usage errors in one line, with where to look.

argparse prints the whole usage (28 lines for kvset-top) before the error, which pushes the one
line that matters off a small screen. A `CommandParser` prints only
`kvset-top: error: argument --speed: ... (see kvset-top --help)` and exits with code 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

import kvset

USAGE_ERROR = 2


def package_version() -> str:
    """The installed kvset-top version (the source tree's own when it is not installed)."""
    from importlib import metadata  # tens of milliseconds (email, socket): only when asked

    try:
        return metadata.version("kvset-top")
    except metadata.PackageNotFoundError:
        return kvset.__version__


class _PrintVersion(argparse.Action):
    """--version, with the version looked up only when asked (argparse's own takes it as a string)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001, ANN204 - argparse's
        sys.stdout.write(f"{parser.prog} {package_version()}\n")
        parser.exit()


def add_version_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", action=_PrintVersion, help="print the version and exit")


_COMMAND_PARSER = "_command_parser"  # the namespace attribute naming the subcommand's own parser


class CommandParser(argparse.ArgumentParser):
    """argparse with one-line usage errors (see the module docstring); subcommands inherit it."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - argparse's own signature
        # no prefix matching: `--by tenant` must not be read as `--bytes-per-token tenant`
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def add_subparsers(self, **kwargs):  # noqa: ANN003, ANN201 - argparse's own signature
        kwargs.setdefault("parser_class", CommandParser)
        kwargs.setdefault("action", _Commands)
        return super().add_subparsers(**kwargs)

    def parse_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 - argparse's own signature
        # argparse reports a subcommand's unknown flag from the top parser ("kvset: error: ..."): name
        # the subcommand instead, whose --help lists its flags
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            owner = getattr(ns, _COMMAND_PARSER, None) or self
            owner.error(f"unrecognized arguments: {' '.join(extras)}")
        if hasattr(ns, _COMMAND_PARSER):
            delattr(ns, _COMMAND_PARSER)
        return ns


class _Commands(argparse._SubParsersAction):
    """Subcommands that remember which one was chosen, for CommandParser.parse_args."""

    def add_parser(self, name, **kwargs):  # noqa: ANN001, ANN003, ANN201 - argparse's own signature
        parser = super().add_parser(name, **kwargs)
        parser.set_defaults(**{_COMMAND_PARSER: parser})
        return parser
