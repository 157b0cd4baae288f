"""The figures' options on a command's parser, and their values read back (the records: kvset.figures).

Each option is declared once, as data, by the figure that owns it (or by kvset.figures.inputs for the
targets and the capacity every figure reads); a command takes the options that name it. Values that
argparse checks (a positive number) are usage errors; values read after parsing (targets, sizes)
raise ValueError with the one line the command prints.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from kvset.cli import argtypes
from kvset.figures import FIGURES
from kvset.figures.base import Option, OptionValues
from kvset.figures.inputs import INPUT_OPTIONS

# argparse's parser and its argument groups both have add_argument
Parser = argparse.ArgumentParser | argparse._ArgumentGroup


def command_options(command: str) -> tuple[Option[Any], ...]:
    """Every option `command` takes: the inputs' first, then each figure's, in the registry's order."""
    every = INPUT_OPTIONS + tuple(o for figure in FIGURES for o in figure.options)
    return tuple(o for o in every if command in o.commands)


def add_figure_arguments(p: Parser, command: str, groups: Mapping[str, Parser] | None = None) -> None:
    """The options of `command` on `p`, or on the group named by an option's `group` where given."""
    for option in command_options(command):
        target = (groups or {}).get(option.group, p)
        kwargs: dict[str, Any] = {"dest": option.dest, "default": option.default}
        if option.switch:
            kwargs["action"] = "store_true"
        else:
            if option.repeat:
                kwargs["action"], kwargs["default"] = "append", None
            kwargs["metavar"] = option.metavar
            if option.choices is not None:
                kwargs["choices"] = option.choices
                kwargs["metavar"] = None
            if option.argtype is not None:
                kwargs["type"] = getattr(argtypes, option.argtype)
        # argparse reads % as a format: a percentage in the help is written %%
        target.add_argument(option.flag, help=option.help_text(command).replace("%", "%%"), **kwargs)


def option_values(args: argparse.Namespace, command: str) -> OptionValues:
    """The parsed values of `command`'s options; a ValueError names a value that cannot be read."""
    return OptionValues({o.dest: o.read(getattr(args, o.dest, None)) for o in command_options(command)})


def check_figure_options(values: OptionValues, bytes_from: str | None) -> None:
    """Options of a figure that do not fit together (bytes_from: the flags that would give the KV bytes
    per block, None when they are known, so that sizes may be in bytes). Raises ValueError."""
    for figure in FIGURES:
        if figure.check is not None:
            figure.check(values, bytes_from)
