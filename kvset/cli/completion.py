"""`kvset completion SHELL`: print the completion script of the whole `kvset` command.

The script itself is written by kvset.cli.shell_completion, which the flags import for kvset-top's
--completion; this subcommand needs the whole parser, so it is the one module that imports kvset.cli.
"""

from __future__ import annotations

import argparse

from kvset.cli import (
    COMMANDS,
    build_parser,  # the whole command, subcommands included
)
from kvset.cli.shell_completion import SHELLS, completion_script


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "completion",
        help=COMMANDS["completion"],
        description="Print a completion script for kvset, generated from its own flags. bash: "
        "source <(kvset completion bash) in ~/.bashrc; zsh: source <(kvset completion zsh) in ~/.zshrc.",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(completion_script(build_parser(), args.shell), end="")
    return 0
