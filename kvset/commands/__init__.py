"""Subcommands of `kvset`; each module has register(subparsers), which the CLI wires in."""
