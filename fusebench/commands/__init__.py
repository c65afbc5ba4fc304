"""Subcommands of `fusebench`, one module each, with `add_parser(subparsers)` and `run(args) -> int`."""
