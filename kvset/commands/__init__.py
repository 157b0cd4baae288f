"""`kvset` subcommands; each module has register(subparsers)."""
