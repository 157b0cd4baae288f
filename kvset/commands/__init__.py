"""Subcommands of the `kvset` command; each module has register(subparsers), which the CLI wires in."""
